"""Helm values for llm-d's modelservice chart: `modelArtifacts.uri` (`hf://ORG/NAME`, the model) and
`modelArtifacts.name` (the served name); `decode` and `prefill`, each its own deployment (planned
apart), with `replicas`, `parallelism.tensor` (the chart adds `--tensor-parallel-size`),
`parallelism.dataLocal` (GPUs per pod = tensor x dataLocal), `containers[]` (`args`, `env`,
`resources`, `modelCommand`), the GPU type from `acceleratorTypes` or a node selector, and
`multinode` (LeaderWorkerSet pods: multi-node)."""

from __future__ import annotations

from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, count, entries, is_data, node, strings
from apron.deploy.formats.kubernetes import container_gpus, engine_container
from apron.deploy.gpus import GPU_LABELS, from_label
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "llm-d"
TITLE = "Helm values for llm-d modelservice"
ROLES = ("prefill", "decode")


def claims(document: Document) -> bool:
    doc = document.mapping
    return doc is not None and is_data(document) and isinstance(doc.get("modelArtifacts"), dict)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    uri = str(node(doc, "modelArtifacts", "uri") or "")
    model = Sourced(uri.removeprefix("hf://"), "modelArtifacts.uri") if uri.startswith("hf://") else None
    founds = []
    for role in ROLES:
        spec = doc.get(role)
        if isinstance(spec, dict) and spec.get("create", True) is not False and spec.get("replicas", 1) != 0:
            founds.append(_role(role, spec, doc, model, document.name))
    if not founds:
        raise BadInput(f"{document.name}: {TITLE}, but neither decode nor prefill is created")
    if model is None:
        for found in founds:
            found.notes.append(f"modelArtifacts.uri {uri or '(none)'} is not a Hub id: give SOURCE for the weights")
    return founds


def _role(role: str, spec: dict[str, Any], doc: dict[str, Any], model: Sourced | None, file: str) -> Found:
    containers = entries(spec.get("containers"), f"{file}: {role}.containers")
    container = next((c for c in containers if c.get("name") == "vllm"), containers[0] if containers else {})
    index = containers.index(container) if container in containers else 0
    at = f"{role}.containers[{index}]"
    tensor = count(node(spec, "parallelism", "tensor") or 1, f"{file}: {role}.parallelism.tensor") or 1
    local = count(node(spec, "parallelism", "dataLocal") or 1, f"{file}: {role}.parallelism.dataLocal") or 1
    command = container.get("modelCommand") or "vllmServe"
    if command == "custom" or container.get("command"):  # the container's own command, as written
        found = engine_container(container, spec, at)
        if found is None:
            raise BadInput(f"{file}: {at} (modelCommand {command}) does not start vLLM")
        found.name, found.model = role, found.model or model
    else:
        # vllmServe: the chart runs `vllm serve MODEL --tensor-parallel-size T` and the args
        argv = [
            Arg("--tensor-parallel-size", f"{role}.parallelism.tensor"),
            Arg(str(tensor), f"{role}.parallelism.tensor"),
        ]
        argv += [Arg(w, f"{at}.args[{i}]") for i, w in enumerate(strings(container.get("args"), f"{at}.args"))]
        found = Found(argv, at, f"the chart's vllm serve ({command})", name=role)
        found.model = model
    found.gpu_count = container_gpus(container, at) or Sourced(tensor * local, f"{role}.parallelism")
    found.env = [(str(e.get("name")), str(e.get("value")), f"{at}.env[{i}]", "value" not in e)
                 for i, e in enumerate(entries(container.get("env"), f"{file}: {at}.env"))]  # fmt: skip
    _gpu_type(found, spec, doc, role)
    if local > 1:
        found.not_planned.append(f"{role}.parallelism.dataLocal {local}: data-parallel ranks, each planned alone")
    if doc.get("multinode") or node(spec, "parallelism", "workers"):
        found.not_planned.append("multinode: the pods span several nodes; the plan is for one")
    if isinstance(spec.get("replicas"), int) and spec["replicas"] > 1:
        found.notes.append(f"{role}.replicas {spec['replicas']}: each replica is planned alone")
    return found


def _gpu_type(found: Found, spec: dict[str, Any], doc: dict[str, Any], role: str) -> None:
    for where, types in ((f"{role}.acceleratorTypes", spec.get("acceleratorTypes")),
                         ("acceleratorTypes", doc.get("acceleratorTypes"))):  # fmt: skip
        if isinstance(types, dict) and types.get("labelKey") in GPU_LABELS and types.get("labelValues"):
            value = str(types["labelValues"][0])
            found.gpu = Sourced(value, f"{where}.labelValues[0]")
            found.gpu_name = from_label(types["labelKey"], value)
            return
    selector = spec.get("nodeSelector") or {}
    for label in GPU_LABELS:
        if selector.get(label):
            found.gpu = Sourced(str(selector[label]), f"{role}.nodeSelector[{label}]")
            found.gpu_name = from_label(label, str(selector[label]))
            return
