"""Qwen3.8-Flash-Next (Qwen4ExpForConditionalGeneration): gated delta-net layers (a recurrent state per
request) and QSA full-attention layers every `full_attention_interval`; each QSA layer adds an indexer
whose compressed key cache keeps one bf16 key per `indexer_compress_ratio` tokens and a raw-key ring
for the group still being compressed. The PLE layer keeps a short-conv state that is the same on every
tensor-parallel rank (tp_replicated).

A hybrid: the attention block grows until one QSA page holds the largest state (delta-net or PLE),
and the states are padded to that page. The QSA state backend declares block-outermost layouts, so the
caches pack side by side in one block.

0.29, 0.30 and 0.31 page it as 0.32 does, read in their own source: the delta-net and PLE states
(nvidia/model.py get_mamba_specs_from_config 0.29.0:784-805, 0.30.0:814-835, 0.31.0:829-850,
0.32.0:887-908: the PLE state tp_replicated), the raw-key ring of compress-ratio x cdiv(ratio +
drafts, ratio) entries and the compressed keys one per ratio tokens (common/qsa_cache.py
0.29.0:763-797, 0.30.0:841-875, 0.31.0:841-875), the hybrid block of the first QSA backend (16) and
the packed grouping (QSAStateBackend BLNHC/BLHNC, all four); test_kv_conformance.py runs each
release's own build. What differs is the main KV cache dtype: 0.29 and 0.30 refuse anything but
bf16 (nvidia/qsa.py 0.29.0:113-114, 0.30.0:109-110 raise NotImplementedError), 0.31 and 0.32 also
take fp8 and fp8_e4m3 (nvidia/qsa.py 0.31.0:72-77, 0.32.0:154-159: e4m3 bytes in a uint8 cache).
"""

from __future__ import annotations

import math

from apron.errors import BadInput
from apron.plan.kv.backends import Backend, BackendChoice
from apron.plan.kv.families.base import FamilyContext, KVLayout, ProfilingBuffer, Refusal, layer_name
from apron.plan.kv.families.gated_delta_net import gdn_layer, layer_types
from apron.plan.kv.specs import CircularBufferSpec, FullAttentionSpec, KVSpec, MambaSpec, MLAAttentionSpec, cdiv
from apron.plan.model_config import ModelConfig

NAME = "qwen4_exp"
ARCHITECTURES = frozenset({"Qwen4ExpForConditionalGeneration", "Qwen4ExpForCausalLM"})
READS = frozenset(
    {
        "num_hidden_layers",
        "layer_types",
        "full_attention_interval",
        "num_key_value_heads",
        "head_dim",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "mamba_ssm_dtype",
        "indexer_compress_ratio",
        "indexer_head_dim",
        "indexer_kv_heads",
        "indexer_n_heads",
        "indexer_budget",
        "ple_layer_ids",
        "ple_conv_kernel_size",
        "ngram_size",
        "hc_count",
        "rope_parameters",
    }
)
# The n-gram embedding table (host memory, see the host-RAM term) and the draft model.
# hc_lowrank shapes the hyper-connection mixer's weights; ple_embed_dim the per-layer embedding table
# (weights): the PLE conv state is hidden_size x hc_count wide (ple_state below).
IRRELEVANT = frozenset(
    {
        *("heads_per_ngram", "make_ngram_vocab_size_divisible_by", "ngram_vocab_size_base", "split_ngram_parts"),
        *("mtp", "hc_lowrank", "ple_embed_dim"),
    }
)
# The layer kinds this layout understands in layer_types / layers_block_type; others are unknown.
LAYER_KINDS = frozenset({"full_attention", "linear_attention"})
SOURCES = {
    "0.29.0-0.31.0": "models/qwen4_exp/nvidia/model.py (get_mamba_specs_from_config), common/qsa_cache.py "
    "(QSAKeyStateCache ring, QSACompressedKeyCache), nvidia/ple_layer.py (tp_replicated short conv), "
    "nvidia/qsa.py (the main KV cache dtypes)",
    "0.32.0-0.33.0": "models/qwen4_exp/nvidia/model.py (get_mamba_specs_from_config), common/qsa_cache.py "
    "(QSAKeyStateCache ring, QSACompressedKeyCache), nvidia/ple_layer.py (tp_replicated short conv), "
    "model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py (0.33 prefill checkpoints)",
}
MIN_RELEASE = "0.29.0"  # registry.py 0.29.0:114,580
QSA_KERNEL_BLOCK = 16  # the QSA attention and state backends' smallest kernel block


def matches(arch: str, config: ModelConfig) -> bool:
    return arch in ARCHITECTURES


def _positive(ctx: FamilyContext, key: str) -> int:
    value = int(ctx.t[key])
    if value <= 0:
        raise BadInput(f"config.json: {key} is {value}; it must be a positive integer")
    return value


def ple_state(ctx: FamilyContext) -> tuple[tuple[int, int], ...]:
    """nvidia/model.py get_ple_mamba_state_shape_from_config: a dilated short conv over
    hidden_size x hc_count channels, computed with tp_world_size=1."""
    kernel = _positive(ctx, "ple_conv_kernel_size")
    dilation = _positive(ctx, "ngram_size")
    return (((kernel - 1) * dilation, ctx.config.hidden_size * _positive(ctx, "hc_count")),)


def uses_mrope(ctx: FamilyContext) -> bool:
    params = ctx.t.get("rope_parameters") or ctx.t.get("rope_scaling") or {}
    return "mrope_section" in params


