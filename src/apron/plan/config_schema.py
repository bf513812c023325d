"""What every config key the planner reads must be, checked once, as the config is read.

A key the planner reads is declared here with its kind: an integer where an integer is meant (a bool is
not one), finite, in range (positive where it divides or counts, non-negative where zero means
something), bounded (a layer count or a vocabulary beyond any real model is refused, not looped
over). Beside the kinds, the config must be consistent: attention heads divide by the KV heads, the
head dimension multiplies out of the hidden size when the config gives none, a layer-type list covers
every layer. The language model's keys are checked where they live (top level, or `text_config` of a
multimodal model), the vision tower's under `vision_config`, and nested tables (`rope_parameters`,
`linear_attn_config`, `quantization_config`, ...) under their own path.

A wrong value is bad input: one line naming the file and the key path, exit 2
(`config.json: text_config.num_key_value_heads is 0; it must be a positive integer`). A value of a
shape the planner does not read (a per-layer list where it reads one number; a layer kind the family
does not model, apron.plan.kv.unknowns) is not wrong, only not understood: it makes the KV side unknown, naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from apron.errors import BadInput
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# Bounds no real model comes near (the largest today: ~200 layers, 256 heads, ~32k hidden, ~1M
# vocabulary, ~10M positions, a few hundred experts); a value past them is a typo or garbage.
MAX_LAYERS = 4096
MAX_HEADS = 65536
MAX_DIM = 2**20
MAX_VOCAB = 2**24
MAX_EXPERTS = 65536
MAX_LENGTH = 2**62
MAX_KERNEL = 4096


@frozen
class Kind:
    """What a value must be: `check` returns None when it is, else what it must be instead."""

    check: Callable[[Any], str | None]
    scalar: bool = True  # a list in its place is a per-layer value the planner does not read


def _integer(minimum: int, maximum: int) -> Kind:
    what = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer of at least {minimum}")

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return what
        if value < minimum:
            return what
        if value > maximum:
            return f"{what} of at most {maximum:,} (no real model has more)"
        return None

    return Kind(check)


def _number(minimum: float, maximum: float = math.inf, *, exclusive: bool = True) -> Kind:
    what = f"a finite number {'above' if exclusive else 'of at least'} {_plain(minimum)}"
    what += f" and at most {_plain(maximum)}" if math.isfinite(maximum) else ""

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return what
        if value < minimum or (exclusive and value == minimum) or value > maximum:
            return what
        return None

    return Kind(check)


def _plain(number: float) -> str:
    return f"{number:,.0f}" if float(number).is_integer() else f"{number:g}"


def _typed(kind: type | tuple[type, ...], what: str, *, scalar: bool = True) -> Kind:
    allowed = kind if isinstance(kind, tuple) else (kind,)

    def check(value: Any) -> str | None:
        if isinstance(value, bool) and bool not in allowed:  # a bool is an int to Python, never to a config
            return what
        return None if isinstance(value, allowed) else what

    return Kind(check, scalar)


def _int_list(minimum: int, maximum: int) -> Kind:
    item = _integer(minimum, maximum)

    def check(value: Any) -> str | None:
        if not isinstance(value, list) or len(value) > MAX_LAYERS * 4:
            return "a list of integers"
        return next((f"a list of integers, each {why}" for v in value if (why := item.check(v))), None)

    return Kind(check, scalar=False)


def _str_list(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_LAYERS * 4 or not all(isinstance(v, str) for v in value):
        return "a list of strings"
    return None


# Keys vLLM's max_model_len derivation reads (config/model.py possible_keys), in its order.
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
LAYERS = _integer(1, MAX_LAYERS)
LAYERS_OR_NONE = _integer(0, MAX_LAYERS)
HEADS = _integer(1, MAX_HEADS)
DIM = _integer(1, MAX_DIM)
DIM_OR_NONE = _integer(0, MAX_DIM)
EXPERTS = _integer(0, MAX_EXPERTS)
TOP_K = _integer(0, MAX_EXPERTS)
LENGTH = _integer(1, MAX_LENGTH)
WINDOW = _integer(0, MAX_LENGTH)
KERNEL = _integer(1, MAX_KERNEL)
POSITIVE = _number(0)
FRACTION = _number(0, 1)
NON_NEGATIVE = _number(0, exclusive=False)
FINITE = Kind(
    lambda v: None if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else "a finite number"
)
FLAG = _typed(bool, "true or false")
TEXT = _typed(str, "a string")
FLAG_OR_TEXT = _typed((bool, str), "true, false or a string")
TABLE = _typed(dict, "an object", scalar=False)
INDICES = _int_list(0, MAX_LAYERS * 4)
STRINGS = Kind(_str_list, scalar=False)

# The language model's keys (top level, or text_config) that the whole planner reads.
MODEL_KEYS: dict[str, Kind] = {
    # apron.plan.model_config (and so every family): the aliases transformers accepts
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), LAYERS),
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim"), DIM),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_heads", "n_heads"), HEADS),
    **dict.fromkeys(("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"), HEADS),
    **dict.fromkeys(("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"), DIM),
    **dict.fromkeys(("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts", "n_experts"), EXPERTS),
    **dict.fromkeys(("moe_intermediate_size", "expert_intermediate_size"), DIM),
    **dict.fromkeys(("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token"), TOP_K),
    **dict.fromkeys((*MAX_LEN_KEYS, "original_max_position_embeddings"), LENGTH),
    "head_dim": DIM_OR_NONE,  # 0 in some configs (GLM-5.3-Flash): not given, derived
    "vocab_size": _integer(1, MAX_VOCAB),
    "kv_lora_rank": DIM,
    "q_lora_rank": DIM,
    "qk_rope_head_dim": DIM_OR_NONE,
    "qk_nope_head_dim": DIM_OR_NONE,
    "v_head_dim": DIM,
    "num_nextn_predict_layers": LAYERS_OR_NONE,
    "mtp_num_hidden_layers": LAYERS_OR_NONE,
    "model_type": TEXT,
    "dtype": TEXT,
    "torch_dtype": TEXT,
    "tie_word_embeddings": FLAG,
    "rope_theta": POSITIVE,
    "compress_rope_theta": POSITIVE,  # DeepSeek-V4/V4.1's compressed layers' rope (plan/weights_dsv4.py)
    "rope_local_base_freq": POSITIVE,
    "partial_rotary_factor": FRACTION,
    "rope_scaling": TABLE,
    "rope_parameters": TABLE,
    # apron.plan.activation
    "n_shared_experts": EXPERTS,
    "shared_expert_intermediate_size": DIM_OR_NONE,
    "first_k_dense_replace": LAYERS_OR_NONE,
    "final_logit_softcapping": NON_NEGATIVE,
    # apron.plan.moe (gated or not: the experts' workspace widths)
    "hidden_act": TEXT,
    "mlp_hidden_act": TEXT,
    # apron.plan.memory (host tables)
    "ngram_vocab_size_ratio": NON_NEGATIVE,
    "hidden_size_per_layer_input": DIM_OR_NONE,
}
# Read by the KV families alone (apron.plan.kv.families.*: READS): a per-layer list in place of one of
# these is a layout the family does not read (unknown); in place of a key everything reads, an error.
FAMILY_KEYS: dict[str, Kind] = {
    "sliding_window": WINDOW,
    "use_sliding_window": FLAG,
    "max_window_layers": LAYERS_OR_NONE,
    "sliding_window_pattern": LAYERS,
    "layer_types": STRINGS,
    "layers_block_type": STRINGS,
    "hybrid_override_pattern": TEXT,
    "attention_chunk_size": WINDOW,
    "use_bidirectional_attention": FLAG_OR_TEXT,
    "global_head_dim": DIM,
    "num_global_key_value_heads": HEADS,
    "attention_k_eq_v": FLAG,
    "num_kv_shared_layers": LAYERS_OR_NONE,
    "full_attention_interval": LAYERS,
    "linear_conv_kernel_dim": KERNEL,
    "linear_key_head_dim": DIM,
    "linear_value_head_dim": DIM,
    "linear_num_key_heads": HEADS,
    "linear_num_value_heads": HEADS,
    "mamba_ssm_dtype": TEXT,
    "mamba_ssm_cache_dtype": TEXT,
    "mamba_num_heads": HEADS,
    "mamba_head_dim": DIM,
    "ssm_state_size": DIM,
    "state_size": DIM,
    "conv_kernel": KERNEL,
    "expand": _integer(1, 64),
    "n_groups": HEADS,
    "mamba_expand": _integer(1, 64),
    "mamba_d_state": DIM,
    "mamba_d_conv": KERNEL,
    "attn_layer_period": LAYERS,
    "attn_layer_offset": LAYERS_OR_NONE,
    "conv_L_cache": KERNEL,
    "conv_dim": DIM,
    "index_head_dim": DIM,
    "index_n_heads": HEADS,
    "index_topk": LENGTH,
    "index_topk_freq": LAYERS,
    "index_skip_topk_offset": LAYERS_OR_NONE,
    "index_topk_pattern": TEXT,
    "index_kpool": WINDOW,
    "index_kpool_compress": FLAG_OR_TEXT,
    "mla_use_nope": FLAG,
    "compress_ratios": _int_list(0, MAX_LENGTH),
    "compress_rates": TABLE,
    "candidate_block_size": LENGTH,
    "candidate_source_layer_id": _integer(-1, MAX_LAYERS * 4),
    "candidate_topk_blocks": WINDOW,
    "index_source_layer_ids": INDICES,
    "kv_source_layer_ids": INDICES,
    "o_groups": HEADS,
    "linear_attn_config": TABLE,
    "sparse_attention_config": TABLE,
    "use_sparse_attention": FLAG,
    "hc_count": _integer(1, 64),
    "hc_mult": _integer(1, 64),
    "indexer_budget": LENGTH,
    "indexer_compress_ratio": LENGTH,
    "indexer_head_dim": DIM,
    "indexer_n_heads": HEADS,
    "indexer_kv_heads": HEADS,
    "ngram_size": _integer(1, MAX_KERNEL),
    "ple_conv_kernel_size": KERNEL,
    "ple_layer_ids": _int_list(1, MAX_LAYERS * 4),
}
TEXT_KEYS: dict[str, Kind] = {**MODEL_KEYS, **FAMILY_KEYS}
# Nested tables: their keys, checked under their own path.
NESTED_KEYS: dict[str, dict[str, Kind]] = {
    "rope_scaling": {
        "rope_type": TEXT,
        "type": TEXT,
        "factor": _number(0, 1e6),
        "original_max_position_embeddings": LENGTH,
        "rope_theta": POSITIVE,
        "partial_rotary_factor": FRACTION,
        "mrope_section": _int_list(0, MAX_DIM),
    },
    "linear_attn_config": {
        "num_heads": HEADS,
        "head_dim": DIM,
        "short_conv_kernel_size": _integer(2, MAX_KERNEL),
        "gate_lower_bound": FINITE,
    },
    "sparse_attention_config": {
        "sparse_attention_freq": _int_list(0, 1),
        "sparse_index_dim": DIM,
        "sparse_num_index_heads": HEADS,
        "sparse_topk_blocks": WINDOW,
        "use_sparse_attention": FLAG,
    },
    "compress_rates": {},  # layer kind -> ratio, checked below
}
NESTED_KEYS["rope_parameters"] = NESTED_KEYS["rope_scaling"]
# Top-level keys of every config (multimodal ones included).
TOP_KEYS: dict[str, Kind] = {
    "quantization_config": TABLE,
    "compression_config": TABLE,
    "vision_config": TABLE,
    "projector_hidden_size": DIM,  # MiniMax-M3's multi_modal_projector
}
QUANT_KEYS: dict[str, Kind] = {
    "quant_method": TEXT,
    "group_size": _integer(-1, MAX_DIM),
    "q_group_size": _integer(-1, MAX_DIM),
    "weight_block_size": _int_list(1, MAX_DIM),  # apron.plan.parallel: block-FP8 shards
    "expert_dtype": TEXT,  # apron.plan.weights is_dsv4_fp4: DeepSeek-V4's fp4 experts
    "activation_scheme": TEXT,  # apron.plan.moe: static or dynamic FP8 activations
}
# apron.plan.encoder: the vision tower.
VISION_KEYS: dict[str, Kind] = {
    "hidden_size": DIM,
    "intermediate_size": DIM,
    "num_attention_heads": HEADS,
    "num_heads": HEADS,
    "patch_size": _integer(1, 4096),
    "temporal_patch_size": _integer(1, 64),
    "patch_temporal": _integer(1, 64),
    "spatial_merge_size": _integer(1, 64),
    "merge_size": _integer(1, 64),
    "in_channels": _integer(1, 64),
    "out_hidden_size": DIM,
    "deepstack_visual_indexes": INDICES,
    "default_output_length": LENGTH,
    "pooling_kernel_size": KERNEL,
    "position_embedding_size": LENGTH,
    "image_size": _integer(1, 2**16),
    "num_channels": _integer(1, 64),
    "img_token_compression_config": TABLE,  # MiniMax-M3: its keys below
    # DeepSeek-V4.1's dummy image: a search over aligner rows up to max_image_tokens / 2 (bounded here)
    "downsample_ratio": _integer(1, 64),
    "max_image_tokens": _integer(3, 2**20),
    "max_wh_ratio": POSITIVE,
    "min_pixels": _integer(1, 2**40),
}
VISION_COMPRESSION_KEYS: dict[str, Kind] = {
    "temporal_patch_size": _integer(1, 64),
    "spatial_merge_size": _integer(1, 64),
}


def check_config(config: dict[str, Any], text: dict[str, Any], file: str) -> tuple[str, ...]:
    """Raise BadInput for the first value the planner cannot read; return what it does not understand."""
    unknowns: list[str] = []
    prefix = "" if text is config else _text_path(config, text)
    for key, kind in TOP_KEYS.items():
        _check(config, key, kind, key, file, None)
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        for key, kind in QUANT_KEYS.items():
            _check(quant, key, kind, f"quantization_config.{key}", file, None)
    for key, kind in TEXT_KEYS.items():
        _check(text, key, kind, prefix + key, file, unknowns if key in FAMILY_KEYS else None)
    for table, keys in NESTED_KEYS.items():
        nested = text.get(table)
        if isinstance(nested, dict):
            lenient = unknowns if table in FAMILY_KEYS else None
            for key, kind in keys.items():
                _check(nested, key, kind, f"{prefix}{table}.{key}", file, lenient)
    vision = config.get("vision_config")
    if isinstance(vision, dict):
        for key, kind in VISION_KEYS.items():
            _check(vision, key, kind, f"vision_config.{key}", file, None)
        compression = vision.get("img_token_compression_config")
        if isinstance(compression, dict):
            for key, kind in VISION_COMPRESSION_KEYS.items():
                _check(compression, key, kind, f"vision_config.img_token_compression_config.{key}", file, None)
    _required(text, prefix, file)
    _consistent(text, prefix, file, unknowns)
    return tuple(unknowns)


def _text_path(config: dict[str, Any], text: dict[str, Any]) -> str:
    return next((f"{key}." for key in ("text_config", "llm_config", "language_config") if config.get(key) is text), "")


def _check(table: dict[str, Any], key: str, kind: Kind, path: str, file: str, unknowns: list[str] | None) -> None:
    """`unknowns`: where a per-layer list in place of one value is noted (None: it is an error)."""
    value = table.get(key)
    if value is None:
        return
    if kind.scalar and isinstance(value, list) and unknowns is not None:
        unknowns.append(f"config field '{path}' is a per-layer list where Apron reads one value")
        return
    problem = kind.check(value)
    if problem is not None:
        raise BadInput(f"{file}: {path} is {_shown(value)}; it must be {problem}")


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    return text if len(text) <= 60 else text[:57] + "..."


REQUIRED = (
    ("layer count", ("num_hidden_layers", "n_layer", "num_layers", "n_layers")),
    ("hidden size", ("hidden_size", "d_model", "n_embd", "dim")),
)
# Keys vLLM reads with no default of its own: getattr(hf_text_config, key, 0) in
# transformers_utils/model_arch_config_convertor.py (0.29.0-0.33.0; 0.32.0:77-87) turns an absent key
# into 0 but hands a null on as None, which the model's layers then fail on. A null there is bad
# input; for every other key a null means "not given" (sliding_window, rope_scaling, q_lora_rank ...
# are null in published configs).
NOT_NULL = (
    *REQUIRED,
    ("attention head count", ("num_attention_heads", "n_head", "num_heads", "n_heads")),
    ("vocabulary size", ("vocab_size",)),
)


def check_nulls(config: dict[str, Any], file: str) -> None:
    """Raise BadInput for a key set to null where vLLM needs a value (before nulls are dropped as
    "not given"). transformers' AutoConfig picks the config class by model_type: null there is refused."""
    if "model_type" in config and config["model_type"] is None:
        raise BadInput(
            f"{file}: model_type is null; transformers picks the config class by it: give the type or drop the key"
        )
    text, prefix = config, ""
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            text, prefix = config[key], f"{key}."
            break
    for what, keys in NOT_NULL:
        nulls = [key for key in keys if key in text and text[key] is None]
        if nulls and all(text.get(key) is None for key in keys):
            raise BadInput(
                f"{file}: {prefix}{nulls[0]} is null; vLLM reads the {what} with no default (a null is not "
                "'not given' here): give a positive integer"
            )
    for table in ("rope_scaling", "rope_parameters"):
        rope = text.get(table)
        if not isinstance(rope, dict) or "factor" not in rope or rope["factor"] is not None:
            continue
        kind = rope.get("rope_type") or rope.get("type")
        if kind in ROPE_FACTOR_TYPES:
            raise BadInput(
                f"{file}: {prefix}{table}.factor is null; vLLM reads it with no default for rope_type {kind!r}: "
                "give the scaling factor (a positive number)"
            )


