"""Config fields that describe a cache or attention layout: a key no modelled family reads makes the
KV side unknown. Apron never borrows a number from another layout."""

from __future__ import annotations

from apron.plan.model_config import ModelConfig

# --- fields that describe a layout ------------------------------------------------------------

# Config keys that look like cache/attention/state layout descriptions: any underscore-separated word
# of the key in _LAYOUT_WORDS, or one of _LAYOUT_PARTS anywhere in it.
_LAYOUT_WORDS = {
    "window",
    "chunk",
    "sink",
    "sinks",
    "index",
    "indexer",
    "sparse",
    "compress",
    "compressed",
    "ring",
    "hyper",
    "ngram",
    "engram",
    "mamba",
    "ssm",
    "conv",
    "lightning",
    "retention",
    "kv",
    "cache",
    "latent",
    "lora",
    "replay",
    "replayssm",
    "hisparse",
    "kpool",
    "mtp",
    "nextn",
    "dsa",
    "nope",
    "swa",
    "recurrent",
    "gdn",
    "delta",
    "rwkv",
    "xlstm",
}
_LAYOUT_PARTS = (
    "layer_types",
    "block_type",
    "attention_type",
    "attn_type",
    "pattern",
    "global_head",
    "linear_attn",
    "linear_num",
    "linear_key",
    "linear_value",
    "linear_conv",
    "head_dim",
    "state_size",
    "kv_shared",
    "shared_layers",
)


def _describes_layout(key: str) -> bool:
    return bool(set(key.lower().split("_")) & _LAYOUT_WORDS) or any(p in key for p in _LAYOUT_PARTS)


# Keys the layouts above read, or that are known not to change the KV cache.
_READ_OR_IRRELEVANT = {
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "sliding_window_pattern",
    "layer_types",
    "attention_chunk_size",
    "no_rope_layers",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "head_dim",
    "num_key_value_heads",
    "global_head_dim",
    "num_global_key_value_heads",
    "attention_k_eq_v",
    "num_kv_shared_layers",
    "use_bidirectional_attention",
    "layers_block_type",
    "hybrid_override_pattern",
    "mamba_num_heads",
    "mamba_head_dim",
    "ssm_state_size",
    "mamba_ssm_cache_dtype",
    "conv_kernel",
    "state_size",
    "mamba_ssm_dtype",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "full_attention_interval",
    "attn_layer_period",
    "attn_layer_offset",
    "mamba_expand",
    "mamba_d_state",
    "mamba_d_conv",
    "conv_dim",
    "conv_L_cache",
    "conv_bias",
    "use_conv_bias",
    # weights, kernels or generation only
    "use_cache",
    "cache_implementation",
    "mamba_hidden_act",
    "mamba_proj_bias",
    "use_mamba_kernels",
    "mamba_dt_rank",
    "mamba_conv_bias",
    "mamba_chunk_size",
    "chunk_size",
    "mamba_n_groups",
    "mamba_n_heads",
    "mamba_d_head",
    "mamba_dt_min",
    "mamba_dt_max",
    "mamba_dt_init_floor",
    "mamba_dt_limit",
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "mtp_use_dedicated_embeddings",
    "mtp_layers_block_type",
    "rope_head_dim",
    "partial_rotary_factor",
    "attention_bias",
    "attention_dropout",
    "attn_logit_softcapping",
    "attn_output_gate",
    "output_gate_type",
    "router_aux_loss_coef",
    "time_step_rank",
    "rescale_prenorm_residual",
    "residual_in_fp32",
    "layer_rope_theta",
    "state_dim",
    "kv_channels",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "head_dim_original",
    "use_qk_norm",
    "qk_layernorm",
    "ssm_cfg",
    "layer_norm_epsilon",
}


def unread_layout_fields(config: ModelConfig, read: frozenset[str] = frozenset()) -> list[str]:
    """Layout-describing keys that the classic families and the model's own family (`read`) do not
    read (null or false values describe nothing)."""
    out = []
    for key, value in config.text.items():
        if value in (None, False, 0, [], {}) or key in _READ_OR_IRRELEVANT or key in read:
            continue
        if _describes_layout(key):
            out.append(key)
    return sorted(out)
