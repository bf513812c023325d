"""Gemma 4: sliding layers and wide global layers (their own head size and KV head count), the last
`num_kv_shared_layers` reusing earlier layers' caches."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.kv.families.decoder import hf_layer_types, hf_sliding_window
from apron.plan.model_config import ModelConfig

NAME = "gemma4"
ARCHITECTURES = frozenset({"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"})
READS = frozenset(
    {
        "layer_types",
        "sliding_window",
        "num_kv_shared_layers",
        "num_global_key_value_heads",
        "attention_k_eq_v",
        "global_head_dim",
        "use_bidirectional_attention",
        "num_key_value_heads",
        "head_dim",
    }
)
# The per-layer input embeddings are a table of weights, not cache.
IRRELEVANT = frozenset({"vocab_size_per_layer_input"})
SOURCES = {"0.29.0-0.33.0": "model_executor/models/gemma4.py"}


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    t, n = ctx.t, ctx.config.num_layers
    types = hf_layer_types(t, n) or []
    window = hf_sliding_window(t)
    shared_from = n - int(t.get("num_kv_shared_layers") or 0)
    global_kv = t.get("num_global_key_value_heads") if t.get("attention_k_eq_v", True) else None
    full = Layer("full", ctx.kv_heads(int(global_kv or ctx.config.num_kv_heads)), int(t.get("global_head_dim") or 512))
    sliding = Layer("sliding", ctx.kv_heads(), ctx.head_dim(), window)
    # Layers sharing an earlier layer's KV (kv_sharing_target_layer_name) hold no cache of their own.
    layers = [full if kind == "full_attention" else sliding for i, kind in enumerate(types) if i < shared_from]
    return attention_layout(ctx, layers, NAME)