# model_executor/layers/rotary_embedding/__init__.py (0.32.0:168-285) get_rope: rope_parameters["factor"]
# for these scaling types, no default.
ROPE_FACTOR_TYPES = ("linear", "ntk", "dynamic", "yarn", "llama3", "deepseek_yarn", "deepseek_llama_scaling")


def _required(text: dict[str, Any], prefix: str, file: str) -> None:
    """What every model has and everything else is counted from: never a silent zero."""
    for what, keys in REQUIRED:
        if all(text.get(key) is None for key in keys):
            raise BadInput(
                f"{file}: the config gives no {what} ({prefix}{keys[0]}); it is not a model config vLLM loads"
            )


def _consistent(text: dict[str, Any], prefix: str, file: str, unknowns: list[str]) -> None:
    heads = _first(text, ("num_attention_heads", "n_head", "num_heads", "n_heads"))
    kv_heads = _first(text, ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"))
    hidden = _first(text, ("hidden_size", "d_model", "n_embd", "dim"))
    if heads and kv_heads and heads % kv_heads:
        raise BadInput(
            f"{file}: {prefix}num_attention_heads ({heads}) is not a multiple of {prefix}num_key_value_heads "
            f"({kv_heads}); each KV head serves a whole group of attention heads"
        )
    if heads and hidden and not text.get("head_dim") and not text.get("kv_lora_rank") and hidden % heads:
        raise BadInput(
            f"{file}: {prefix}hidden_size ({hidden}) does not divide by {prefix}num_attention_heads ({heads}) and "
            f"the config gives no head_dim; give {prefix}head_dim"
        )
    layers = _first(text, ("num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    for key in ("layer_types", "layers_block_type"):
        kinds = text.get(key)
        if not isinstance(kinds, list) or not layers:
            continue
        if len(kinds) < layers:
            raise BadInput(
                f"{file}: {prefix}{key} has {len(kinds)} entries for {layers} layers ({prefix}num_hidden_layers); "
                "it needs one entry per layer"
            )
    rates = text.get("compress_rates")
    if isinstance(rates, dict):
        for name, rate in rates.items():
            if (problem := WINDOW.check(rate)) is not None:
                raise BadInput(f"{file}: {prefix}compress_rates.{name} is {_shown(rate)}; it must be {problem}")


def _first(table: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = table.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
