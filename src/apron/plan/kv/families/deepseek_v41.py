"""DeepSeek-V4.1 (DeepseekV41ForCausalLM): every layer keeps a 32-token sliding-window cache; only the
"kv-source" layers own a compressed MLA cache (ratio 1 or 2), an indexer key cache (when they are
index sources too) and, at ratio 2, a compressor ring; the other layers read their source's caches.

Records: on Hopper the V4 record (584 B, pages aligned to 576 B) and 64-token MLA blocks; on
Blackwell (SM100) the V4.1 MXFP8 record (528 B, 512-B pages) and 128-token blocks. From 0.31, where
the fused mega-attention kernel serves the topology (SM100, 8 heads per output group on each rank) it
is the default, and an unspecific --kv-cache-dtype resolves to nvfp4_ds_mla: 288-B compressed
records, the sliding window keeping the MXFP8 one (and, from 0.33, a block stride aligned to
lcm(528, 288)). Every cache has one head and is the same on every TP rank; the backends declare
block-outermost layouts.

0.30 and 0.31 page it as 0.32 does, read in their own source: the records and alignments
(attention.py 0.30.0:459-461, 0.31.0:502-507, 0.32.0:512-517), the 32-token sliding-window block
(0.30.0:463-473, 0.31.0:547-558), the compressed and indexer specs on the kv-source layers only
(0.30.0:947-973 and 1009-1030, 0.31.0:1100-1130 and 1164-1197), the kernel block [64 on SM90,
else 128] (sparse_mla.py 0.30.0:89-90), the compressor ring (compressor.py); test_kv_conformance.py
runs each release's own build. What differs: 0.30 has no mega attention (nvidia/model.py
0.30.0:117-152 picks FlashMLA on SM90 and SM100 alike; it arrives in 0.31.0:234-236), and 0.30 takes
every fp8* --kv-cache-dtype where 0.31 takes auto and fp8 only (_resolve_dsv4_kv_cache_dtype,
attention.py 0.30.0:123-158, 0.31.0:129-170).
"""

from __future__ import annotations

import math

from apron.errors import BadInput
from apron.frozen import replace
from apron.plan.kv.backends import BackendChoice, backend_from_facts
from apron.plan.kv.families.base import (
    FamilyContext,
    KVLayout,
    ProfilingBuffer,
    Refusal,
    layer_name,
    sparse_indexer_buffers,
)
from apron.plan.kv.families.deepseek_v4 import hyper_connection_buffers, indexer_head, swa_spec
from apron.plan.kv.specs import CircularBufferSpec, KVSpec, MLAAttentionSpec
from apron.plan.model_config import ModelConfig

NAME = "deepseek_v41"
ARCHITECTURES = frozenset({"DeepseekV41ForCausalLM"})
READS = frozenset(
    {
        "num_hidden_layers",
        "compress_ratios",
        "kv_source_layer_ids",
        "index_source_layer_ids",
        "sliding_window",
        "head_dim",
        "index_head_dim",
        "index_n_heads",
        "index_topk",
        "num_attention_heads",
        "o_groups",
        "candidate_source_layer_id",
        "candidate_topk_blocks",
        "candidate_block_size",
    }
)
# Engram n-gram tables live in host memory (see the weights and host-RAM terms); the rest shapes
# weights, kernels or the draft model.
# The DSpark speculative-draft module (dspark_*: loaded only with a draft model) and the manifold
# hyper-connections (hc_*: residual-stream mixing) leave the cache alone; num_hash_layers routes experts.
IRRELEVANT = frozenset(
    {
        *("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_n_routed_experts"),
        *("dspark_num_experts_per_tok", "hc_mult", "hc_eps", "hc_sinkhorn_iters"),
        "qk_rope_head_dim",  # the RoPE part is inside the head_dim record the cache stores
        "compress_rope_theta",
        "o_lora_rank",
        "engram_compressed_vocab_size",
        "engram_head_dim",
        "engram_layer_ids",
        "engram_max_ngram_size",
        "engram_n_heads",
        "engram_num_embeddings",
        "engram_pad_token_id",
        "engram_vocab_size",
        "dspark_target_layer_ids",
    }
)
SOURCES = {
    "0.30.0": "models/deepseek_v41/attention.py (get_kv_cache_spec, DeepseekV4IndexerCache, "
    "_use_v41_mxfp8_kv_record, _resolve_dsv4_kv_cache_dtype), compressor.py, sparse_mla.py, "
    "nvidia/model.py _select_dsv4_attn_cls (no mega attention)",
    "0.31.0": "models/deepseek_v41/attention.py, compressor.py, sparse_mla.py, nvidia/model.py "
    "_select_dsv4_attn_cls, nvidia/flash_mla_mega_attn.py is_available_for (0.31.0:149-170)",
    "0.32.0-0.33.0": "models/deepseek_v41/attention.py (get_kv_cache_spec, DeepseekV4IndexerCache, "
    "_use_v41_mxfp8_kv_record), compressor.py (CompressorStateCache ring), sparse_mla.py (kernel blocks), "
    "nvidia/model.py _select_dsv4_attn_cls, nvidia/flash_mla_mega_attn.py is_available_for",
}
MIN_RELEASE = "0.30.0"  # registry.py 0.30.0:379 (0.29 registers no DeepseekV41)
SWA_BLOCK = 32
WV_GROUP_SIZE = 8  # common/ops/fused_layout.py


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def uses_mega_attention(ctx: FamilyContext) -> bool:
    """nvidia/flash_mla_mega_attn.py is_available_for (0.31+): SM100 and WV_GROUP_SIZE heads per
    output group on each rank."""
    if ctx.capability[0] != 10 or not ctx.facts.at_least("0.31.0"):
        return False
    heads, groups = int(ctx.t["num_attention_heads"]), int(ctx.t.get("o_groups") or 0)
    if heads % ctx.tp or groups % ctx.tp:
        return False
    local_heads, local_groups = heads // ctx.tp, groups // ctx.tp
    if not local_groups or local_heads % WV_GROUP_SIZE:
        return False
    return local_heads // local_groups == WV_GROUP_SIZE


