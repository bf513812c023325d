"""Where vLLM starts inside one command's words: `vllm serve ARGS`, the older
`python -m vllm.entrypoints.openai.api_server ARGS` (then `--model` names the model), or
`docker run` / `podman run` of the vLLM image, whose entry point is `vllm serve` so that the words
after the image are its arguments (the image tag names the release). Prefixes such as `nohup`,
`uv run`, `env A=B`, `exec`, `sudo` are not part of the command vLLM sees."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apron.deploy.candidate import Sourced
from apron.deploy.serve_args import Arg

API_SERVER = "vllm.entrypoints.openai.api_server"
# The older demo server: the same engine arguments, but vLLM 0.29-0.33 ship no such module.
DEMO_SERVER = "vllm.entrypoints.api_server"
CLI_MODULE = "vllm.entrypoints.cli.main"  # python -m vllm.entrypoints.cli.main serve, what `vllm` runs
SHELLS = {"sh", "bash", "zsh", "dash"}
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
# docker run's switches (docker run --help); every other option takes a value.
_DOCKER_SWITCHES = {"--detach", "--interactive", "--tty", "--rm", "--privileged", "--init", "--publish-all"}
_DOCKER_SWITCHES |= {"--read-only", "--sig-proxy", "--oom-kill-disable", "--no-healthcheck", "--quiet", "--help"}
_DOCKER_SWITCHES |= {"--disable-content-trust", "--replace", "--tls-verify"}
_SHORT_SWITCHES = re.compile(r"-[ditPq]+")
_RELEASE_TAG = re.compile(r"v?(\d+\.\d+\.\d+(?:\.\d+)?(?:(?:rc|\.post)\d+)?)(?:[-+].*)?")


@dataclass
class Invocation:
    entry: str
    argv: list[Arg]
    env: list[tuple[str, str, str, bool]] = field(default_factory=list)
    image: str | None = None
    engine: Sourced | None = None
    gpu_count: Sourced | None = None
    notes: list[str] = field(default_factory=list)


def is_vllm_image(image: str) -> bool:
    """vLLM's OpenAI server image (docker.io/vllm/vllm-openai, mirrors of it): entry point `vllm serve`."""
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return name.startswith("vllm-openai")


def image_release(image: str, where: str) -> Sourced | None:
    """The release an image tag names (vllm/vllm-openai:v0.19.1); `latest`, `nightly` or a digest: none."""
    if not is_vllm_image(image) or "@" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    match = _RELEASE_TAG.fullmatch(tag)
    return Sourced(match.group(1), where) if match else None


def find_invocation(
    words: Sequence[Arg], script: Callable[[Arg], Invocation | None] | None = None
) -> Invocation | None:
    """The vLLM start in these words; `script` reads the string of a `sh -c` (a nested script)."""
    for i, word in enumerate(words):
        base = word.text.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1].text == "serve":
            return Invocation("vllm serve", list(words[i + 2 :]), _assignments(words[:i]))
        after_m = i > 0 and words[i - 1].text == "-m"
        if word.text == API_SERVER and after_m:
            return Invocation(f"python -m {API_SERVER}", list(words[i + 1 :]), _assignments(words[:i]))
        if word.text == CLI_MODULE and after_m and i + 1 < len(words) and words[i + 1].text == "serve":
            return Invocation(f"python -m {CLI_MODULE} serve", list(words[i + 2 :]), _assignments(words[:i]))
        if word.text == DEMO_SERVER and after_m:
            note = f"python -m {DEMO_SERVER} is vLLM's old demo server: releases 0.29-0.33 have no such module"
            return Invocation(f"python -m {DEMO_SERVER}", list(words[i + 1 :]), _assignments(words[:i]), notes=[note])
        if base in ("docker", "podman", "nerdctl") and _runs(words, i):
            return _container_run(words, i, script)
        if base in SHELLS and script is not None:
            for j in range(i + 1, len(words) - 1):
                if words[j].text.startswith("-") and "c" in words[j].text and not words[j].text.startswith("--"):
                    rest = [w for w in words[j + 1 :] if w.text != "--"]  # sh -c -- 'script'
                    return script(rest[0]) if rest else None
    return None


