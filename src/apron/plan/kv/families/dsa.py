"""DeepSeek sparse attention (DeepSeek-V3.2, GLM-5.x: DeepseekV32ForCausalLM, GlmMoeDsaForCausalLM): MLA
on every layer plus a lightning indexer's key cache on the layers that compute their own top-k.

The indexer sits on layers where max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (or
where index_topk_pattern says so); its key cache holds index_head_dim fp8 values and one fp32 scale
per token. Every cache has one head and is the same on every TP rank. MLA and indexer layers are one
uniform type, so the model is one KV cache group.
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
    sparse_mla_index_groups,
)
from apron.plan.kv.specs import KVSpec, MLAAttentionSpec
from apron.plan.model_config import ModelConfig

NAME = "dsa"
ARCHITECTURES = frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"})
READS = frozenset(
    {
        "num_hidden_layers",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "q_lora_rank",
        "index_head_dim",
        "index_n_heads",
        "index_topk",
        "index_topk_freq",
        "index_topk_pattern",
        "index_skip_topk_offset",
    }
)
# Read by the weights or the kernels, or not read by this model path at all (indexer_types is read
# only by the hy_v4 model; the layer rule above decides where indexers are).
IRRELEVANT = frozenset(
    {"index_share_for_mtp_iteration", "indexer_rope_interleave", "indexer_types", "mlp_layer_types", "qk_head_dim"}
)
SOURCES = {
    "0.29.0": "as 0.30: the same indexer placement and caches (run by test_kv_conformance.py on 0.29's CPU build)",
    "0.30.0-0.33.0": "models/deepseek_v32/attention.py (indexer placement), model_executor/models/deepseek_v2.py "
    "DeepseekV32IndexerCache, layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec, "
    "v1/attention/backends/mla/index_group.py (the index groups made at construction)",
}
MIN_RELEASE = "0.29.0"  # registry.py 0.29.0:122
BLOCK = 64  # mla/indexer.py: the CUDA indexer takes [64]; the sparse MLA backends take MultipleOf(64)
FP8_DS_MLA_BYTES = 656  # mla_attention.py: 512 fp8 NoPE + 4 fp32 scales + 64 bf16 RoPE


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def indexer_layers(ctx: FamilyContext) -> list[bool]:
    t, n = ctx.t, ctx.config.num_layers
    freq = int(t.get("index_topk_freq", 1))
    offset = int(t.get("index_skip_topk_offset", 2))
    pattern = t.get("index_topk_pattern")
    if freq <= 0:
        raise BadInput(f"config.json: index_topk_freq {freq} must be positive")
    if pattern is not None:
        return [i >= len(pattern) or pattern[i] != "S" for i in range(n)]
    return [max(i - offset + 1, 0) % freq == 0 for i in range(n)]


def sparse_backend(ctx: FamilyContext, head: int) -> tuple[str, str]:
    """platforms/cuda.py _get_backend_priorities, sparse MLA: (backend, cache record)."""
    kv = ctx.settings.kv_cache_dtype
    major = ctx.capability[0]
    if major == 9:
        if kv == "auto" or kv == "bfloat16":
            return "FLASH_ATTN_MLA_SPARSE", "bf16"
        if kv in ("fp8", "fp8_e4m3") and head == 576:
            return "FLASHMLA_SPARSE", "fp8_ds_mla"
    if major == 10 and kv in ("auto", "bfloat16"):
        heads = ctx.config.num_heads // ctx.tp
        return ("FLASHINFER_MLA_SPARSE" if heads <= 16 else "FLASHMLA_SPARSE"), "bf16"
    raise Refusal(
        f"sparse MLA with --kv-cache-dtype {kv} on compute capability {major}.x is not modelled",
        "kv_cache_dtype",
        kind="not_modelled",
    )


def layer_specs(ctx: FamilyContext) -> KVLayout:
    head = int(ctx.t["kv_lora_rank"]) + int(ctx.t.get("qk_rope_head_dim") or 0)
    dim, heads = int(ctx.t["index_head_dim"]), int(ctx.t.get("index_n_heads", 1))
    if dim <= 0 or heads <= 0:
        raise BadInput(f"config.json: the indexer needs index_head_dim and index_n_heads > 0 (got {dim}, {heads})")
    name, record = sparse_backend(ctx, head)
    if record == "fp8_ds_mla":
        latent = MLAAttentionSpec(BLOCK, 1, head, 1, state_bytes=FP8_DS_MLA_BYTES, role="fp8_ds_mla latent records")
    else:
        latent = MLAAttentionSpec(BLOCK, 1, head, ctx.model_bytes, role="latent records")
    keys = MLAAttentionSpec(BLOCK, 1, dim + 4, 1, role="indexer keys (fp8 + fp32 scale)")
    specs: list[tuple[str, KVSpec]] = []
    indexers = indexer_layers(ctx)
    for i, has_indexer in enumerate(indexers):
        if has_indexer:
            specs.append((layer_name(i, "self_attn.indexer.k_cache"), keys))
        specs.append((layer_name(i, "self_attn.attn"), latent))
    count = sum(1 for n, _ in specs if n.endswith("k_cache"))
    ctx.notes.append(
        f"DSA: {len(specs) - count} MLA caches ({latent.describe()}) and {count} indexer key caches, "
        "one uniform group, the same on every TP rank"
    )
    return KVLayout(
        specs=tuple(specs),
        block_size=BLOCK,
        backend=BackendChoice(
            backend_from_facts(ctx.facts, name),
            f"first sparse MLA backend that validates for compute capability {ctx.capability[0]}.x",
        ),
        mamba_cache_mode="none",
        is_hybrid=False,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        buffers=sparse_indexer_buffers(ctx, int(ctx.t["index_topk"]))
        + index_group_buffers(ctx, indexers)
        + impl_buffers(ctx, name),
    )


def index_group_buffers(ctx: FamilyContext, indexers: list[bool]) -> tuple[ProfilingBuffer, ...]:
    """The model's one SparseMLAIndexGroupBuilder (models/deepseek_v32/nvidia/model.py
    0.30.0-0.33.0:192-201, the CUDA class of both architectures: models/deepseek_v32/__init__.py) over
    its [T, index_topk] top-k buffer, with get_sparse_mla_index_group_max_rows rows: min(T,
    max_num_seqs x the widest decode query) (index_group.py 0.30.0:498-512, 0.31.0:393-398, 0.32.0:399-404,
    0.33.0:406-411). That query is 1 without speculative decoding, which Apron does not plan
    (v1/attention/backend.py max_decode_query_len, 0.31.0:579-596). The builder makes a group at
    every layer with its own indexer, and at the first layer if that has none (register_layer's
    `is_index_producing_layer or self.current_group is None`; the sparse impl passes `indexer is not
    None`: layers/attention/sparse_mla_attention.py 0.30.0:688-698, 0.33.0:684-694; placement:
    models/deepseek_v32/attention.py 0.30.0-0.33.0:166-191). The MTP layer's own builder
    (nvidia/mtp.py 0.30.0:81-89) is built only with a draft, which Apron does not plan."""
    rows = min(ctx.settings.max_num_batched_tokens, ctx.settings.max_num_seqs)
    num_groups = sum(indexers) + (0 if not indexers or indexers[0] else 1)
    return sparse_mla_index_groups(ctx, rows, int(ctx.t["index_topk"]), num_groups)


def impl_buffers(ctx: FamilyContext, backend: str) -> tuple[ProfilingBuffer, ...]:
    """FLASH_ATTN_MLA_SPARSE's impl keeps cu_seqlens arange(T + 1) int32 from 0.31, one per MLA
    layer, made in its __init__ inside load_model (v1/attention/backends/mla/flashattn_mla_sparse.py
    0.31.0:181-185, 0.32.0:201-205, 0.33.0:208-212; 0.30 has none)."""
    if backend != "FLASH_ATTN_MLA_SPARSE" or not ctx.facts.at_least("0.31.0"):
        return ()
    rows = ctx.settings.max_num_batched_tokens + 1
    return (ProfilingBuffer("FlashAttention sparse MLA cu_seqlens", (rows,), 4, "persistent", ctx.config.num_layers),)
