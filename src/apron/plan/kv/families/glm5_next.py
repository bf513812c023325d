"""GLM-5.3-Flash (Glm5NextForConditionalGeneration): Kimi delta attention (KDA, a recurrent state per
request) on most layers, and NoPE MLA layers with a kpool sparse-attention indexer: its key cache
keeps one fp8 entry per `index_kpool` tokens, and a small ring holds the pool still being filled.

A hybrid: the attention block grows until one MLA page holds a KDA state (a multiple of 128 tokens),
and the KDA state is padded to that page.

0.32+: the kpool tail backend declares a block-outermost layout, so the MLA, indexer, ring and state
caches pack side by side in one block (the generic packed grouping).

0.30 and 0.31 page it differently (`legacy_layout`): the tail is a KpoolTailSpec on the inherited
DeepSeek-V3.2 indexer backend, the layout stays layer-outer (no backend declares BL**), and
v1/core/kv_cache_utils.py _get_kv_cache_groups_glm5_next (0.30.0:1195, 0.31.0:1213) groups it: one
group of every MLA and indexer layer, one of the tails (each padded to the indexer page), and the KDA
layers round-robin in cdiv(KDA layers, MLA layers) groups padded to the MLA page, each KDA group's
i-th layer aliasing MLA layer i's region. A block is then the MLA and indexer pages only
(_get_kv_cache_bytes_per_block, 0.30.0:1592-1594, 0.31.0:1610-1612).
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
    sparse_mla_index_groups,
)
from apron.plan.kv.specs import CircularBufferSpec, KVSpec, MambaSpec, MLAAttentionSpec, cdiv
from apron.plan.model_config import ModelConfig

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

NAME = "glm5_next"
ARCHITECTURES = frozenset({"Glm5NextForConditionalGeneration", "Glm5NextForCausalLM"})
READS = frozenset(
    {
        "num_hidden_layers",
        "layer_types",
        "linear_attn_config",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "index_head_dim",
        "index_n_heads",
        "index_kpool",
        "index_kpool_compress",
        "index_topk",
        "mla_use_nope",
    }
)
# mhc/hc_*: manifold hyper-connections (residual-stream mixing), no cache; the MLA cache holds
# kv_lora_rank + qk_rope_head_dim, whatever the query (q_lora_rank, qk_nope) and value dims.
IRRELEVANT = frozenset(
    {
        *("mhc", "hc_mult", "hc_eps", "hc_sinkhorn_iters", "q_lora_rank", "qk_nope_head_dim", "v_head_dim"),
        "index_kpool_always_select_tail",
        "index_share_for_mtp_iteration",
        "indexer_rope_interleave",
        "indexer_types",
        "mlp_layer_types",
        "qk_head_dim",
    }
)
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({"linear_attention", "deepseek_sparse_attention"})
SOURCES = {
    "0.30.0": "models/glm5next/nvidia/attention.py (Glm5NextIndexerCache, Glm5NextTailCache: KpoolTailSpec), "
    "nvidia/kda.py, model_executor/layers/mamba/abstract.py (no prefill checkpoint blocks), platforms/interface.py "
    "update_block_size_for_backend (first non-SSM backend), platforms/cuda.py _get_indexer_block_alignment, "
    "v1/core/kv_cache_utils.py _get_kv_cache_groups_glm5_next",
    "0.31.0": "models/glm5next/common/attention.py (the tail ring of 0.32, still a KpoolTailSpec), common/kda.py, "
    "platforms/interface.py (every backend's common block), platforms/cuda.py _get_indexer_block_alignment, "
    "v1/core/kv_cache_utils.py _get_kv_cache_groups_glm5_next",
    "0.32.0-0.33.0": "models/glm5next/common/attention.py (Glm5NextIndexerCache, Glm5NextTailCache), "
    "common/kda.py (KDA state, FlashKDA prefill checkpoints), v1/attention/backends/mla/indexer.py "
    "(Glm5NextIndexerBackend, KpoolTailBackend), platforms/interface.py _align_hybrid_block_size",
}
MIN_RELEASE = "0.30.0"  # registry.py 0.30.0:123,429 (0.29 registers no Glm5Next)
PAGED_MQA_PAGE_SIZES = (32, 64)  # DeepGEMM paged MQA pages in states (64 only on SM120)


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def linear_config(ctx: FamilyContext) -> dict[str, Any]:
    cfg = ctx.t.get("linear_attn_config") or {}
    heads, head_dim, kernel = int(cfg["num_heads"]), int(cfg["head_dim"]), int(cfg["short_conv_kernel_size"])
    if heads <= 0 or head_dim <= 0 or kernel <= 1:
        raise BadInput("config.json: linear_attn_config needs num_heads, head_dim > 0 and short_conv_kernel_size > 1")
    return {"heads": heads, "head_dim": head_dim, "kernel": kernel, "bounded": cfg.get("gate_lower_bound") is not None}


def kda_state(ctx: FamilyContext, lin: dict[str, Any]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, int]]:
    """mamba_utils.py kda_state_shape: the q/k/v short-conv states and the recurrent state per head;
    the recurrent state is fp32 (the config hook resets the SSM cache dtype for this backend)."""
    heads, dim = lin["heads"], lin["head_dim"]
    if heads % ctx.tp:
        raise Refusal(f"{heads} is not divisible by {ctx.tp}", "linear attention heads")
    conv = (lin["kernel"] - 1, 3 * heads * dim // ctx.tp)
    return (conv, (heads // ctx.tp, dim, dim)), (ctx.model_bytes, 4)


def mla_backend(ctx: FamilyContext) -> str:
    """platforms/cuda.py sparse MLA for head 512: FLASHINFER_MLA_SPARSE_SM90 leads on Hopper; on
    Blackwell FLASHMLA_SPARSE refuses head 512 and FLASHINFER_MLA_SPARSE serves it."""
    if ctx.settings.kv_cache_dtype not in ("auto", "bfloat16"):
        raise Refusal(
            f"GLM-5.3-Flash with --kv-cache-dtype {ctx.settings.kv_cache_dtype} is not modelled",
            "kv_cache_dtype",
            kind="not_modelled",
        )
    major = ctx.capability[0]
    if major == 9:
        return "FLASHINFER_MLA_SPARSE_SM90"
    if major == 10:
        return "FLASHINFER_MLA_SPARSE"
    raise Refusal(
        f"the GLM-5.3-Flash sparse MLA backends run on compute capability 9.x and 10.x, not {major}.x",
        "compute capability",
        kind="compute_capability",
    )


def hybrid_block(attn_1tok: int, state_page: int, first_min: int, all_mins: list[int], block: int) -> int:
    """_align_hybrid_block_size (0.31+): the smallest multiple of the first backend's kernel block
    (at least 128 for MLA) whose page holds a state, rounded to every backend's kernel block."""
    align = max(first_min, block, 128)
    attn_block = align * cdiv(state_page, align * attn_1tok)
    common = math.lcm(*all_mins)
    return common * cdiv(attn_block, common)


