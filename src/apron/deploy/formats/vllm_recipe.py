"""A vLLM recipe (the recipes project's YAML): `model.model_id`, `model.base_args` and `base_env`,
`features.<name>.args` (on unless listed in `opt_in_features`), `variants.<name>` (each may name
another `model_id` and add `args`), `hardware_overrides.<vendor>.extra_args` / `extra_env`,
`model.min_vllm_version`, and `meta.hardware` where it names the GPU it was validated on. A plan of a
recipe is base_args plus the features on by default plus the NVIDIA overrides, for the variant
`--name` picks (default: `default`, else the first)."""

from __future__ import annotations

import re
import shlex
from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, is_data, mapping, node
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "vllm-recipe"
TITLE = "vLLM recipe"
_VENDORS = ("nvidia", "cuda")
_HARDWARE = re.compile(r"(?:(\d+)\s*[x×]\s*)?([A-Za-z][\w -]*?)(?:\s*[x×]\s*(\d+))?$")


def claims(document: Document) -> bool:
    doc = document.mapping
    model = doc.get("model") if doc else None
    return is_data(document) and isinstance(model, dict) and ("model_id" in model or "base_args" in model)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    variants = doc.get("variants") or {"default": {}}
    if not isinstance(variants, dict):
        raise BadInput(f"{document.name}: {TITLE}: variants must be a mapping of name to variant")
    default = "default" if "default" in variants else next(iter(variants))
    founds = [
        _variant(doc, str(name), mapping(v, f"{document.name}: variants.{name}"), document.name)
        for name, v in variants.items()
    ]
    for found in founds:
        found.is_default = found.name == default
        others = [f.name for f in founds if f.name != found.name]
        if found.is_default and others:
            found.notes.append(f"the recipe's other variants: {', '.join(map(str, others))} (--name to plan one)")
    return founds


def _variant(doc: dict[str, Any], name: str, variant: dict[str, Any], file: str) -> Found:
    model = doc["model"]
    argv = _args(model.get("base_args"), "model.base_args", file)
    opt_in = set(doc.get("opt_in_features") or [])
    features = doc.get("features") or {}
    off = []
    for key, feature in features.items() if isinstance(features, dict) else []:
        if key in opt_in:
            off.append(str(key))
        elif isinstance(feature, dict):
            argv += _args(feature.get("args"), f"features.{key}.args", file)
    argv += _args(variant.get("args") or variant.get("extra_args"), f"variants.{name}.args", file)
    found = Found(argv, "model.base_args", "vllm serve", name=name)
    model_id = variant.get("model_id") or model.get("model_id")
    where = f"variants.{name}.model_id" if variant.get("model_id") else "model.model_id"
    found.model = Sourced(str(model_id), where) if model_id else None
    base_env = mapping(model.get("base_env"), f"{file}: model.base_env")
    found.env = [(str(k), str(v), f"model.base_env.{k}", False) for k, v in base_env.items()]
    _overrides(found, mapping(doc.get("hardware_overrides"), f"{file}: hardware_overrides"), file)
    _hardware(found, doc)
    if off:
        found.notes.append(f"opt-in features not planned (off by default): {', '.join(off)}")
    if model.get("min_vllm_version"):
        found.notes.append(f"the recipe needs vLLM {model['min_vllm_version']} or later (model.min_vllm_version)")
    if variant.get("vram_minimum_gb"):
        found.notes.append(f"the recipe says variant {name} needs {variant['vram_minimum_gb']} GB of GPU memory")
    return found


def _args(value: Any, where: str, file: str) -> list[Arg]:
    """A list of words, or of "--flag value" strings (split as the shell would); JSON stays whole."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise BadInput(f"{file}: {where} must be a list of flags")
    out = []
    for index, item in enumerate(value):
        text = str(item).lower() if isinstance(item, bool) else str(item)
        words = shlex.split(text) if text.startswith("-") and " " in text and "{" not in text else [text]
        out += [Arg(w, f"{where}[{index}]") for w in words]
    return out


def _overrides(found: Found, overrides: dict[str, Any], file: str) -> None:
    vendors = [v for v in overrides if str(v).lower() in _VENDORS]
    for vendor in vendors:
        spec = mapping(overrides[vendor], f"{file}: hardware_overrides.{vendor}")
        found.argv += _args(spec.get("extra_args"), f"hardware_overrides.{vendor}.extra_args", file)
        extra_env = mapping(spec.get("extra_env"), f"{file}: hardware_overrides.{vendor}.extra_env")
        found.env += [
            (str(k), str(v), f"hardware_overrides.{vendor}.extra_env.{k}", False) for k, v in extra_env.items()
        ]
    others = [str(v) for v in overrides if v not in vendors]
    if others:
        found.notes.append(f"hardware_overrides for {', '.join(others)} not applied (the plan is for an NVIDIA GPU)")


def _hardware(found: Found, doc: dict[str, Any]) -> None:
    """meta.hardware as "8x H200", "H200", {gpu, count} or a list of those (the first)."""
    hardware = node(doc, "meta", "hardware")
    where = "meta.hardware"
    if isinstance(hardware, list) and hardware:
        hardware, where = hardware[0], "meta.hardware[0]"
    if isinstance(hardware, dict):
        gpu, number = hardware.get("gpu") or hardware.get("name"), hardware.get("count")
    elif isinstance(hardware, str) and (match := _HARDWARE.match(hardware.strip())):
        gpu, number = match.group(2).strip(), match.group(1) or match.group(3)
    else:
        return
    if gpu:
        found.gpu = Sourced(str(gpu), where)
    if number and str(number).isdigit():
        found.gpu_count = Sourced(int(number), where)
