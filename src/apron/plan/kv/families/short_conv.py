"""LFM2: short-convolution layers (a conv state per request) and full-attention layers by `layer_types`."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout, divide
from apron.plan.model_config import ModelConfig

NAME = "short_conv"
ARCHITECTURES = frozenset({"Lfm2ForCausalLM"})
READS = frozenset({"conv_L_cache", "conv_dim", "layer_types", "num_key_value_heads", "head_dim"})
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({"full_attention", "conv"})
SOURCES = {"0.29.0-0.33.0": "model_executor/models/lfm2.py; layers/mamba/mamba_utils.py short_conv_state_shape"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t = ctx.t
    shapes = ((int(t["conv_L_cache"]) - 1, divide(int(t["conv_dim"]), ctx.tp, "conv_dim")),)
    conv = Layer("mamba", state=(shapes, (ctx.model_bytes,), "short_conv"))
    attention = Layer("full", ctx.kv_heads(), ctx.head_dim())
    layers = [attention if kind == "full_attention" else conv for kind in t["layer_types"]]
    return attention_layout(ctx, layers, NAME)