def stride_for_kernel(spec: MLAAttentionSpec, kernel: int) -> int:
    """KVCacheSpec.get_block_stride_alignment for MultipleOf(kernel): the page of one kernel block
    when the block spans several."""
    kernel_block = math.gcd(kernel, spec.block_size)
    if kernel_block == spec.block_size:
        return 1
    return MLAAttentionSpec(
        kernel_block, 1, spec.head_size, spec.dtype_bytes, tokens_per_state=spec.tokens_per_state
    ).page_size_bytes()


def layer_specs(ctx: FamilyContext) -> KVLayout:
    lin = linear_config(ctx)
    kpool = int(ctx.t.get("index_kpool") or 0)
    index_dim, index_heads = int(ctx.t["index_head_dim"]), int(ctx.t.get("index_n_heads", 1))
    if kpool <= 1 or index_dim <= 0 or index_heads <= 0:
        raise BadInput(
            f"config.json: the kpool indexer needs index_kpool > 1 and index_head_dim, index_n_heads > 0 "
            f"(got {kpool}, {index_dim}, {index_heads})"
        )
    name = mla_backend(ctx)
    shapes, dtypes = kda_state(ctx, lin)
    head = int(ctx.t["kv_lora_rank"]) + int(ctx.t.get("qk_rope_head_dim") or 0)
    attn_1tok = head * ctx.model_bytes
    state_page = sum(math.prod(s) * d for s, d in zip(shapes, dtypes, strict=True))
    if not ctx.facts.at_least("0.32.0"):
        return legacy_layout(ctx, name, (shapes, dtypes), head, state_page, (kpool, index_dim))
    mla_min = 64 if name == "FLASHINFER_MLA_SPARSE_SM90" else 32
    index_kernels = [kpool * n for n in PAGED_MQA_PAGE_SIZES]
    # Phase 1 (0.31+): the smallest block every backend takes; the kpool indexer leads in layer order.
    block = hybrid_block(attn_1tok, state_page, min(index_kernels), [min(index_kernels), 1, mla_min], 128)
    ring = kpool  # attention.py: kpool x next_power_of_2(cdiv(kpool + drafts, kpool)) with no drafts
    # kda.py: FlashKDA prefill (SM90/10x/12x, bf16, head 128, bounded gate) checkpoints every 16 tokens.
    flashkda = ctx.capability[0] in (9, 10, 12) and lin["head_dim"] == 128 and ctx.model_bytes == 2
    checkpoint_blocks = int(flashkda and lin["bounded"])
    kda = MambaSpec(shapes, dtypes, block, "kda", block * attn_1tok, checkpoint_blocks)
    latent = MLAAttentionSpec(block, 1, head, ctx.model_bytes, role="NoPE latent records")
    latent = _with_stride(latent, 1 if name == "FLASHINFER_MLA_SPARSE_SM90" else mla_min)
    keys = MLAAttentionSpec(block, 1, index_dim + 4, 1, tokens_per_state=kpool, role="kpool indexer keys")
    keys = _with_spec_stride(keys, stride_for_kernel(keys, max(index_kernels)))
    tail = CircularBufferSpec(ring, 2, index_dim, 2, role="kpool tail (raw keys and gate scores)")
    specs = _per_layer(ctx, kda, keys, tail, latent)
    ctx.notes.append(
        f"GLM-5.3-Flash: hybrid block {block} tokens (one MLA page holds a KDA state, padded to "
        f"{block * attn_1tok:,} B); kpool indexer keys every {kpool} tokens and a {ring}-entry tail ring"
    )
    return _layout(ctx, specs, block, name, block * attn_1tok, kpool, block_outermost=True)


