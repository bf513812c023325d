"""The config-validation corpus: for every config key the planner reads, one config per kind of
wrongness (a string, a bool, a fraction, zero or a negative, a value past any real model, NaN,
infinity, a list where one value is read, ...) and the exact line Apron answers with.

    python tests/config_corpus.py OUT.json.gz    # write the corpus (then review the lines it holds)

tests/test_config_corpus.py plans every case and compares the line, so a change to a message or to
what a key accepts shows up as a diff of this file, reviewed like any other.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "config-cases.json.gz"
BASE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 128,
}
VISION_BASE = {"model_type": "qwen2_5_vl", "hidden_size": 64, "num_heads": 4, "patch_size": 14}


def wrong_values(kind_name: str, minimum: int | float | None, maximum: int | float | None) -> dict[str, Any]:
    """The kinds of wrongness that apply to a key of this kind."""
    if kind_name == "integer":
        out: dict[str, Any] = {"string": "8", "bool": True, "fraction": 2.5, "nan": math.nan, "infinity": math.inf}
        out["below_range"] = (minimum or 0) - 1
        out["past_any_model"] = 2**70
        return out
    if kind_name == "number":
        out = {"string": "1.0", "bool": True, "nan": math.nan, "infinity": math.inf, "below_range": -1}
        if maximum is not None and math.isfinite(maximum):
            out["above_range"] = maximum * 2 + 1
        return out
    if kind_name == "finite":
        return {"string": "1.0", "bool": True, "nan": math.nan, "infinity": math.inf}
    if kind_name == "flag":
        return {"string": "yes", "number": 1}
    if kind_name == "text":
        return {"number": 5, "bool": True}
    if kind_name == "flag_or_text":
        return {"number": 1}
    if kind_name == "table":
        return {"string": "x", "list": [1, 2]}
    if kind_name == "int_list":
        return {"string": "1,2", "strings": ["a"], "negative_entry": [-5], "bool_entry": [True]}
    if kind_name == "str_list":
        return {"string": "full_attention", "numbers": [1, 2]}
    raise ValueError(kind_name)


def describe(kind) -> tuple[str, int | float | None, int | float | None]:
    """(kind name, minimum, maximum) of a schema Kind, read from what it refuses."""
    check = kind.check
    low = next((v for v in range(-2, 4) if check(v) is None), None)
    if low is not None and check(0.5) is not None and check(2.5) is not None:  # an integer kind
        return "integer", low, None
    if check(-1e9) is None:  # any finite number
        return "finite", None, None
    if check(0.5) is None or check(2.5) is None or check(1e6) is None:
        top = 1.0 if check(1.5) is not None and check(1.0) is None else None
        return "number", None, top
    if check(True) is None and check("x") is None:
        return "flag_or_text", None, None
    if check(True) is None:
        return "flag", None, None
    if check("x") is None:
        return "text", None, None
    if check({}) is None:
        return "table", None, None
    if check([1]) is None:
        return "int_list", None, None
    if check(["a"]) is None:
        return "str_list", None, None
    raise ValueError(kind)


def cases() -> dict[str, dict[str, Any]]:
    from apron.plan import config_schema as schema

    out: dict[str, dict[str, Any]] = {}

    def add(place: str, key: str, kind, build) -> None:
        name, low, high = describe(kind)
        for wrong, value in wrong_values(name, low, high).items():
            out[f"{place}{key} {wrong}"] = {"config": build(value)}
        if kind.scalar:
            out[f"{place}{key} per_layer_list"] = {"config": build([1, 2])}

    for key, kind in schema.TEXT_KEYS.items():
        add("", key, kind, lambda v, k=key: {**BASE, k: v})
    # The same keys inside a multimodal model's text_config: the path names where the key lives.
    for key in ("num_key_value_heads", "num_hidden_layers", "head_dim", "vocab_size", "sliding_window", "rope_theta"):
        kind = schema.TEXT_KEYS[key]
        add("text_config.", key, kind, lambda v, k=key: {"architectures": ["X"], "text_config": {**BASE, k: v}})
    for table, keys in schema.NESTED_KEYS.items():
        for key, kind in keys.items():
            add(f"{table}.", key, kind, lambda v, t=table, k=key: {**BASE, t: {k: v}})
    for key, kind in schema.QUANT_KEYS.items():
        add("quantization_config.", key, kind, lambda v, k=key: {**BASE, "quantization_config": {k: v}})
    for key, kind in schema.VISION_KEYS.items():
        add("vision_config.", key, kind, lambda v, k=key: {**BASE, "vision_config": {**VISION_BASE, k: v}})
    for key, kind in schema.TOP_KEYS.items():
        add("", key, kind, lambda v, k=key: {**BASE, k: v})
    consistency = {
        "heads not a multiple of kv heads": {**BASE, "num_attention_heads": 6, "num_key_value_heads": 4},
        "hidden not a multiple of heads": {**BASE, "hidden_size": 60, "num_attention_heads": 8},
        "layer_types too short": {**BASE, "layer_types": ["full_attention"]},
        "layers_block_type too short": {**BASE, "layers_block_type": ["mamba"]},
        "compress_rates entry": {**BASE, "compress_rates": {"sliding_attention": -4}},
        "text_config heads not a multiple": {
            "architectures": ["X"],
            "text_config": {**BASE, "num_attention_heads": 6, "num_key_value_heads": 4},
        },
    }
    out.update({f"consistency: {name}": {"config": config} for name, config in consistency.items()})
    for case in out.values():
        case["config"] = json.loads(json.dumps(case["config"]))  # what config.json would hold
        case.update(outcome(case["config"]))
    return out


def outcome(config: dict[str, Any]) -> dict[str, Any]:
    """{"error": the line} or {"unknown": the note} for one config."""
    from apron.errors import BadInput
    from apron.plan.model_config import ModelConfig

    try:
        parsed = ModelConfig.from_config(config, "config.json")
    except BadInput as exc:
        return {"error": exc.message}
    return {"unknown": list(parsed.unknowns)}


def write(path: Path) -> None:
    data = json.dumps(cases(), indent=1, sort_keys=True).encode()
    path.write_bytes(gzip.compress(data, mtime=0))


def read(path: Path = CORPUS) -> dict[str, dict[str, Any]]:
    return json.loads(gzip.decompress(path.read_bytes()))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
