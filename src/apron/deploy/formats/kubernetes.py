"""Kubernetes manifests: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Pod, List,
KServe ServingRuntime and LeaderWorkerSet (`spec.leaderWorkerTemplate.size` pods per group: more
than one is multi-node; the leader runs the server).

In each pod template the engine is the container that starts vLLM: its `command` and `args` (with
`$(VAR)` from the container's env, as the kubelet expands them), a `sh -c` script, or the
vllm/vllm-openai image's own entry point (`vllm serve`) when only `args` are given. Sidecars, init
containers and workers that do not start vLLM are passed over. The GPU count is the container's
`nvidia.com/gpu` limit (or request); the GPU type comes from the pod's node selector or required
node affinity (GKE `cloud.google.com/gke-accelerator`, GPU feature discovery `nvidia.com/gpu.product`,
EKS and GKE instance types, Karpenter's instance family or GPU name).
"""

from __future__ import annotations

import re
from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import (
    Document,
    entries,
    found_from,
    is_data,
    mapping,
    script_founds,
    sourced_count,
)
from apron.deploy.formats.base import words as word_list
from apron.deploy.gpus import GPU_LABELS, from_label
from apron.deploy.invocation import Invocation, find_invocation, image_release, is_vllm_image
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "kubernetes"
TITLE = "Kubernetes manifests"
_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")


def claims(document: Document) -> bool:
    docs = document.mappings
    if not docs or not is_data(document):
        return False
    kinds = [d.get("kind") for d in docs if "apiVersion" in d and "kind" in d]
    return bool(kinds) and "InferenceService" not in kinds


def read(document: Document) -> list[Found]:
    founds: list[Found] = []
    looked = 0
    for doc in document.mappings:
        name = str(mapping(doc.get("metadata"), f"{document.name}: metadata").get("name") or doc.get("kind"))
        for pod, where, nodes in pod_templates(doc, document.name):
            containers = entries(pod.get("containers"), f"{document.name}: {where}.containers")
            looked += len(containers)
            engines = [
                found
                for index, container in enumerate(containers)
                if (found := engine_container(container, pod, f"{where}.containers[{index}]")) is not None
            ]
            for found in engines:
                found.name = name if len(engines) == 1 else f"{name}/{found.name}"
                _multi_node(found, nodes)
            founds += engines
            if engines and ".leaderTemplate." in where:
                break  # the leader runs the server; the workers join it
    if not founds:
        raise BadInput(f"{document.name}: Kubernetes manifests, but no container starts vLLM ({looked} containers)")
    return founds


def pod_templates(doc: dict[str, Any], file: str) -> list[tuple[dict[str, Any], str, Sourced | None]]:
    """(pod spec, where, pods per group) for each pod template the object runs."""
    kind = str(doc.get("kind"))
    name = str(mapping(doc.get("metadata"), f"{file}: {kind} metadata").get("name") or kind)
    at = f"{kind}/{name} spec"
    spec = mapping(doc.get("spec"), f"{file}: {at}")
    if kind == "List":
        return [t for item in entries(doc.get("items"), f"{file}: List items") for t in pod_templates(item, file)]
    if kind == "Pod" or kind in ("ServingRuntime", "ClusterServingRuntime"):
        return [(spec, at, None)]
    if kind == "LeaderWorkerSet":
        lws = mapping(spec.get("leaderWorkerTemplate"), f"{file}: {at}.leaderWorkerTemplate")
        size = sourced_count(lws.get("size"), f"{at}.leaderWorkerTemplate.size") if "size" in lws else None
        out = []
        for key in ("leaderTemplate", "workerTemplate"):
            template = mapping(lws.get(key), f"{file}: {at}.leaderWorkerTemplate.{key}")
            if template:
                where = f"{at}.leaderWorkerTemplate.{key}.spec"
                out.append((mapping(template.get("spec"), f"{file}: {where}"), where, size))
        return out
    if kind == "CronJob":
        at += ".jobTemplate.spec"
        spec = mapping(mapping(spec.get("jobTemplate"), f"{file}: {at}").get("spec"), f"{file}: {at}")
    template = mapping(spec.get("template"), f"{file}: {at}.template")
    if not template:
        return []
    return [(mapping(template.get("spec"), f"{file}: {at}.template.spec"), f"{at}.template.spec", None)]


