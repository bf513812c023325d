"""Parsing of the small JSON files a checkpoint ships, shared by every source."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from apron.checkpoint.safetensors import TensorInfo
from apron.errors import BadInput
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE = "chat_template.jinja"
INDEX = "model.safetensors.index.json"
# What vision models' processors read (max pixels, patch and merge sizes, token budgets): the plan sizes
# the encoder's dummy profiling batch from them.
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")
OPTIONAL_FILES = (GENERATION_CONFIG, TOKENIZER_CONFIG, CHAT_TEMPLATE, *PROCESSOR_FILES)


def parse_json(raw: bytes | str, label: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else "not UTF-8"
        )
        raise BadInput(f"{label}: invalid JSON ({detail}); fix or re-download the file") from None
    if not isinstance(value, dict):
        raise BadInput(f"{label}: expected a JSON object, found a {type(value).__name__}")
    return value


def check_config(config: dict[str, Any], label: str) -> dict[str, Any]:
    archs = config.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not all(isinstance(a, str) for a in archs)):
        raise BadInput(f"{label}: field 'architectures' must be a list of class names, got {archs!r}")
    return config


def weight_files_from_index(index: dict[str, Any], label: str) -> list[str]:
    """The files an index names, in first-seen order; vLLM loads only these when an index exists."""
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadInput(f"{label}: field 'weight_map' is missing or empty")
    files: dict[str, None] = {}
    for tensor, file in weight_map.items():
        if not isinstance(file, str) or not file.endswith(".safetensors") or "/" in file or "\\" in file:
            raise BadInput(
                f"{label}: field 'weight_map' maps '{tensor}' to {file!r}, not a "
                "safetensors file name in the same folder"
            )
        files[file] = None
    return list(files)


@frozen
class SmallFiles:
    """The parsed config files of a checkpoint, whatever the source."""

    config: dict[str, Any]
    generation_config: dict[str, Any] | None
    tokenizer_config: dict[str, Any] | None
    chat_template: str | None
    processor_configs: dict[str, dict[str, Any]]


def parse_small_files(texts: dict[str, bytes], label_of: Callable[[str], str]) -> SmallFiles:
    """Parse config.json and the optional files present in `texts` (file name -> raw bytes)."""

    def optional_json(name: str) -> dict[str, Any] | None:
        return parse_json(texts[name], label_of(name)) if name in texts else None

    config = check_config(parse_json(texts[CONFIG], label_of(CONFIG)), label_of(CONFIG))
    tok = optional_json(TOKENIZER_CONFIG)
    template_text = texts[CHAT_TEMPLATE].decode("utf-8", "replace") if CHAT_TEMPLATE in texts else None
    return SmallFiles(
        config=config,
        generation_config=optional_json(GENERATION_CONFIG),
        tokenizer_config=tok,
        chat_template=chat_template_of(tok, template_text),
        processor_configs={name: value for name in PROCESSOR_FILES if (value := optional_json(name)) is not None},
    )


def merge_shards(shards: Iterable[tuple[str, list[TensorInfo]]], label: str) -> list[TensorInfo]:
    """All shards' tensors in shard order, refusing a tensor stored twice (the loader would keep one
    copy and the byte count would double)."""
    tensors: list[TensorInfo] = []
    seen: dict[str, str] = {}
    for name, shard in shards:
        for tensor in shard:
            if tensor.name in seen:
                raise BadInput(
                    f"{label}: tensor '{tensor.name}' is in both {seen[tensor.name]} and {name}; "
                    "a checkpoint must store each tensor once"
                )
            seen[tensor.name] = name
        tensors.extend(shard)
    return tensors


def chat_template_of(tokenizer_config: dict[str, Any] | None, template_file: str | None) -> str | None:
    if template_file:
        return template_file
    if tokenizer_config:
        template = tokenizer_config.get("chat_template")
        if isinstance(template, str):
            return template
        if isinstance(template, list):  # named templates: [{"name": "default", "template": "..."}]
            for entry in template:
                if isinstance(entry, dict) and entry.get("name") == "default":
                    return entry.get("template")
    return None
