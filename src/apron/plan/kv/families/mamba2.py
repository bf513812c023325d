"""Mamba-2: every layer keeps a conv state and a per-head SSM state per request."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout, divide
from apron.plan.model_config import ModelConfig

NAME = "mamba2"
ARCHITECTURES = frozenset({"Mamba2ForCausalLM"})
READS = frozenset(
    {"num_hidden_layers", "hidden_size", "expand", "n_groups", "num_heads", "head_dim", "state_size", "conv_kernel"}
)
SOURCES = {"0.29.0-0.33.0": "model_executor/models/mamba2.py, layers/mamba/mamba_utils.py mamba2_state_shape"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def mamba2_layer(
    ctx: FamilyContext,
    inner: int,
    groups: int,
    heads: int,
    head_dim: int,
    state: int,
    kernel: int,
    ssm_dtype: str = "auto",
) -> Layer:
    # mamba_utils.py mamba2_state_shape: groups are replicated up to the TP size when they do not divide.
    groups = groups + (0 if groups % ctx.tp == 0 else ctx.tp - groups)
    conv_dim = inner + 2 * groups * state
    shapes = (
        (kernel - 1, divide(conv_dim, ctx.tp, "mamba conv dim")),
        (divide(heads, ctx.tp, "mamba heads"), head_dim, state),
    )
    return Layer("mamba", state=(shapes, ctx.state_dtypes(ssm_dtype), "mamba2"))


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t = ctx.t
    layer = mamba2_layer(
        ctx,
        int(t["expand"]) * ctx.config.hidden_size,
        int(t["n_groups"]),
        int(t["num_heads"]),
        int(t["head_dim"]),
        int(t["state_size"]),
        int(t["conv_kernel"]),
    )
    return attention_layout(ctx, [layer] * ctx.config.num_layers, NAME)