def records(ctx: FamilyContext) -> tuple[int, int, int, int | None]:
    """(sliding-window record, compressed record, page alignment, SWA block stride alignment)."""
    kv = ctx.settings.kv_cache_dtype
    if not ctx.facts.at_least("0.31.0") and kv != "auto" and not kv.startswith("fp8"):
        raise Refusal(
            f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {kv}. Please set "
            "`--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.",
            "kv_cache_dtype",
            kind="kv_cache_dtype",
        )
    if ctx.facts.at_least("0.31.0") and kv not in ("auto", "fp8"):
        raise Refusal(
            "DeepseekV4 packed KV layouts only support fp8 kv-cache, got "
            f"{kv}. Please set `--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.",
            "kv_cache_dtype",
            kind="kv_cache_dtype",
        )
    if ctx.capability[0] not in (9, 10):
        raise Refusal(
            "the DeepSeek-V4.1 FlashMLA sparse backends run on compute capability 9.x and 10.x only",
            "compute capability",
            kind="compute_capability",
        )
    if ctx.capability[0] != 10:
        return 584, 584, 576, None
    if uses_mega_attention(ctx):
        # attention.py (0.33): FlashMLA reads both records as rows of the whole cache, so the
        # sliding-window spec carries block_stride_alignment lcm(528, 288); 0.32 has no such field.
        return 528, 288, 512, math.lcm(528, 288) if ctx.facts.at_least("0.33.0") else None
    return 528, 528, 512, None


def kv_sources(ctx: FamilyContext) -> dict[int, int]:
    """{kv-source layer: compress ratio}; ratios are 0 (sliding only), 1 or 2."""
    ratios = [int(r) for r in ctx.t["compress_ratios"]]
    bad = sorted({r for r in ratios if r not in (0, 1, 2)})
    if bad:
        raise BadInput(f"config.json: compress_ratios holds {bad}; DeepSeek-V4.1 layers compress by 0, 1 or 2")
    sources = [int(i) for i in ctx.t.get("kv_source_layer_ids") or ()]
    return {i: ratios[i] for i in sources if i < ctx.config.num_layers and i < len(ratios)}


def layer_specs(ctx: FamilyContext) -> KVLayout:
    swa_record, record, alignment, swa_stride = records(ctx)
    block = 128 if ctx.capability[0] == 10 else 64  # sparse_mla.py: [64 if SM90 else 128]
    head = int(ctx.t.get("head_dim") or 512)
    swa = swa_spec(ctx, SWA_BLOCK, swa_record, alignment)
    if swa_stride:
        swa = replace(swa, stride_alignment=swa_stride)
    index_sources = {int(i) for i in ctx.t.get("index_source_layer_ids") or ()}
    index_head = indexer_head(ctx)
    sources = kv_sources(ctx)
    specs: list[tuple[str, KVSpec]] = []
    for i in range(ctx.config.num_layers):
        ratio = sources.get(i)
        if ratio:
            specs.append(
                (
                    layer_name(i, "attn"),
                    MLAAttentionSpec(
                        block, 1, head, 1, tokens_per_state=ratio, state_bytes=record, alignment=alignment
                    ),
                )
            )
            if i in index_sources:
                keys = MLAAttentionSpec(block, 1, index_head, 1, tokens_per_state=ratio, alignment=alignment)
                specs.append((layer_name(i, "attn.indexer.k_cache"), keys))
        specs.append((layer_name(i, "attn.swa_cache"), swa))
        if ratio and ratio > 1:
            # compressor.py: a ring of max(8, next power of two of drafts + 2) fp32 [kv, score] rows.
            ring = CircularBufferSpec(8, 1, 2 * head, 4, role="compressor ring")
            specs.append((layer_name(i, "attn.compressor.state_cache"), ring))
    name = "FLASHMLA_MEGA_ATTN_DSV41" if record == 288 else "FLASHMLA_SPARSE_DSV41"
    ctx.notes.append(
        f"DeepSeek-V4.1: {swa_record}-B sliding-window records in every layer, {record}-B compressed records "
        f"on the {len(sources)} kv-source layers, one head, the same on every TP rank"
    )
    return KVLayout(
        specs=tuple(specs),
        block_size=block,
        backend=BackendChoice(
            backend_from_facts(ctx.facts, name),
            "models/deepseek_v41/nvidia/model.py _select_dsv4_attn_cls: mega attention on SM100 where the "
            "topology allows it, FlashMLA otherwise",
        ),
        mamba_cache_mode="none",
        is_hybrid=False,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        block_outermost=True,
        buffers=buffers(ctx, min(sources.values(), default=1)),
    )


def buffers(ctx: FamilyContext, min_ratio: int) -> tuple[ProfilingBuffer, ...]:
    """nvidia/model.py: the shared top-k buffer and, with a candidate source layer, the two-level
    indexer's candidate-block buffer (both int32 over max_num_batched_tokens rows)."""
    out = sparse_indexer_buffers(ctx, int(ctx.t["index_topk"]), min_ratio=max(min_ratio, 1))
    out += hyper_connection_buffers(ctx)
    blocks = int(ctx.t.get("candidate_topk_blocks") or 0)
    if int(ctx.t.get("candidate_source_layer_id", -1)) >= 0 and blocks:
        tokens = ctx.settings.max_num_batched_tokens
        out += (ProfilingBuffer("candidate-block indices", (tokens, blocks), 4, "persistent"),)
    return out