def legacy_block(ctx: FamilyContext, attn_1tok: int, state_page: int, kpool: int) -> int:
    """platforms/interface.py _align_hybrid_block_size (0.30.0:886-917, 0.31.0:~960-990): the first
    non-SSM backend is layer 3's indexer (DEEPSEEK_V32_INDEXER, kernel block [64]: indexer.py
    0.30.0:203-204), so the alignment is max(64, the phase-1 block, 128 for MLA) = 128; then CUDA's
    _get_indexer_block_alignment (cuda.py 0.30.0:430-447, 0.31.0:418-435) rounds up to a multiple of
    index_kpool x the smallest DeepGEMM paged-MQA page (32; 64 on SM120)."""
    block = 128 * cdiv(state_page, 128 * attn_1tok)
    pool_page = 64 if ctx.capability[0] == 12 else min(PAGED_MQA_PAGE_SIZES)
    return kpool * pool_page * cdiv(block, kpool * pool_page)


def legacy_layout(
    ctx: FamilyContext,
    name: str,
    state: tuple[tuple[tuple[int, ...], ...], tuple[int, int]],
    head: int,
    state_page: int,
    indexer: tuple[int, int],
) -> KVLayout:
    """0.30 and 0.31: the same caches as 0.32 (KDA state: mamba_utils.py kda_state_shape, fp32
    recurrent; latent MLA head kv_lora_rank + qk_rope; fp8 indexer keys + fp32 scale per kpool), with
    no FlashKDA prefill checkpoint block (mamba/abstract.py get_kv_cache_spec 0.30.0:67-86 sets
    none), no block stride alignments (0.32's customize_attention_spec), and the tail a KpoolTailSpec
    of `ring` entries: 0.30 index_kpool (nvidia/attention.py 0.30.0:186-196), 0.31 index_kpool x
    next_power_of_2(cdiv(index_kpool + drafts, index_kpool)) = index_kpool without drafts
    (common/attention.py 0.31.0:193-212). KpoolTailSpec.max_admission_blocks_per_request is 1
    (kv_cache_interface.py 0.30.0:971-990): one block per request, as a ring. Grouped by
    planning.glm5_next_groups."""
    shapes, dtypes = state
    kpool, index_dim = indexer
    attn_1tok = head * ctx.model_bytes
    block = legacy_block(ctx, attn_1tok, state_page, kpool)
    kda = MambaSpec(shapes, dtypes, block, "kda", block * attn_1tok)
    latent = MLAAttentionSpec(block, 1, head, ctx.model_bytes, role="NoPE latent records")
    keys = MLAAttentionSpec(block, 1, index_dim + 4, 1, tokens_per_state=kpool, role="kpool indexer keys")
    tail = CircularBufferSpec(kpool, 2, index_dim, 2, role="kpool tail, a KpoolTailSpec (raw keys and gate scores)")
    specs = _per_layer(ctx, kda, keys, tail, latent)
    ctx.notes.append(
        f"GLM-5.3-Flash (vLLM {ctx.facts.version}): hybrid block {block} tokens (one MLA page holds a KDA "
        f"state, padded to {block * attn_1tok:,} B); kpool indexer keys every {kpool} tokens and a {kpool}-entry "
        "tail; grouped by the release's dedicated GLM-5.3-Flash path (a block holds the MLA and indexer pages, "
        "the KDA states and tails alias them)"
    )
    return _layout(ctx, specs, block, name, block * attn_1tok, kpool, grouping="glm5_next")


