"""Jamba: Mamba-1 layers with a full-attention layer every `attn_layer_period` from `attn_layer_offset`."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.kv.families.mamba1 import mamba1_layer
from apron.plan.model_config import ModelConfig

NAME = "jamba"
ARCHITECTURES = frozenset({"JambaForCausalLM"})
READS = frozenset(
    {"attn_layer_period", "attn_layer_offset", "mamba_expand", "mamba_d_state", "mamba_d_conv", "num_key_value_heads"}
)
SOURCES = {"0.29.0-0.33.0": "model_executor/models/jamba.py"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t = ctx.t
    period, offset = int(t.get("attn_layer_period", 8)), int(t.get("attn_layer_offset", 4))
    mamba = mamba1_layer(
        ctx, int(t["mamba_expand"]) * ctx.config.hidden_size, int(t["mamba_d_state"]), int(t["mamba_d_conv"])
    )
    attention = Layer("full", ctx.kv_heads(), ctx.head_dim())
    layers = [attention if i % period == offset else mamba for i in range(ctx.config.num_layers)]
    return attention_layout(ctx, layers, NAME)
