"""Helm values for vLLM production-stack: `servingEngineSpec.modelSpec[]`, one deployment each, with
`modelURL` (the model), `repository` + `tag` (the image: vllm/vllm-openai's tag names the release),
`requestGPU` (GPUs per replica), `replicaCount`, `vllmConfig` (maxModelLen -> --max-model-len,
tensorParallelSize, pipelineParallelSize, maxNumSeqs, gpuMemoryUtilization, dtype, maxLoras;
enablePrefixCaching / enableChunkedPrefill true or false -> --x / --no-x; `extraArgs` as written;
another key is listed as not planned), `env`, `nodeSelectorTerms` for the GPU type, and `lmcacheConfig` (KV offloading: not
planned). These are values a chart renders, not manifests."""

from __future__ import annotations

from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, entries, flags_from_mapping, is_data, node, sourced_count, strings
from apron.deploy.gpus import GPU_LABELS, from_label
from apron.deploy.invocation import image_release
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

# The vllmConfig keys the chart turns into flags (the research note's list and the chart's values
# schema); any other key is listed as not planned rather than guessed into a flag.
VLLM_CONFIG = {
    "maxModelLen": "max-model-len",
    "dtype": "dtype",
    "tensorParallelSize": "tensor-parallel-size",
    "pipelineParallelSize": "pipeline-parallel-size",
    "maxNumSeqs": "max-num-seqs",
    "gpuMemoryUtilization": "gpu-memory-utilization",
    "enablePrefixCaching": "enable-prefix-caching",
    "enableChunkedPrefill": "enable-chunked-prefill",
    "maxLoras": "max-loras",
}
NAME = "production-stack"
TITLE = "Helm values for vLLM production-stack"


def claims(document: Document) -> bool:
    doc = document.mapping
    return doc is not None and is_data(document) and isinstance(doc.get("servingEngineSpec"), dict)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    specs = node(doc, "servingEngineSpec", "modelSpec")
    if not isinstance(specs, list) or not specs:
        raise BadInput(f"{document.name}: {TITLE}, but servingEngineSpec.modelSpec lists no model")
    return [_model(spec, f"servingEngineSpec.modelSpec[{i}]", document.name) for i, spec in enumerate(specs)]


def _model(spec: Any, at: str, file: str) -> Found:
    if not isinstance(spec, dict):
        raise BadInput(f"{file}: {at} must be a mapping (name, modelURL, vllmConfig, ...)")
    if not spec.get("modelURL"):
        raise BadInput(f"{file}: {at}.modelURL is missing: the model to serve")
    config = spec.get("vllmConfig") or {}
    if not isinstance(config, dict):
        raise BadInput(f"{file}: {at}.vllmConfig must be a mapping of settings")
    argv = [
        Arg(a.text, f"{at}.vllmConfig.{key}")
        for key, value in config.items()
        if key in VLLM_CONFIG
        for a in flags_from_mapping({VLLM_CONFIG[key]: value}, "")
    ]
    extra = strings(config.get("extraArgs"), f"{file}: {at}.vllmConfig.extraArgs")
    argv += [Arg(w, f"{at}.vllmConfig.extraArgs[{i}]") for i, w in enumerate(extra)]
    found = Found(argv, at, "the chart's vllm serve", name=str(spec.get("name") or at))
    found.not_planned += [
        f"{at}.vllmConfig.{key} (Apron does not know how the chart passes it)"
        for key in config
        if key not in VLLM_CONFIG and key != "extraArgs"
    ]
    found.model = Sourced(str(spec["modelURL"]), f"{at}.modelURL")
    image = f"{spec.get('repository') or ''}:{spec.get('tag') or ''}"
    found.engine = image_release(image, f"{at}.tag")
    found.gpu_count = sourced_count(spec.get("requestGPU"), f"{at}.requestGPU")
    found.env = [(str(e.get("name")), str(e.get("value")), f"{at}.env[{i}]", "value" not in e)
                 for i, e in enumerate(entries(spec.get("env"), f"{file}: {at}.env"))]  # fmt: skip
    _gpu_type(found, spec, at)
    if node(spec, "lmcacheConfig", "enabled"):
        found.not_planned.append(f"LMCache KV offloading ({at}.lmcacheConfig)")
    replicas = spec.get("replicaCount")
    if isinstance(replicas, int) and replicas > 1:
        found.notes.append(f"{at}.replicaCount {replicas}: each replica is planned alone")
    return found


def _gpu_type(found: Found, spec: dict[str, Any], at: str) -> None:
    for t, term in enumerate(entries(spec.get("nodeSelectorTerms"), f"{at}.nodeSelectorTerms")):
        for e, expr in enumerate(entries(term.get("matchExpressions"), f"{at}.nodeSelectorTerms[{t}]")):
            if expr.get("key") in GPU_LABELS and expr.get("values"):
                value = str(expr["values"][0])
                found.gpu = Sourced(value, f"{at}.nodeSelectorTerms[{t}].matchExpressions[{e}]")
                found.gpu_name = from_label(expr["key"], value)
                return
