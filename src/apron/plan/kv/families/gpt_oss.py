"""gpt-oss: sliding-window and full layers alternating, with attention sinks."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.model_config import ModelConfig

NAME = "gpt_oss"
ARCHITECTURES = frozenset({"GptOssForCausalLM"})
READS = frozenset({"sliding_window", "num_key_value_heads", "head_dim", "layer_types"})
SOURCES = {"0.29.0-0.33.0": "model_executor/models/gpt_oss.py"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    # gpt_oss.py: sliding iff layer_idx % 2 == 0; layer_types is not read.
    window = int(ctx.t["sliding_window"])
    layers = [
        Layer("sliding", ctx.kv_heads(), ctx.head_dim(), window)
        if i % 2 == 0
        else Layer("full", ctx.kv_heads(), ctx.head_dim())
        for i in range(ctx.config.num_layers)
    ]
    return attention_layout(ctx, layers, NAME)
