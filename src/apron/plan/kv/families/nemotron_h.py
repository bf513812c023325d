"""Nemotron-H: Mamba-2 layers, attention layers (sliding when the config sets a window) and MLP/MoE
layers that keep no cache, in the order of `layers_block_type` or `hybrid_override_pattern`."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.kv.families.mamba2 import mamba2_layer
from apron.plan.model_config import ModelConfig

NAME = "nemotron_h"
ARCHITECTURES = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
READS = frozenset(
    {
        "mamba_num_heads",
        "mamba_head_dim",
        "n_groups",
        "ssm_state_size",
        "conv_kernel",
        "mamba_ssm_cache_dtype",
        "sliding_window",
        "layers_block_type",
        "hybrid_override_pattern",
        "num_key_value_heads",
        "head_dim",
    }
)
# The Mamba inner size is mamba_num_heads x mamba_head_dim (read); expand only restates it.
IRRELEVANT = frozenset({"expand"})
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({"mamba", "attention", "moe", "mlp"})
SOURCES = {"0.29.0-0.33.0": "model_executor/models/nemotron_h.py; models/config.py NemotronHForCausalLMConfig"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t = ctx.t
    ssm_dtype = t.get("mamba_ssm_cache_dtype") or "float32"  # models/config.py NemotronHForCausalLMConfig
    mamba = mamba2_layer(
        ctx,
        int(t["mamba_num_heads"]) * int(t["mamba_head_dim"]),
        int(t["n_groups"]),
        int(t["mamba_num_heads"]),
        int(t["mamba_head_dim"]),
        int(t["ssm_state_size"]),
        int(t["conv_kernel"]),
        ssm_dtype,
    )
    window = t.get("sliding_window")
    attention = Layer("sliding" if window else "full", ctx.kv_heads(), ctx.head_dim(), window)
    kinds = t.get("layers_block_type") or _pattern_types(t.get("hybrid_override_pattern", ""))
    layers = [mamba if k == "mamba" else attention if k == "attention" else None for k in kinds]
    return attention_layout(ctx, layers, NAME)


def _pattern_types(pattern: str) -> list[str]:
    return [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}.get(c, "other") for c in pattern]
