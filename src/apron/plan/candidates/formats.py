"""Where a `vllm serve` invocation sits in each kind of deployment file, and what else the file says
(GPU type and count, engine release). Each reader follows its format's documented schema:

- a shell command line or script: the first line that runs `vllm serve` or the OpenAI api_server module
  (backslash continuations joined, `NAME=value` prefixes read as environment);
- a recipe YAML: `model`, `revision`, `gpu` / `gpu_count` or `hardware: {gpu, count}`, `vllm_version`,
  and the flags as `args` (a list, a string or a mapping) or a whole `command`;
- a SkyPilot task YAML: `resources.accelerators` (`H100:8`, `{H100: 8}`, or a list / `any_of` /
  `ordered` of choices, the first taken), `envs` substituted into `run` (with SKYPILOT_NUM_GPUS_PER_NODE),
  `resources.image_id` or a `vllm==X` pin in `setup` for the release;
- Kubernetes manifests (Deployment, StatefulSet, Pod, Job, LeaderWorkerSet; llm-d's rendered decode
  Deployments): the first container whose command/args run vLLM (the vllm/vllm-openai image's entrypoint
  is `vllm serve`), `$(VAR)` from its env, `nvidia.com/gpu` from its limits, the GPU type from the
  GPU-feature-discovery `nvidia.com/gpu.product` or GKE `cloud.google.com/gke-accelerator` node label.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from apron.errors import BadInput

_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env")
_API_SERVER = "vllm.entrypoints.openai.api_server"
_VERSION_PIN = re.compile(r"\bvllm(?:\[[^\]]*\])?==(\d+\.\d+\.\d+)")
_IMAGE_TAG = re.compile(r"vllm-openai:v?(\d+\.\d+\.\d+)")
# SkyPilot's accelerator names (sky/catalog) -> Apron's catalog; SkyPilot's bare A100 is the 40 GB card.
SKY_NAMES = {
    "H100": "NVIDIA H100 80GB HBM3",
    "H100-MEGA": "NVIDIA H100 80GB HBM3",
    "H100-NVL": "NVIDIA H100 NVL",
    "H200": "NVIDIA H200",
    "B200": "NVIDIA B200",
    "A100-80GB": "NVIDIA A100-SXM4-80GB",
    "A100": "NVIDIA A100-SXM4-40GB",
    "L4": "NVIDIA L4",
    "L40S": "NVIDIA L40S",
    "L40": "NVIDIA L40",
    "A10G": "NVIDIA A10G",
    "A10": "NVIDIA A10",
    "RTX4090": "NVIDIA GeForce RTX 4090",
    "RTX3090": "NVIDIA GeForce RTX 3090",
    "RTX5090": "NVIDIA GeForce RTX 5090",
    "A6000": "NVIDIA RTX A6000",
    "RTX6000-Ada": "NVIDIA RTX 6000 Ada Generation",
    "T4": "Tesla T4",
    "V100-32GB": "Tesla V100-SXM2-32GB",
}
# GKE's cloud.google.com/gke-accelerator values (cloud.google.com/kubernetes-engine/docs/how-to/gpus).
GKE_NAMES = {
    "nvidia-h100-80gb": "NVIDIA H100 80GB HBM3",
    "nvidia-h100-mega-80gb": "NVIDIA H100 80GB HBM3",
    "nvidia-h200-141gb": "NVIDIA H200",
    "nvidia-b200": "NVIDIA B200",
    "nvidia-a100-80gb": "NVIDIA A100-SXM4-80GB",
    "nvidia-tesla-a100": "NVIDIA A100-SXM4-40GB",
    "nvidia-l4": "NVIDIA L4",
    "nvidia-tesla-t4": "Tesla T4",
}
_GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")


@dataclass
class Found:
    """What a file says about one deployment, before the flags are sorted."""

    kind: str  # vllm-command | recipe | skypilot | kubernetes
    argv: list[str]  # the arguments after `vllm serve`
    gpu: str | None = None  # as the file names it
    gpu_name: str | None = None  # a catalog name where the file's naming is not the catalog's
    gpu_count: int | None = None
    engine: str | None = None
    model: str | None = None  # a recipe's model field (the command may omit it)
    revision: str | None = None
    not_understood: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def serve_argv(text: str, where: str, env: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The arguments after `vllm serve` in a command line or script, and the NAME=value prefixes."""
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        if "vllm" not in line:
            continue
        words = _split(_substitute(line, env or {}), where)
        found = locate(words)
        if found is not None:
            start, prefix = found
            return words[start:], prefix
    raise BadInput(f"{where}: no `vllm serve` command found; give a vllm serve command line")


