"""Apron's own recipe form: `model` (a repo id or {id, revision}), `revision`, `gpu` / `gpu_count` or
`hardware: {gpu, count}`, `vllm_version`, and the flags as `args` (a list, a string or a mapping
`max-model-len: 32768`, `enforce-eager: true`) or a whole `command`."""

from __future__ import annotations

import shlex
from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, flags_from_mapping, is_data, script_founds, sourced_count
from apron.deploy.options import release_options
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "recipe"
TITLE = "recipe"
_KEYS = {"model", "revision", "gpu", "gpu_count", "hardware", "vllm_version", "args", "command"}
_OWN = _KEYS - {"model", "revision"}
_INFO = {"name", "title", "description", "notes", "tags", "url", "source"}


def claims(document: Document) -> bool:
    doc = document.mapping
    if doc is None or not is_data(document) or "model" not in doc or (set(doc) & {"apiVersion", "services"}):
        return False
    model = doc["model"]
    if isinstance(model, dict) and ("model_id" in model or "base_args" in model):
        return False
    return bool(set(doc) & _OWN)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    where = document.name
    model, revision = _model(doc, where)
    hardware = doc.get("hardware") or {}
    if isinstance(hardware, str):
        hardware = {"gpu": hardware}
    if not isinstance(hardware, dict):
        raise BadInput(f"{where}: field 'hardware' must be a GPU name or {{gpu, count}}")
    if doc.get("command") is not None:
        founds = script_founds(str(doc["command"]), "command")
        if not founds:
            raise BadInput(f"{where}: field 'command' never starts vLLM (no vllm serve)")
        found = founds[0]
    else:
        found = Found(_args(doc.get("args"), where, doc.get("vllm_version")), "args")
    gpu = doc.get("gpu") or hardware.get("gpu")
    if gpu:
        found.gpu = Sourced(str(gpu), "gpu" if doc.get("gpu") else "hardware.gpu")
    count_at = "gpu_count" if doc.get("gpu_count") else "hardware.count"
    found.gpu_count = sourced_count(doc.get("gpu_count") or hardware.get("count"), f"{where}: {count_at}")
    if found.gpu_count is not None:
        found.gpu_count = Sourced(found.gpu_count.value, count_at)
    if doc.get("vllm_version"):
        found.engine = Sourced(str(doc["vllm_version"]).removeprefix("v"), "vllm_version")
    found.model = Sourced(model, "model") if model else None
    if revision:
        found.argv.append(Arg("--revision", "revision"))
        found.argv.append(Arg(revision, "revision"))
    found.not_planned += [f"field {k}" for k in sorted(set(doc) - _KEYS - _INFO)]
    return [found]


def _model(doc: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    model = doc.get("model")
    if isinstance(model, dict):
        return model.get("id") or model.get("name"), model.get("revision") or doc.get("revision")
    if model is not None and not isinstance(model, str):
        raise BadInput(f"{where}: field 'model' must be a repo id or {{id, revision}}")
    return model, doc.get("revision")


def _args(args: object, where: str, version: Any) -> list[Arg]:
    if args is None:
        return []
    if isinstance(args, str):
        try:
            return [Arg(w, "args") for w in shlex.split(args)]
        except ValueError as exc:
            raise BadInput(f"{where}: field 'args' cannot be split into words ({exc})") from None
    if isinstance(args, list):
        return [Arg(str(a), f"args[{i}]") for i, a in enumerate(args)]
    if isinstance(args, dict):
        options = set(release_options(str(version).removeprefix("v") if version else None).options)
        return flags_from_mapping(args, "args", options)
    raise BadInput(f"{where}: field 'args' must be a list, a string or a mapping of flags")
