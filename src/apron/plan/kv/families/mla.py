"""Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2, GLM-4.7-Flash, ...): one latent record of
kv_lora_rank + qk_rope_head_dim per token, the same on every tensor-parallel rank."""

from __future__ import annotations

from apron.plan.kv.families.base import FamilyContext, KVLayout, Layer, attention_layout
from apron.plan.model_config import ModelConfig

NAME = "mla"
# vLLM's MLA path is chosen by model type (config/model.py is_deepseek_mla).
MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "glm4_moe_lite",
        "kimi_k2",
        "longcat_flash",
        "pangu_ultra_moe",
        "deepseek_vl_v2",
        "kimi_vl",
    }
)
READS = frozenset({"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"})
SOURCES = {"0.29.0-0.33.0": "model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec"}


def matches(arch: str, config: ModelConfig) -> bool:
    # DeepSeek-V3.2-style sparse attention (deepseek_v32, glm_moe_dsa) is the dsa family.
    return config.is_mla and config.text_model_type in MODEL_TYPES


def layer_specs(ctx: FamilyContext) -> KVLayout:
    size = int(ctx.config.kv_lora_rank or 0) + ctx.config.qk_rope_head_dim
    ctx.notes.append(f"MLA: one {size}-wide latent record per token, the same on every TP rank")
    return attention_layout(ctx, [Layer("mla", 1, size)] * ctx.config.num_layers, NAME)
