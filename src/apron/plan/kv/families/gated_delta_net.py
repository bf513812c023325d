"""Gated delta-net hybrids (Qwen3-Next, Qwen3.5/3.6/3.8): linear-attention layers with a conv and a
recurrent state per request, and full-attention layers every `full_attention_interval`."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout, divide
from apron.plan.model_config import ModelConfig

NAME = "gated_delta_net"
ARCHITECTURES = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
    }
)
READS = frozenset(
    {
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "mamba_ssm_dtype",
        "full_attention_interval",
        "layer_types",
        "num_key_value_heads",
        "head_dim",
    }
)
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({"full_attention", "linear_attention"})
SOURCES = {
    "0.29.0-0.33.0": "model_executor/models/qwen3_next.py, qwen3_5.py; layers/mamba/mamba_utils.py "
    "gated_delta_net_state_shape"
}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def gdn_layer(ctx: FamilyContext, ssm_dtype: str) -> Layer:
    t = ctx.t
    hk, hv = int(t["linear_num_key_heads"]), int(t["linear_num_value_heads"])
    dk, dv = int(t["linear_key_head_dim"]), int(t["linear_value_head_dim"])
    conv_dim = dk * hk * 2 + dv * hv
    shapes = (
        (int(t["linear_conv_kernel_dim"]) - 1, divide(conv_dim, ctx.tp, "linear attention conv dim")),
        (divide(hv, ctx.tp, "linear_num_value_heads"), dv, dk),
    )
    return Layer("mamba", state=(shapes, ctx.state_dtypes(ssm_dtype), "gdn"))


def layer_types(ctx: FamilyContext) -> list[str]:
    interval = int(ctx.t.get("full_attention_interval") or 4)
    return ctx.t.get("layer_types") or [
        "linear_attention" if (i + 1) % interval else "full_attention" for i in range(ctx.config.num_layers)
    ]


def layer_specs(ctx: FamilyContext) -> KVLayout:
    # Qwen3_5...Config reads mamba_ssm_dtype; Qwen3-Next has no hook (ssm state in the conv dtype).
    ssm_dtype = (ctx.t.get("mamba_ssm_dtype") or "auto") if ctx.arch.startswith("Qwen3_5") else "auto"
    linear = gdn_layer(ctx, ssm_dtype)
    attention = Layer("full", ctx.kv_heads(), ctx.head_dim())
    layers = [linear if kind == "linear_attention" else attention for kind in layer_types(ctx)]
    return attention_layout(ctx, layers, NAME)
