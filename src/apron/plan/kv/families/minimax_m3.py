"""MiniMax-M3 (MiniMaxM3SparseForConditionalGeneration): grouped-query attention on every layer; the
block-sparse layers (sparse_attention_freq) add a key-only index cache of one head, the same on every
TP rank. The sparse and index kernels take only 128-token blocks. Every cache is one uniform type,
so the model is one KV cache group.
"""

from __future__ import annotations

from apron.errors import BadInput
from apron.plan.kv.backends import BackendChoice, backend_from_facts
from apron.plan.kv.families.base import FamilyContext, KVLayout, ProfilingBuffer, Refusal, layer_name
from apron.plan.kv.specs import FullAttentionSpec, KVSpec, MLAAttentionSpec
from apron.plan.model_config import ModelConfig

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

NAME = "minimax_m3"
ARCHITECTURES = frozenset({"MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3SparseForCausalLM"})
READS = frozenset(
    {"num_hidden_layers", "num_key_value_heads", "head_dim", "sparse_attention_config", "use_sparse_attention"}
)
IRRELEVANT = frozenset({"num_mtp_modules", "num_nextn_predict_layers"})
SOURCES = {
    "0.29.0": "as 0.30: model.py is unchanged and 0.29's platforms/interface.py also takes the first "
    "backend's block size (run by test_kv_conformance.py on 0.29's CPU build)",
    "0.30.0-0.33.0": "models/minimax_m3/nvidia/model.py (MiniMaxM3SparseAttention), "
    "common/indexer.py (MiniMaxM3IndexerCache), common/sparse_attention.py (kernel block 128)",
}
MIN_RELEASE = "0.29.0"  # registry.py 0.29.0:166,493
BLOCK = 128


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def sparse_layers(ctx: FamilyContext) -> list[bool]:
    sparse = ctx.t.get("sparse_attention_config") or {}
    n = ctx.config.num_layers
    if not ctx.t.get("use_sparse_attention", sparse.get("use_sparse_attention", bool(sparse))):
        return [False] * n
    freq = sparse.get("sparse_attention_freq") or [1] * n
    return [bool(freq[i]) if i < len(freq) else False for i in range(n)]


def layer_specs(ctx: FamilyContext) -> KVLayout:
    sparse = ctx.t.get("sparse_attention_config") or {}
    index_dim = int(sparse.get("sparse_index_dim", ctx.head_dim()))
    if int(sparse.get("sparse_num_index_heads", 1)) <= 0 or index_dim <= 0:
        raise BadInput("config.json: sparse_attention_config needs sparse_num_index_heads and sparse_index_dim > 0")
    if not ctx.facts.at_least("0.31.0"):
        # platforms/interface.py (0.30) takes the block size from the first layer's backend (the dense
        # FLASH_ATTN layer 0: 16); v1/worker/utils.py select_common_block_size then finds no kernel
        # block the 128-only sparse backends share with it.
        raise Refusal(
            "No common block size for 16. (vLLM 0.29 and 0.30 take the block size from layer 0's dense backend; "
            "the sparse layers' kernels take only 128: pass --block-size 128)",
            "block size",
            kind="block_size",
        )
    kv = ctx.settings.kv_cache_dtype
    if kv not in ("auto", "bfloat16"):
        raise Refusal(
            f"MiniMax-M3 with --kv-cache-dtype {kv} is not modelled (the index cache dtype follows indexer_kv_dtype)",
            "kv_cache_dtype",
            kind="not_modelled",
        )
    dense = FullAttentionSpec(BLOCK, ctx.kv_heads(), ctx.head_dim(), ctx.kv_bytes)
    index = MLAAttentionSpec(BLOCK, 1, index_dim, ctx.model_bytes, role="index keys")
    specs: list[tuple[str, KVSpec]] = []
    for i, is_sparse in enumerate(sparse_layers(ctx)):
        if is_sparse:
            specs.append((layer_name(i, "self_attn.attn.index_cache"), index))
        specs.append((layer_name(i, "self_attn.attn"), dense))
    ctx.notes.append(
        "MiniMax-M3: block-sparse layers add a key-only index cache (one head, the same on every TP "
        "rank); all caches are one group of 128-token blocks (the sparse kernels take only 128)"
    )
    return KVLayout(
        specs=tuple(specs),
        block_size=BLOCK,
        backend=BackendChoice(
            backend_from_facts(ctx.facts, "MINIMAX_M3_SPARSE"),
            "the sparse layers' own backend; 0.31+ takes the smallest block every backend accepts (128)",
        ),
        mamba_cache_mode="none",
        is_hybrid=False,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        buffers=(topk_buffer(ctx, sparse),),
    )


def topk_buffer(ctx: FamilyContext, sparse: dict[str, Any]) -> ProfilingBuffer:
    """nvidia/model.py: the shared top-k block indices, [tokens rounded up to 4, index heads per
    rank, sparse_topk_blocks] int32."""
    tokens = (ctx.settings.max_num_batched_tokens + 3) // 4 * 4
    heads = max(1, int(sparse.get("sparse_num_index_heads", 1)) // ctx.tp)
    return ProfilingBuffer(
        "sparse top-k block indices", (tokens, heads, int(sparse.get("sparse_topk_blocks", 0))), 4, "persistent"
    )
