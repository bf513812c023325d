"""Unknown by default: a config key the model's family does not read makes the KV side unknown, unless
it is one every family reads through the model config, or one reviewed as unable to change the KV
cache. Apron never borrows a number from another layout.

Each family declares the keys it reads (`READS`) and the keys of its own configs it knows to leave the
cache alone (`IRRELEVANT`); `KV_NEUTRAL` below is the reviewed list shared by every family. A key on
none of them (a new layout field, a new family's knob) names itself in the plan's unknowns.
"""

from __future__ import annotations

from types import ModuleType

from apron.plan.kv.families.base import DEFAULT_LAYER_KINDS
from apron.plan.model_config import ModelConfig

# Read for every model through apron.plan.model_config: what FamilyContext and the classic layers use.
BASE_READS = frozenset(
    {
        *("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
        *("hidden_size", "d_model", "n_embd", "dim"),
        *("num_attention_heads", "n_head", "num_heads", "n_heads"),
        *("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"),
        "head_dim",
        "model_type",
    }
)

# Reviewed, key by key: nothing here changes what the KV cache holds per token or per request.
KV_NEUTRAL = frozenset(
    {
        # what the checkpoint is: names, versions, code, dtype (the KV dtype is vLLM's setting)
        *("_name_or_path", "architectures", "auto_map", "transformers_version", "dtype", "torch_dtype"),
        *("quantization_config", "compression_config", "base_model_name_or_path"),
        # token ids and vocabulary (the embedding and head are weights, read from the safetensors)
        *("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "sep_token_id"),
        *("decoder_start_token_id", "pad_vocab_size_multiple", "tie_word_embeddings", "num_logits_to_keep"),
        # training only: dropout, initialisation, auxiliary losses, parallel pretraining
        *("attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop", "dropout", "initializer_range"),
        *("router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "output_router_logits", "pretraining_tp"),
        *("rescale_prenorm_residual", "ep_size", "use_cache", "cache_implementation", "gradient_checkpointing"),
        *("time_step_min", "time_step_max", "time_step_floor", "time_step_scale", "time_step_init_scheme"),
        # numerics of a layer: norms, activations, biases, soft-capping, scaling (no cache shape)
        *("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "norm_eps", "post_norm_eps", "rms_norm"),
        *("hidden_act", "hidden_activation", "mlp_hidden_act", "mamba_hidden_act", "projector_hidden_act"),
        *("attention_bias", "mlp_bias", "use_bias", "use_conv_bias", "mamba_proj_bias", "conv_bias"),
        *("fused_add_norm", "residual_in_fp32", "attn_logit_softcapping", "final_logit_softcapping"),
        *("query_pre_attn_scalar", "qk_scale_factor", "output_multiplier", "swiglu_limit", "swiglu_alpha"),
        *("use_qk_norm", "qk_layernorm", "qk_norm_type", "use_gemma_norm", "use_mamba_kernels"),
        *("attn_output_gate", "attention_output_gate", "output_gate_type"),
        # the MLA query's compression rank: weights and activations (the cache is kv_lora_rank wide)
        "q_lora_rank",
        # the MLP and the experts: weights (read from the safetensors) and activations, not the cache
        *("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim", "moe_intermediate_size"),
        *("expert_intermediate_size", "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
        *("dense_intermediate_size", "shared_intermediate_size", "moe_shared_expert_overlap", "moe_latent_size"),
        *("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts", "n_experts"),
        *("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token", "n_shared_experts"),
        *("first_k_dense_replace", "moe_layer_freq", "moe_router_dtype", "use_routing_bias", "expert_dtype"),
        *("scoring_func", "topk_method", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor"),
        *("mlp_layer_types", "decoder_sparse_step", "mlp_only_layers"),
        # positions: vLLM's rope tables are weights-like buffers, not cache (max_model_len is a setting)
        *("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length"),
        *("max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"),
        *("original_max_position_embeddings", "initial_context_length", "rope_theta", "rope_scaling"),
        *("partial_rotary_factor", "rope_interleave", "use_mrope", "rotary_dim", "layer_rope_theta"),
        *("rope_local_base_freq", "rotary_pct", "rotary_emb_base", "rope_parameters"),
        # the multi-token-prediction head and speculative drafts, which vLLM loads only when asked
        *("num_nextn_predict_layers", "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings"),
        "mtp_layers_block_type",
        # a Mamba layer's projection sizes that the state shape (read by the Mamba families) already fixes
        *("time_step_rank", "chunk_size", "mamba_chunk_size"),
    }
)


def unread_fields(config: ModelConfig, family: ModuleType) -> list[str]:
    """Keys of the language model's config that the family does not read and nobody cleared (null,
    false, zero and empty values describe nothing)."""
    allowed = BASE_READS | KV_NEUTRAL | family.READS | getattr(family, "IRRELEVANT", frozenset())
    return sorted(key for key, value in config.text.items() if key not in allowed and not _empty(value))


def _empty(value: object) -> bool:
    return value is None or value is False or value == 0 or value == [] or value == {} or value == ""


def unmodelled_layer_kinds(config: ModelConfig, family: ModuleType) -> list[str]:
    """A layer list naming kinds the family does not model (it would read them as something else)."""
    known = getattr(family, "LAYER_KINDS", DEFAULT_LAYER_KINDS)
    out = []
    for key in ("layer_types", "layers_block_type"):
        kinds = config.text.get(key)
        if key in family.READS and isinstance(kinds, list):
            strange = sorted({str(k) for k in kinds[: config.num_layers]} - known)
            if strange:
                out.append(
                    f"config field '{key}' names layer kinds the {family.NAME} layout does not model: "
                    + ", ".join(strange)
                )
    return out