def _runs(words: Sequence[Arg], i: int) -> bool:
    rest = [w.text for w in words[i + 1 : i + 3]]
    return rest[:1] == ["run"] or rest == ["container", "run"]


def _assignments(words: Sequence[Arg]) -> list[tuple[str, str, str, bool]]:
    """`env A=B` and `A=B` words before the command."""
    out = []
    for word in words:
        match = _ASSIGNMENT.fullmatch(word.text)
        if match:
            out.append((match.group(1), match.group(2), word.where, bool(word.unresolved)))
    return out


def _container_run(
    words: Sequence[Arg], i: int, script: Callable[[Arg], Invocation | None] | None
) -> Invocation | None:
    tool = words[i].text.rsplit("/", 1)[-1]
    j = i + (3 if words[i + 1].text == "container" else 2)
    env: list[tuple[str, str, str, bool]] = _assignments(words[:i])
    entrypoint: str | None = None
    gpus: list[tuple[str, str]] = []
    notes: list[str] = []
    while j < len(words) and words[j].text.startswith("-"):
        name, sep, inline = words[j].text.partition("=")
        switch = name in _DOCKER_SWITCHES or bool(_SHORT_SWITCHES.fullmatch(name))
        if switch or sep:
            value, j = (inline if sep else None), j + 1
        else:
            value, j = (words[j + 1].text if j + 1 < len(words) else None), j + 2
        where = words[min(j - 1, len(words) - 1)].where
        if name in ("-e", "--env") and value:
            key, has_value, val = value.partition("=")
            env.append((key, val if has_value else f"${key}", where, not has_value))
        elif name == "--env-file" and value:
            notes.append(f"{tool} run reads more variables from {value}, which Apron does not read")
        elif name == "--entrypoint" and value:
            entrypoint = value
        elif name == "--gpus" and value:
            gpus.append((value.strip("'\""), where))
        elif name == "--device" and value and value.startswith("nvidia.com/gpu="):
            gpus.append(("device=" + value.partition("=")[2], where))
    if j >= len(words):
        return None
    image, rest = words[j], list(words[j + 1 :])
    engine = image_release(image.text, image.where)
    if entrypoint is not None or not is_vllm_image(image.text):
        head = [Arg(entrypoint, image.where)] if entrypoint else []
        inner = find_invocation(head + rest, script)
        if inner is None:
            return None
        inner.env[:0] = env
        inner.engine = inner.engine or engine
        inner.image = image.text
        inner.gpu_count = inner.gpu_count or _gpu_count(gpus, env)
        inner.notes[:0] = notes
        return inner
    entry = f"{tool} run {image.text} (entry point: vllm serve)"
    return Invocation(entry, rest, env, image.text, engine, _gpu_count(gpus, env), notes)


def _gpu_count(gpus: list[tuple[str, str]], env: list[tuple[str, str, str, bool]]) -> Sourced | None:
    """--gpus N, --gpus "device=0,1", podman's --device nvidia.com/gpu=0 (one each); 'all' is every GPU
    of the host, a number Apron cannot know."""
    total = 0
    for value, where in gpus:
        device = re.search(r"device=([\w,-]+)", value)
        if value.split(",")[0] == "all" or (device and device.group(1) == "all"):
            return Sourced("all", where)
        if device:
            total += len(device.group(1).split(","))
        elif re.fullmatch(r"\d+", value.split(",")[0]):
            total += int(value.split(",")[0])
    if total:
        return Sourced(total, gpus[-1][1])
    return visible_devices(env)


def visible_devices(env: list[tuple[str, str, str, bool]]) -> Sourced | None:
    """CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES=0,1: the GPUs the process sees."""
    for name, value, where, unresolved in reversed(env):
        if name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES") and not unresolved and value.strip():
            if value.strip() == "all":
                return Sourced("all", where)
            return Sourced(len([d for d in value.split(",") if d.strip()]), where)
    return None
