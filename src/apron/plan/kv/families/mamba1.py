"""Mamba-1 (Mamba, FalconMamba): every layer keeps a conv state and an SSM state per request."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout, divide
from apron.plan.model_config import ModelConfig

NAME = "mamba1"
ARCHITECTURES = frozenset({"MambaForCausalLM", "FalconMambaForCausalLM"})
READS = frozenset({"num_hidden_layers", "intermediate_size", "state_size", "conv_kernel"})
# HF's MambaConfig derives intermediate_size (read) from expand.
IRRELEVANT = frozenset({"expand"})
SOURCES = {"0.29.0-0.33.0": "model_executor/models/mamba.py, layers/mamba/mamba_utils.py mamba1_state_shape"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def mamba1_layer(ctx: FamilyContext, inner: int, state: int, kernel: int) -> Layer:
    shapes = (
        (kernel - 1, divide(inner, ctx.tp, "intermediate_size")),
        (divide(inner, ctx.tp, "intermediate_size"), state),
    )
    return Layer("mamba", state=(shapes, ctx.state_dtypes(), "mamba1"))


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t = ctx.t
    layer = mamba1_layer(ctx, int(t["intermediate_size"]), int(t["state_size"]), int(t["conv_kernel"]))
    return attention_layout(ctx, [layer] * ctx.config.num_layers, NAME)