def locate(words: list[str]) -> tuple[int, list[str]] | None:
    """Index after `vllm serve` / `-m vllm.entrypoints.openai.api_server`, and env prefixes before it."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return i + 2, _env_prefix(words[:i])
        if word == _API_SERVER and i > 0 and words[i - 1] == "-m":
            return i + 1, _env_prefix(words[: i - 1])
    return None


def _env_prefix(words: list[str]) -> list[str]:
    return [w for w in words if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]


def _split(line: str, where: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError as exc:
        raise BadInput(f"{where}: cannot split the vllm serve line into words ({exc})") from exc


def _substitute(text: str, env: dict[str, str]) -> str:
    """$VAR, ${VAR} (shell, SkyPilot) and $(VAR) (Kubernetes) from the file's own environment; unset
    variables stay as written, so they surface in the flags Apron does not understand."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        return env.get(name, match.group(0))

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$\(([A-Za-z_]\w*)\)|\$([A-Za-z_]\w*)", value, text)


def engine_in(text: str) -> str | None:
    match = _VERSION_PIN.search(text) or _IMAGE_TAG.search(text)
    return match.group(1) if match else None


# ------------------------------------------------------------------ recipe


_RECIPE_KEYS = {"model", "revision", "gpu", "gpu_count", "hardware", "vllm_version", "args", "command"}
_RECIPE_INFO = {"name", "title", "description", "notes", "tags", "url", "source"}


def read_recipe(doc: dict[str, Any], where: str) -> Found:
    model, revision = _recipe_model(doc, where)
    hardware = doc.get("hardware") or {}
    if isinstance(hardware, str):
        hardware = {"gpu": hardware}
    if not isinstance(hardware, dict):
        raise BadInput(f"{where}: field 'hardware' must be a GPU name or {{gpu, count}}")
    gpu = doc.get("gpu") or hardware.get("gpu")
    count = doc.get("gpu_count") or hardware.get("count")
    if doc.get("command") is not None:
        argv, _ = serve_argv(str(doc["command"]), f"{where}: field 'command'")
    else:
        argv = _recipe_args(doc.get("args"), where)
        if model and not any(not w.startswith("-") for w in argv[:1]):
            argv = [model, *argv]
    found = Found("recipe", argv, str(gpu) if gpu else None, None, _count(count, f"{where}: gpu count"))
    found.engine = str(doc["vllm_version"]).removeprefix("v") if doc.get("vllm_version") else None
    found.model, found.revision = model, revision
    found.not_understood += [f"field {k}" for k in sorted(set(doc) - _RECIPE_KEYS - _RECIPE_INFO)]
    return found


