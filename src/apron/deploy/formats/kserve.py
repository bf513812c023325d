"""A KServe InferenceService: the Hugging Face serving runtime (`spec.predictor.model.modelFormat.name:
huggingface`) runs vLLM unless `--backend=huggingface`; its own options (`--model_id`, `--model_name`,
`--backend`, ports) are not vllm serve flags and every other argument passes through to vLLM's engine
arguments. The model is `--model_id` or an `hf://` storageUri; GPUs are `resources.limits`; the GPU
type comes from the predictor's node selector. A custom predictor (`spec.predictor.containers`) is
read like a Kubernetes container."""

from __future__ import annotations

from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, entries, is_data, mapping, node, strings
from apron.deploy.formats.kubernetes import container_gpus, engine_container, node_gpu
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "kserve"
TITLE = "KServe InferenceService"
# kserve/python/huggingfaceserver/__main__.py and kserve's model server options: not vLLM's.
_KSERVE_OPTIONS = {
    "model_name", "model_id", "model_dir", "model_revision", "tokenizer_revision", "backend", "task",
    "max_length", "disable_lower_case", "disable_special_tokens", "tensor_input_names",
    "return_token_type_ids", "return_probabilities", "http_port", "grpc_port", "workers", "max_threads",
    "max_asyncio_workers", "enable_grpc", "configure_logging", "log_config_file", "access_log_format",
    "predictor_host", "predictor_protocol", "predictor_use_ssl", "predictor_request_timeout_seconds",
    "enable_docs_url", "enable_latency_logging", "return_raw_logits",
}  # fmt: skip


def claims(document: Document) -> bool:
    return is_data(document) and any(d.get("kind") == "InferenceService" for d in document.mappings)


def read(document: Document) -> list[Found]:
    founds = []
    for doc in document.mappings:
        if doc.get("kind") != "InferenceService":
            continue
        name = str(node(doc, "metadata", "name") or "InferenceService")
        predictor = mapping(node(doc, "spec", "predictor"), f"{document.name}: InferenceService/{name} spec.predictor")
        at = f"InferenceService/{name} spec.predictor"
        model = predictor.get("model")
        if isinstance(model, dict):
            founds.append(_hf_runtime(model, predictor, at, document.name, name))
            continue
        for index, container in enumerate(entries(predictor.get("containers"), f"{document.name}: {at}.containers")):
            found = engine_container(container, predictor, f"{at}.containers[{index}]")
            if found is not None:
                found.name = name
                founds.append(found)
    if not founds:
        raise BadInput(f"{document.name}: a KServe InferenceService whose predictor does not run vLLM")
    return founds


def _hf_runtime(model: dict[str, Any], predictor: dict[str, Any], at: str, file: str, name: str) -> Found:
    form = str(node(model, "modelFormat", "name") or "")
    if form != "huggingface":
        raise BadInput(f"{file}: a KServe InferenceService for model format {form!r}; Apron reads the huggingface one")
    where = f"{at}.model"
    argv: list[Arg] = []
    own: dict[str, tuple[str, str]] = {}
    words = strings(model.get("args"), f"{file}: {where}.args")
    i = 0
    while i < len(words):
        key, sep, value = words[i].partition("=")
        at_word = f"{where}.args[{i}]"
        option = key.lstrip("-").replace("-", "_")
        if key.startswith("--") and option in _KSERVE_OPTIONS:
            if not sep and i + 1 < len(words) and not words[i + 1].startswith("--"):
                value, i = words[i + 1], i + 1
            own[option] = (value, at_word)
        else:
            argv.append(Arg(words[i], at_word))
        i += 1
    backend = own.get("backend", ("auto", ""))[0]
    if backend == "huggingface":
        raise BadInput(f"{file}: a KServe InferenceService on the huggingface backend (transformers, not vLLM)")
    found = Found(argv, where, "KServe huggingface runtime (vLLM backend)", name=name)
    if "model_id" in own:
        found.model = Sourced(own["model_id"][0], own["model_id"][1])
    elif str(model.get("storageUri") or "").startswith("hf://"):
        found.model = Sourced(str(model["storageUri"]).removeprefix("hf://"), f"{where}.storageUri")
    elif model.get("storageUri"):
        found.notes.append(f"{where}.storageUri {model['storageUri']} is not a Hub id: give SOURCE for the weights")
    if backend == "auto":
        found.notes.append("KServe's backend is auto: vLLM where vLLM supports the model (planned as vLLM)")
    shown = " ".join(f"--{k}={v}" for k, (v, _) in own.items())
    if shown:
        found.notes.append(f"KServe's own options (not vllm serve flags): {shown}")
    found.gpu_count = container_gpus(model, where)
    node_gpu(found, predictor, at)
    return found
