"""DeepSeek-V4 (DeepseekV4ForCausalLM): every layer keeps a 64-token sliding-window cache of fixed FP8
records; compressed layers (ratio 4 or 128) add a compressed MLA cache, the compressor's fp32 state
window and, at ratio 4, a sparse-attention indexer's key cache with its own compressor state.

Every cache holds one head and is the same on every tensor-parallel rank. The default attention class
on Hopper and Blackwell (FlashMLA) stores fp8_ds_mla records of 584 B (448 fp8 NoPE + 64 bf16 RoPE +
7 UE8M0 scales + 1 pad), pages aligned to 576 B, whatever --kv-cache-dtype says (auto becomes fp8;
bfloat16 is refused). The backends declare block-outermost layouts, so mixed pages pack side by side.
"""

from __future__ import annotations

from apron.errors import BadInput
from apron.plan.kv.backends import BackendChoice, backend_from_facts
from apron.plan.kv.families.base import (
    FamilyContext,
    KVLayout,
    ProfilingBuffer,
    Refusal,
    layer_name,
    sparse_indexer_buffers,
)
from apron.plan.kv.specs import KVSpec, MLAAttentionSpec, SlidingWindowMLASpec
from apron.plan.model_config import ModelConfig

NAME = "deepseek_v4"
ARCHITECTURES = frozenset({"DeepseekV4ForCausalLM"})
READS = frozenset(
    {
        "num_hidden_layers",
        "compress_ratios",
        "layer_types",
        "compress_rates",
        "sliding_window",
        "head_dim",
        "index_head_dim",
        "index_topk",
        "index_n_heads",
        "qk_rope_head_dim",
        "num_nextn_predict_layers",
    }
)
# Layout-looking keys that shape weights, kernels or the draft model, not the KV cache.
# The DSpark speculative-draft module (dspark_*: loaded only with a draft model) and the manifold
# hyper-connections (hc_*: residual-stream mixing) leave the cache alone; num_hash_layers routes experts.
IRRELEVANT = frozenset(
    {
        *("compress_rope_theta", "o_lora_rank", "o_groups", "num_hash_layers"),
        *("dspark_target_layer_ids", "dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id"),
        *("hc_mult", "hc_eps", "hc_sinkhorn_iters"),
    }
)
SOURCES = {
    "0.29.0": "as 0.30 (run by test_kv_conformance.py on 0.29's CPU build), but attention.py "
    "_resolve_dsv4_kv_cache_dtype (0.29.0:90-120) asserts an fp8* --kv-cache-dtype: auto is refused",
    "0.30.0-0.33.0": "models/deepseek_v4/attention.py (get_kv_cache_spec, _resolve_dsv4_kv_cache_dtype), "
    "compressor.py (CompressorStateCache), v1/attention/backends/mla/sparse_swa.py (DeepseekV4SWACache)",
    "0.33.0": "ratios from layer_types + compress_rates (transformers' DeepseekV4Config)",
}
MIN_RELEASE = "0.29.0"  # registry.py 0.29.0:98
RECORD_BYTES = 584  # attention.py: 448 B NoPE fp8 + 128 B RoPE bf16 + 8 B scales
RECORD_ALIGNMENT = 576
SWA_BLOCK = 64  # sparse_swa.py DeepseekV4SWACache
BLOCK = 256  # FlashMLA DSv4 and the indexer kernels take only 256 (sparse_mla.py, mla/indexer.py)
_LAYER_TYPE_RATIOS = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({*_LAYER_TYPE_RATIOS})


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def compress_ratios(config: ModelConfig) -> list[int]:
    """Per decoder layer, as the attention layer reads them: max(1, ratio); the list may run past
    num_hidden_layers (the MTP layers)."""
    t, n = config.text, config.num_layers
    raw = t.get("compress_ratios")
    if raw is None and t.get("layer_types") and t.get("compress_rates"):
        raw = [int(t["compress_rates"].get(kind, 0)) for kind in t["layer_types"]]
    if raw is None:
        raise KeyError("compress_ratios")
    ratios = [int(r) for r in raw[:n]]
    if len(ratios) < n:
        raise BadInput(f"config.json: compress_ratios has {len(raw)} entries for {n} layers")
    bad = sorted({r for r in ratios if r not in (0, 1, 4, 128)})
    if bad:
        raise BadInput(f"config.json: compress_ratios holds {bad}; DeepSeek-V4 layers compress by 0, 4 or 128")
    return [max(1, r) for r in ratios]