def _recipe_model(doc: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    model = doc.get("model")
    if isinstance(model, dict):
        return model.get("id") or model.get("name"), model.get("revision") or doc.get("revision")
    if model is not None and not isinstance(model, str):
        raise BadInput(f"{where}: field 'model' must be a repo id or {{id, revision}}")
    return model, doc.get("revision")


def _recipe_args(args: object, where: str) -> list[str]:
    if args is None:
        return []
    if isinstance(args, str):
        return _split(args, f"{where}: field 'args'")
    if isinstance(args, list):
        return [str(a) for a in args]
    if isinstance(args, dict):
        out: list[str] = []
        for key, value in args.items():
            flag = "--" + str(key).lstrip("-")
            if value is True:
                out.append(flag)
            elif value is False:
                out.append("--no-" + flag[2:])
            elif value is not None:
                out += [flag, str(value)]
        return out
    raise BadInput(f"{where}: field 'args' must be a list, a string or a mapping of flags")


# ------------------------------------------------------------------ SkyPilot


def read_skypilot(doc: dict[str, Any], where: str) -> Found:
    run = doc.get("run")
    if not isinstance(run, str):
        raise BadInput(f"{where}: SkyPilot field 'run' must be the script that runs vllm serve")
    resources = doc.get("resources") or {}
    gpu, count = _sky_accelerator(resources, where)
    envs = {str(k): str(v) for k, v in (doc.get("envs") or {}).items() if v is not None}
    if count is not None:
        envs.setdefault("SKYPILOT_NUM_GPUS_PER_NODE", str(count))
    argv, _ = serve_argv(run, f"{where}: field 'run'", envs)
    found = Found("skypilot", argv, gpu, SKY_NAMES.get(gpu or ""), count)
    found.engine = engine_in(str(doc.get("setup") or "")) or engine_in(str(resources.get("image_id") or ""))
    nodes = doc.get("num_nodes") or 1
    if nodes != 1:
        found.not_understood.append(f"num_nodes {nodes}")
    return found


def _sky_accelerator(resources: dict[str, Any], where: str) -> tuple[str | None, int | None]:
    for key in ("any_of", "ordered"):
        choices = resources.get(key)
        if isinstance(choices, list) and choices:
            resources = {**choices[0], **{k: v for k, v in resources.items() if k not in ("any_of", "ordered")}}
    spec = resources.get("accelerators")
    if isinstance(spec, list) and spec:
        spec = spec[0]
    if isinstance(spec, dict) and spec:
        name, count = next(iter(spec.items()))
        return str(name), _count(count, f"{where}: resources.accelerators")
    if isinstance(spec, str):
        name, _, count = spec.partition(":")
        return name.strip(), _count(count or 1, f"{where}: resources.accelerators")
    return None, None


# ------------------------------------------------------------------ Kubernetes


def read_kubernetes(docs: list[dict[str, Any]], where: str) -> Found:
    pods = [p for doc in docs for p in _pod_specs(doc)]
    runs = [(pod, c, r) for pod in pods for c in pod.get("containers") or [] if (r := _container_run(c, where))]
    if not runs:
        raise BadInput(f"{where}: no container runs vllm serve (looked in {len(pods)} pod templates)")
    pod, container, argv = runs[0]
    limits = (container.get("resources") or {}).get("limits") or {}
    requests = (container.get("resources") or {}).get("requests") or {}
    count = limits.get("nvidia.com/gpu") or requests.get("nvidia.com/gpu")
    label, value = _node_gpu(pod)
    found = Found("kubernetes", argv, value, GKE_NAMES.get(value or "") if label else None, _count(count, where))
    found.engine = engine_in(str(container.get("image") or ""))
    if len(runs) > 1:
        names = ", ".join(str(c.get("name")) for _, c, _ in runs[1:])
        found.notes.append(f"read container {container.get('name')!r}; more containers run vLLM ({names})")
    return found


def _pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "List":
        return [p for item in doc.get("items") or [] if isinstance(item, dict) for p in _pod_specs(item)]
    if kind == "Pod":
        return [spec]
    if kind == "LeaderWorkerSet":
        lws = spec.get("leaderWorkerTemplate") or {}
        templates = [lws.get("leaderTemplate"), lws.get("workerTemplate")]
        return [t.get("spec") or {} for t in templates if isinstance(t, dict)]
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    return [template.get("spec") or {}] if isinstance(template, dict) else []


def _container_run(container: dict[str, Any], where: str) -> list[str] | None:
    env = {str(e.get("name")): str(e.get("value")) for e in container.get("env") or [] if e.get("value") is not None}
    words = [_substitute(str(w), env) for w in (container.get("command") or []) + (container.get("args") or [])]
    if words and words[0] in _SHELLS and "-c" in words:
        script = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
        return serve_argv(script, f"{where}: container {container.get('name')!r}", env)[0] if "vllm" in script else None
    found = locate(words)
    if found is not None:
        return words[found[0] :]
    if not container.get("command") and "vllm-openai" in str(container.get("image") or ""):
        return words  # the image's entrypoint is `vllm serve`
    return None


def _node_gpu(pod: dict[str, Any]) -> tuple[str | None, str | None]:
    selector = pod.get("nodeSelector") or {}
    for label in _GPU_LABELS:
        if selector.get(label):
            return label, str(selector[label])
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") in _GPU_LABELS and expr.get("operator") == "In" and expr.get("values"):
                return expr["key"], str(expr["values"][0])
    return None, None


def _count(value: object, where: str) -> int | None:
    if value is None:
        return None
    try:
        count = int(str(value))
    except ValueError:
        raise BadInput(f"{where}: GPU count {value!r} is not a whole number") from None
    if count < 1:
        raise BadInput(f"{where}: GPU count {count} must be 1 or more")
    return count
