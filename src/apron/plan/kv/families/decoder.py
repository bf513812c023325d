"""Llama-style decoders (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, ...): full attention, with the
sliding-window layers the HF config describes. The fallback family: it answers for any architecture
no other family claims (with an unknown where the release registers that architecture as stateful).

vLLM reads the transformers config object, not the raw JSON, so the HF normalisation that decides
which layers slide (qwen2/3's use_sliding_window, gemma's alternation, ...) is mirrored here too.
"""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.model_config import ModelConfig

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

NAME = "decoder"
FALLBACK = True
READS = frozenset(
    {
        "sliding_window",
        "use_sliding_window",
        "max_window_layers",
        "sliding_window_pattern",
        "layer_types",
        "attention_chunk_size",
        "use_bidirectional_attention",
        "num_key_value_heads",
        "head_dim",
    }
)
SOURCES = {
    "0.29.0-0.33.0": "model_executor/models/llama.py, qwen3.py, gemma2.py, gemma3.py, ... (Attention.get_kv_cache_spec)"
}
_QWEN_WINDOW_TYPES = ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe")


def matches(arch: str, config: ModelConfig) -> bool:
    return False  # the fallback: chosen only when no other family matches


def layer_specs(ctx: FamilyContext) -> KVLayout:
    """A layer slides when the model passes a per-layer window (layer_types), else it takes
    cache_config.sliding_window, which EngineArgs sets from the HF config only when layer_types is
    absent or all sliding."""
    t, n = ctx.t, ctx.config.num_layers
    types = hf_layer_types(t, n)
    window = hf_sliding_window(t)
    engine_window = window if (types is None or all(x == "sliding_attention" for x in types)) else None
    model_type = ctx.config.text_model_type
    reads_types = model_type not in (*_QWEN_WINDOW_TYPES, "phi3")
    if model_type in _QWEN_WINDOW_TYPES and types and len(set(types)) > 1:
        ctx.unknowns.append(
            "qwen2/3 with mixed sliding and full layers: vLLM asserts max_window_layers == "
            "num_hidden_layers at start-up"
        )
    chunk = t.get("attention_chunk_size")
    layers = []
    for i in range(n):
        layer_window = window if reads_types and types and types[i] == "sliding_attention" else None
        layer_window = layer_window or engine_window
        if chunk and model_type in ("llama4", "llama4_text"):
            # llama4.py: RoPE layers use chunked local attention; the hybrid KV manager is off by
            # default for such models (config/vllm.py), so they are allocated as full attention.
            ctx.notes.append(
                "chunked local attention allocated as full attention (hybrid KV manager "
                "disabled by default for attention_chunk_size models)"
            )
        kind = "sliding" if layer_window else "full"
        layers.append(Layer(kind, ctx.kv_heads(), ctx.head_dim(), layer_window))
    if engine_window and types is None:
        ctx.notes.append(
            f"every layer slides (window {engine_window}): vLLM applies the config's sliding_window "
            "to all layers when layer_types is absent"
        )
    return attention_layout(ctx, layers, NAME)


def hf_layer_types(t: dict[str, Any], n: int) -> list[str] | None:
    """transformers 5 configuration_*.py normalisation of layer_types (vLLM sees the object)."""
    model_type = t.get("model_type", "")
    types = t.get("layer_types")
    if model_type in _QWEN_WINDOW_TYPES:
        window = t.get("sliding_window") if t.get("use_sliding_window") else None
        if types is None:
            first = int(t.get("max_window_layers", 28))
            types = ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n)]
        return types
    if types is not None:
        return list(types)
    if model_type in ("gemma2", "gpt_oss"):
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if model_type in ("gemma3", "gemma3_text"):
        pattern = int(t.get("sliding_window_pattern", 6))
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if model_type in ("gemma4", "gemma4_text"):
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        types[-1] = "full_attention"
        return types
    return None


def hf_sliding_window(t: dict[str, Any]) -> int | None:
    model_type = t.get("model_type", "")
    window = t.get("sliding_window")
    if model_type in _QWEN_WINDOW_TYPES and not t.get("use_sliding_window"):
        return None
    if window and model_type in ("gemma3", "gemma3_text") and t.get("use_bidirectional_attention"):
        window = window // 2 + 1
    if window and model_type in ("gemma4", "gemma4_text") and t.get("use_bidirectional_attention") == "all":
        window = window // 2 + 1
    return int(window) if window else None  # config/model.py: a window of 0 disables sliding