def engine_container(container: dict[str, Any], pod: dict[str, Any], where: str) -> Found | None:
    env, env_list = _env(container, where)
    invocation = _invocation(container, env, where)
    if invocation is None:
        return None
    found = found_from(invocation, where, env_list)
    found.name = str(container.get("name") or "") or None
    image = str(container.get("image") or "")
    found.engine = found.engine or image_release(image, f"{where}.image")
    gpus = container_gpus(container, where)
    if gpus is not None:
        found.gpu_count = gpus
    node_gpu(found, pod, where.rsplit(".containers", 1)[0])
    if container.get("envFrom"):
        found.notes.append(f"{where}.envFrom: variables from a ConfigMap or Secret, which Apron does not read")
    return found


def _env(container: dict[str, Any], where: str) -> tuple[dict[str, str], list[tuple[str, str, str, bool]]]:
    known: dict[str, str] = {}
    listed: list[tuple[str, str, str, bool]] = []
    for index, item in enumerate(entries(container.get("env"), f"{where}.env")):
        if not item.get("name"):
            continue
        name, at = str(item["name"]), f"{where}.env[{index}]"
        if "value" in item and item["value"] is not None:
            value = expand(str(item["value"]), known)[0]
            known[name] = value
            listed.append((name, value, at, False))
        else:
            source = next(iter(mapping(item.get("valueFrom"), f"{at}.valueFrom")), "valueFrom")
            listed.append((name, f"$({name})", f"{at} ({source})", True))
    return known, listed


def expand(text: str, env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """`$(VAR)` from the container's env (the kubelet's expansion); `$$` is a literal `$`; an unknown
    `$(VAR)` stays as written and is returned as unresolved."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(1) in env:
            return env[match.group(1)]
        missing.append(match.group(0))
        return match.group(0)

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value, text), tuple(missing)


def _invocation(container: dict[str, Any], env: dict[str, str], where: str) -> Invocation | None:
    words: list[Arg] = []
    for key in ("command", "args"):
        for index, word in enumerate(word_list(container.get(key), f"{where}.{key}")):
            text, unresolved = expand(str(word), env)
            words.append(Arg(text, f"{where}.{key}[{index}]", unresolved))

    def script(arg: Arg) -> Invocation | None:
        founds = script_founds(arg.text, arg.where, env)
        if not founds:
            return None
        f = founds[0]
        return Invocation(f.entry, f.argv, f.env, None, f.engine, f.gpu_count, f.notes)

    found = find_invocation(words, script)
    if found is not None:
        return found
    image = str(container.get("image") or "")
    if not container.get("command") and is_vllm_image(image):
        return Invocation(f"the {image} image's entry point (vllm serve)", words)
    return None


def container_gpus(container: dict[str, Any], where: str) -> Sourced | None:
    resources = mapping(container.get("resources"), f"{where}.resources")
    for part in ("limits", "requests"):
        values = mapping(resources.get(part), f"{where}.resources.{part}")
        for key in _GPU_RESOURCES:
            if key in values:
                return sourced_count(values[key], f"{where}.resources.{part}[{key}]")
    return None


def node_gpu(found: Found, pod: dict[str, Any], where: str) -> None:
    """The GPU type from the pod's node selector or required node affinity."""
    selector = mapping(pod.get("nodeSelector"), f"{where}.nodeSelector")
    for label in GPU_LABELS:
        if selector.get(label):
            _set_gpu(found, label, [str(selector[label])], f"{where}.nodeSelector[{label}]")
            return
    affinity = mapping(mapping(pod.get("affinity"), f"{where}.affinity").get("nodeAffinity"), f"{where}.affinity")
    required = mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), f"{where}.affinity")
    for t, term in enumerate(entries(required.get("nodeSelectorTerms"), f"{where}.affinity...nodeSelectorTerms")):
        for e, expr in enumerate(entries(term.get("matchExpressions"), f"{where}.affinity...matchExpressions")):
            if expr.get("key") in GPU_LABELS and expr.get("operator") == "In" and expr.get("values"):
                at = f"{where}.affinity.nodeAffinity...nodeSelectorTerms[{t}].matchExpressions[{e}]"
                _set_gpu(found, expr["key"], [str(v) for v in expr["values"]], at)
                return


def _set_gpu(found: Found, label: str, values: list[str], where: str) -> None:
    found.gpu = Sourced(values[0], where)
    found.gpu_name = from_label(label, values[0])
    if found.gpu_name is None:
        found.notes.append(f"{where}: {label}={values[0]} is a GPU Apron cannot name; give --gpu")
    if len(values) > 1:
        found.notes.append(
            f"{where}: the pod may land on any of {', '.join(values)}: planned on {values[0]}, the first listed"
        )


def _multi_node(found: Found, nodes: Sourced | None) -> None:
    if nodes is not None and nodes.value > 1:
        found.num_nodes = nodes
        found.not_planned.append(f"{nodes.value} pods per group ({nodes.where}): multi-node, the plan is for one")