def _layout(
    ctx: FamilyContext,
    specs: list[tuple[str, KVSpec]],
    block: int,
    backend: str,
    padded_state_bytes: int,
    kpool: int,
    **paging: Any,
) -> KVLayout:
    """The hybrid layout both paths build; PAGING: how the release pages it (0.32+'s block-outermost
    layout, or 0.30/0.31's dedicated grouping)."""
    return KVLayout(
        specs=tuple(specs),
        block_size=block,
        backend=BackendChoice(backend_from_facts(ctx.facts, backend), "first sparse MLA backend for head 512"),
        mamba_cache_mode="align",
        is_hybrid=True,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        mamba_page_size_padded=padded_state_bytes,
        buffers=kpool_buffers(ctx, kpool),
        **paging,
    )


def kpool_buffers(ctx: FamilyContext, kpool: int) -> tuple[ProfilingBuffer, ...]:
    """The model's top-k buffer is round_up(index_topk + kpool - 1, 128) wide (nvidia/model.py
    0.30.0:632-650, common/model.py 0.31+); the indexer op's profiling branch reserves the K-gather
    workspace and a logits probe of max(min(max_num_seqs, T) x length x 4 B,
    VLLM_SPARSE_INDEXER_MAX_LOGITS_MB). The length is max_model_len in 0.30
    (sparse_attn_indexer_kpool.py 0.30.0:307-329, called with it: nvidia/attention.py 0.30.0:299-311)
    and max_model_len // index_kpool from 0.31 (common/attention.py 0.31.0:311, 0.32.0:278). The
    K-gather rows are get_max_prefill_buffer_size (40 x max_model_len) in 0.30 and 0.31, divided by
    index_kpool from 0.32 (common/attention.py 0.32.0:282-284). The FlashKDA prefill workspace size
    comes from the compiled op and is not counted."""
    tokens, seqs, length = ctx.settings.max_num_batched_tokens, ctx.settings.max_num_seqs, ctx.settings.max_model_len
    width = cdiv(int(ctx.t["index_topk"]) + kpool - 1, 128) * 128
    is_pooled = ctx.facts.at_least("0.32.0")
    topk, workspace, probe = sparse_indexer_buffers(ctx, width, min_ratio=kpool if is_pooled else 1)
    pooled_length = length // kpool if ctx.facts.at_least("0.31.0") else length
    decode = min(seqs, tokens) * pooled_length * 4
    probe = ProfilingBuffer(probe.name, (max(decode, probe.num_bytes),), 1, "forward")
    return (topk, workspace, probe, *index_group_buffers(ctx, width))