def resolve_kv_dtype(ctx: FamilyContext) -> str:
    """_resolve_dsv4_kv_cache_dtype with the fp8_ds_mla layout (FlashMLA): auto and fp8* become
    fp8_ds_mla; anything else raises ValueError at start-up."""
    requested = ctx.settings.kv_cache_dtype
    if not ctx.facts.at_least("0.30.0") and not requested.startswith("fp8"):
        # 0.29.0 attention.py:105-108: an assert, before 0.30 turned auto into fp8
        raise Refusal(
            f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {requested} "
            "(vLLM 0.29 does not resolve auto to fp8: pass --kv-cache-dtype fp8)",
            "kv_cache_dtype",
            kind="kv_cache_dtype",
        )
    if requested != "auto" and not requested.startswith("fp8"):
        raise Refusal(
            "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got "
            f"{requested}. Please set `--kv-cache-dtype fp8` or select a backend that supports "
            "bfloat16 KV cache.",
            "kv_cache_dtype",
            kind="kv_cache_dtype",
        )
    return "fp8_ds_mla"


def check_capability(ctx: FamilyContext, backend: str) -> None:
    major = ctx.capability[0]
    if major not in (9, 10):
        raise Refusal(
            f"{backend} (the default DeepSeek-V4 sparse MLA backend) runs on compute capability 9.x and 10.x only",
            "compute capability",
            kind="compute_capability",
        )


def swa_spec(ctx: FamilyContext, block: int, record: int, alignment: int) -> SlidingWindowMLASpec:
    window = int(ctx.t["sliding_window"])
    if window <= 0:
        raise BadInput(f"config.json: sliding_window {window} must be positive")
    return SlidingWindowMLASpec(
        block,
        1,
        int(ctx.t.get("head_dim") or 512),
        1,
        state_bytes=record,
        alignment=alignment,
        sliding_window=window,
        role="sliding-window records",
    )


def indexer_head(ctx: FamilyContext) -> int:
    """The indexer key record: index_head_dim fp8 values and one fp32 scale (mla/indexer.py)."""
    dim = int(ctx.t["index_head_dim"])
    heads = int(ctx.t.get("index_n_heads", 1))
    if dim <= 0 or heads <= 0:
        raise BadInput(f"config.json: the indexer needs index_head_dim and index_n_heads > 0 (got {dim}, {heads})")
    return dim + 4