def checkpoint_alignment(ctx: FamilyContext) -> int | None:
    """0.33 qwen_gdn_linear_attn.py: the delta-net layers export prefill checkpoints where their
    prefill runs on FlashInfer (Hopper; Blackwell with key head dim 128), every 64 tokens."""
    if not ctx.facts.at_least("0.33.0"):
        return None
    major = ctx.capability[0]
    if major == 9 or (major in (10, 12) and int(ctx.t.get("linear_key_head_dim") or 0) == 128):
        return 64
    return None


def check_kv_dtype(ctx: FamilyContext) -> None:
    kv = ctx.settings.kv_cache_dtype
    if kv in ("auto", "bfloat16"):
        return
    if not ctx.facts.at_least("0.31.0"):
        raise Refusal("Qwen4Exp QSA requires a BF16 main KV cache", "kv_cache_dtype", kind="kv_cache_dtype")
    if kv not in ("fp8", "fp8_e4m3"):
        raise Refusal(
            f"Qwen3.8-Flash-Next with --kv-cache-dtype {kv} is not modelled (QSA takes bf16, fp8 and fp8_e4m3)",
            "kv_cache_dtype",
            kind="not_modelled",
        )


def layer_specs(ctx: FamilyContext) -> KVLayout:
    check_kv_dtype(ctx)
    ratio = _positive(ctx, "indexer_compress_ratio")
    index_dim = _positive(ctx, "indexer_head_dim")
    _positive(ctx, "indexer_n_heads")
    kv_total = ctx.config.num_kv_heads
    if kv_total % ctx.tp and ctx.tp % kv_total:
        raise Refusal(f"{kv_total} KV heads and TP {ctx.tp}", "QSA key/value heads")
    gdn = gdn_layer(ctx, ctx.t.get("mamba_ssm_dtype") or "auto")
    assert gdn.state is not None
    gdn_shapes, gdn_dtypes, _ = gdn.state
    ple_shapes = ple_state(ctx)
    gdn_page = sum(math.prod(s) * d for s, d in zip(gdn_shapes, gdn_dtypes, strict=True))
    ple_page = math.prod(ple_shapes[0]) * ctx.model_bytes
    attn = FullAttentionSpec(1, ctx.kv_heads(), ctx.head_dim(), ctx.kv_bytes)
    attn_1tok = attn.page_size_bytes()
    align = QSA_KERNEL_BLOCK
    checkpoint = checkpoint_alignment(ctx)
    if checkpoint:
        align = math.lcm(align, checkpoint)  # the PLE layer's alignment is 1
    block = align * cdiv(max(gdn_page, ple_page), align * attn_1tok)
    padded = block * attn_1tok
    blocks = int(checkpoint is not None)
    gdn_spec = MambaSpec(gdn_shapes, gdn_dtypes, block, "gdn", padded, blocks)
    ple_spec = MambaSpec(ple_shapes, (ctx.model_bytes,), block, "short_conv", padded, blocks, tp_replicated=True)
    qsa = FullAttentionSpec(block, ctx.kv_heads(), ctx.head_dim(), ctx.kv_bytes)
    keys = MLAAttentionSpec(block, 1, index_dim, ctx.model_bytes, tokens_per_state=ratio, role="compressed index keys")
    # qsa_cache.py QSAKeyStateCache: bf16 keys, followed by three int64 MRoPE positions where the
    # model uses MRoPE and the vision path is built.
    ring_head = index_dim
    if uses_mrope(ctx) and not ctx.settings.language_model_only:
        ring_head = cdiv(index_dim, 4) * 4 + 3 * 4
    ring = CircularBufferSpec(ratio, 1, ring_head, ctx.model_bytes, role="raw index-key ring")
    ple_layers = {int(i) - 1 for i in ctx.t.get("ple_layer_ids") or ()}  # 1-based in the config
    specs: list[tuple[str, KVSpec]] = []
    for i, kind in enumerate(layer_types(ctx)):
        if i in ple_layers:
            specs.append((layer_name(i, "ple"), ple_spec))
        if kind == "linear_attention":
            specs.append((layer_name(i, "linear_attn"), gdn_spec))
            continue
        specs += [
            (layer_name(i, "self_attn.indexer.raw_key_cache"), ring),
            (layer_name(i, "self_attn.indexer.compressed_key_cache"), keys),
            (layer_name(i, "self_attn.attn"), qsa),
        ]
    ctx.notes.append(
        f"Qwen3.8-Flash-Next: hybrid block {block} tokens (one QSA page holds the largest state, "
        f"padded to {padded:,} B); the PLE short-conv state is the same on every TP rank"
    )
    return KVLayout(
        specs=tuple(specs),
        block_size=block,
        backend=BackendChoice(Backend("QWEN4_EXP_QSA", multiple_of=QSA_KERNEL_BLOCK), "the QSA layers' own backend"),
        mamba_cache_mode="align",
        is_hybrid=True,
        is_attention_free=False,
        notes=tuple(ctx.notes),
        unknowns=tuple(ctx.unknowns),
        family=NAME,
        block_outermost=True,
        mamba_page_size_padded=padded,
        buffers=(qsa_topk_buffer(ctx, ratio, sum(1 for n, _ in specs if n.endswith("self_attn.attn"))),),
    )


def qsa_topk_buffer(ctx: FamilyContext, ratio: int, layers: int) -> ProfilingBuffer:
    """nvidia/qsa.py: every QSA layer registers its own selection buffer, int32
    [max_num_batched_tokens, indexer_budget + compress ratio - 1] (0.29.0:312-321, indexer_qsa.py
    0.29.0:171-172), packed with a trailing row-count column from 0.30 (indexer_qsa.py 0.30.0:184-195)."""
    width = _positive(ctx, "indexer_budget") + ratio - (0 if ctx.facts.at_least("0.30.0") else 1)
    return ProfilingBuffer(
        f"QSA top-k selections ({layers} layers)", (ctx.settings.max_num_batched_tokens, width), 4, "persistent", layers
    )