def index_group_buffers(ctx: FamilyContext, width: int) -> tuple[ProfilingBuffer, ...]:
    """Each sparse MLA layer's own index group, made when its attention impl is constructed (inside
    load_model, so "Model loading took" holds them). GLM-5.3-Flash's MLAModules pass no
    index_group_builder (models/glm5next/nvidia/attention.py 0.30.0:549-566, common/attention.py
    0.31.0:561, 0.32.0/0.33.0:534), so SparseMLACommonImpl makes a builder per layer over the model's
    top-k buffer (layers/attention/sparse_mla_attention.py 0.30.0:688-698, 0.31.0/0.32.0:675-685,
    0.33.0:684-694), and a builder's first register_layer makes a group sized to that buffer's rows,
    max_num_batched_tokens (v1/attention/backends/mla/index_group.py 0.30.0:436-488, 0.31.0:336-383,
    0.32.0:342-389, 0.33.0:349-396): physical top-k indices [T + 1, width] int32 and valid counts
    [T + 1] int32, and in 0.30 request ids arange(T) int32. One group per MLA layer: DeepSeek-V3.2-style
    models instead share one builder of min(T, max_num_seqs x query length) rows, a group per indexer
    layer (deepseek_v2.py 0.30.0:1446-1453, deepseek_v32/nvidia/model.py 0.30.0:198-201)."""
    layers = sum(1 for kind in ctx.t["layer_types"][: ctx.config.num_layers] if kind != "linear_attention")
    return sparse_mla_index_groups(ctx, ctx.settings.max_num_batched_tokens, width, layers)


def _with_stride(spec: MLAAttentionSpec, rows: int) -> MLAAttentionSpec:
    """sparse_utils.py align_blocks_to_rows: blocks a whole number of `rows`-row pages apart."""
    return replace(spec, stride_alignment=rows * spec.state_content_bytes())


def _with_spec_stride(spec: MLAAttentionSpec, stride: int) -> MLAAttentionSpec:
    return replace(spec, stride_alignment=stride)


def _per_layer(ctx: FamilyContext, kda: KVSpec, keys: KVSpec, tail: KVSpec, latent: KVSpec) -> list[tuple[str, KVSpec]]:
    """Every layer's caches as vLLM names them: a KDA state for a linear-attention layer, else the
    indexer's keys and tail and the MLA latent records (the same in every release read)."""
    specs: list[tuple[str, KVSpec]] = []
    for i, kind in enumerate(ctx.t["layer_types"][: ctx.config.num_layers]):
        if kind == "linear_attention":
            specs.append((layer_name(i, "self_attn"), kda))
            continue
        specs += [
            (layer_name(i, "self_attn.indexer.k_cache"), keys),
            (layer_name(i, "self_attn.indexer.tail_cache"), tail),
            (layer_name(i, "self_attn.attn"), latent),
        ]
    return specs