def layer_specs(ctx: FamilyContext) -> KVLayout:
    resolve_kv_dtype(ctx)
    check_capability(ctx, "FLASHMLA_SPARSE_DSV4")
    head = int(ctx.t.get("head_dim") or 512)
    swa = swa_spec(ctx, SWA_BLOCK, RECORD_BYTES, RECORD_ALIGNMENT)
    index_head = indexer_head(ctx)
    specs: list[tuple[str, KVSpec]] = []
    for i, ratio in enumerate(compress_ratios(ctx.config)):
        compressed = MLAAttentionSpec(
            BLOCK,
            1,
            head,
            1,
            tokens_per_state=ratio,
            state_bytes=RECORD_BYTES,
            alignment=RECORD_ALIGNMENT,
            role="compressed latent records",
        )
        coff = 1 + (ratio == 4)  # compressor.py: ratio 4 overlaps two windows
        state = SlidingWindowMLASpec(
            4 if ratio == 4 else 8,
            1,
            2 * coff * head,
            4,
            alignment=RECORD_ALIGNMENT,
            sliding_window=coff * ratio,
            role="compressor state",
        )
        if ratio == 4:
            index_keys = MLAAttentionSpec(
                BLOCK, 1, index_head, 1, tokens_per_state=4, alignment=RECORD_ALIGNMENT, role="indexer keys"
            )
            index_state = SlidingWindowMLASpec(
                4,
                1,
                2 * coff * int(ctx.t["index_head_dim"]),
                4,
                alignment=RECORD_ALIGNMENT,
                sliding_window=coff * ratio,
                role="indexer compressor state",
            )
            specs += [
                (layer_name(i, "attn.indexer.k_cache"), index_keys),
                (layer_name(i, "attn.indexer.compressor.state_cache"), index_state),
            ]
        specs.append((layer_name(i, "attn.swa_cache"), swa))
        if ratio > 1:
            specs += [(layer_name(i, "attn"), compressed), (layer_name(i, "attn.compressor.state_cache"), state)]
    backend = backend_from_facts(ctx.facts, "FLASHMLA_SPARSE_DSV4")
    ctx.notes.append(
        "DeepSeek-V4: fp8_ds_mla records of 584 B (page aligned to 576 B) in every cache, one head, "
        "the same on every TP rank; compressed layers keep one record per 4 or 128 tokens"
    )
    return KVLayout(
        specs=tuple(specs),
        block_size=BLOCK,
        backend=BackendChoice(backend, "the DeepSeek-V4 attention layer builds its own FlashMLA sparse backend"),
        mamba_cache_mode="none",
        is_hybrid=False,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        block_outermost=True,
        buffers=sparse_indexer_buffers(ctx, int(ctx.t["index_topk"]), min_ratio=4) + hyper_connection_buffers(ctx),
    )


def padded_heads(ctx: FamilyContext) -> int:
    """get_padded_num_q_heads: the FlashMLA attention (every CUDA arch but SM12x) pads a rank's heads
    to 64 or 128 ("FP8 decode kernel only supports h_q = 64 or 128", models/deepseek_v4/nvidia/
    flashmla.py 0.29.0:78-85, 0.33.0 the same); FlashInfer's sparse kernel on SM12x to the next of
    8, 16, 32, 64, 128 (nvidia/flashinfer_sparse.py 0.33.0:81-88)."""
    local = max(int(ctx.t["num_attention_heads"]) // ctx.tp, 1)
    if ctx.capability[0] == 12:
        return next(h for h in (8, 16, 32, 64, 128) if h >= local) if local <= 128 else local
    return 64 if local <= 64 else 128


def hyper_connection_buffers(ctx: FamilyContext) -> tuple[ProfilingBuffer, ...]:
    """What DeepSeek-V4's dummy forward holds at its attention beyond the generic hidden states:
    the hyper-connection residual, bf16 [T, hc_mult, H] (kernels/mhc/tilelang.py
    mhc_pre_broadcast_tilelang, 0.33.0:732), of which the generic forward moment already counts one
    [T, H]; the attention output allocated at the padded head count (attention.py _alloc_attn_out,
    0.29.0:366, 0.33.0:518); and, with no attention metadata in the profile run,
    _fused_qnorm_rope_kv_insert's F.pad copy of the queries at the same shape (0.29.0:645-650,
    0.33.0:773-778). Sequence parallelism, which would divide T, is off at plain TP
    (nvidia/model.py _use_sequence_parallel)."""
    tokens, hidden = ctx.settings.max_num_batched_tokens, int(ctx.t["hidden_size"])
    hc = int(ctx.t.get("hc_mult") or 1)
    heads, head_dim = padded_heads(ctx), int(ctx.t["head_dim"])
    out = [
        ProfilingBuffer("attention output (padded heads)", (tokens, heads, head_dim), ctx.model_bytes, "forward"),
        ProfilingBuffer("padded query copy (profile run)", (tokens, heads, head_dim), ctx.model_bytes, "forward"),
    ]
    if hc > 1:
        out.append(ProfilingBuffer("hyper-connection residual streams", (tokens, hc - 1, hidden), 2, "forward"))
    return tuple(out)
