"""What every KV family module shares: the context it reads, the abstract layers the classic families
describe, and the standard path from those layers to per-layer specs (backend, block size, hybrid
alignment), as vLLM's Attention / MambaBase layers and Platform.update_block_size_for_backend build them.

A family module (one per layout family, listed in `apron.plan.kv.families` CLAIMS) defines
    NAME       the family's name (shown in plans and the conformance table), the module's name,
    READS      the config keys (of the language model's config) it reads,
    SOURCES    {release: the vLLM file(s) it follows},
    ARCHITECTURES or MODEL_TYPES  what it claims (CLAIMS repeats them: a plan imports the candidates only),
    matches(arch, config) -> bool  true only for what it claims,
    layer_specs(ctx) -> KVLayout   every cache the model's layers keep, with block size and backend,
and may set
    IRRELEVANT   keys of its configs that cannot change its cache (apron.plan.kv.unknowns: any key
                 neither read, declared irrelevant nor on the reviewed list makes the KV side unknown),
    LAYER_KINDS  the kinds it understands in a layer list (default: full and sliding attention),
    FALLBACK = True (only the plain decoder does): it answers when no other family matches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from apron.engine.facts import EngineFacts
from apron.frozen import cached_property, frozen
from apron.plan.kv.backends import BackendChoice, choose_backend, cpu_backend
from apron.plan.kv.planning import Grouping, bytes_per_token, describe_layers, group_specs, layer_kinds
from apron.plan.kv.specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    cdiv,
)
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import ProblemKind
from apron.plan.settings import EngineSettings

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Literal

DEFAULT_LAYER_KINDS = frozenset({"full_attention", "sliding_attention"})
KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


@frozen
class Layer:
    """One decoder layer as the classic families see it."""

    kind: str  # full | sliding | chunked | mla | mamba
    num_kv_heads: int = 0
    head_size: int = 0
    window: int | None = None
    # (shapes, dtype_bytes, state_kind) for mamba layers
    state: tuple[tuple[tuple[int, ...], ...], tuple[int, ...], str] | None = None


@frozen
class ProfilingBuffer:
    """A tensor the family's layers add to the start-up profile. `when`: "persistent" (allocated
    at model construction, inside load_model: vLLM's "Model loading took" figure holds it, so the
    plan counts it with the weights, not the profiling peak), "forward" (during the dummy forward only), or
    "workspace" (a request to vLLM's workspace manager, which keeps one buffer sized to the largest
    request: v1/worker/workspace.py)."""

    name: str
    shape: tuple[int, ...]
    dtype_bytes: int
    when: str
    count: int = 1  # identical buffers, one per layer (each its own allocation)

    @property
    def each_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype_bytes

    @property
    def num_bytes(self) -> int:
        return self.each_bytes * self.count


def sparse_indexer_buffers(ctx: FamilyContext, topk: int, min_ratio: int = 1) -> tuple[ProfilingBuffer, ...]:
    """The DSA-style lightning indexer (model_executor/layers/sparse_attn_indexer.py): the shared
    top-k index buffer the model allocates, the K-gather workspace its profiling branch reserves
    (fp8 keys + fp32 scales for get_max_prefill_buffer_size // compress ratio rows, plus the 1 MiB
    radix top-k workspace) and the VLLM_SPARSE_INDEXER_MAX_LOGITS_MB (512) logits probe."""
    tokens, length = ctx.settings.max_num_batched_tokens, ctx.settings.max_model_len
    if ctx.facts.at_least("0.32.0"):
        factor = 5 if length <= 256 * 1024 else 2  # config/vllm.py sparse_mla_prefill_workspace_factor
        rows = length * (576 * 2 // 132) * factor // min_ratio
    else:
        rows = length * 40 // min_ratio  # v1/attention/backends/mla/indexer.py (0.30, 0.31)
    probe = int(ctx.facts.env_default("VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", 512) or 512)
    return (
        ProfilingBuffer("sparse indexer top-k indices", (tokens, topk), 4, "persistent"),
        ProfilingBuffer(
            "indexer K-gather workspace (fp8 keys, scales, radix top-k)", (rows * 132 + 2**20,), 1, "workspace"
        ),
        ProfilingBuffer("indexer logits probe (VLLM_SPARSE_INDEXER_MAX_LOGITS_MB)", (probe * 2**20,), 1, "forward"),
    )


def sparse_mla_index_groups(ctx: FamilyContext, rows: int, width: int, num_groups: int) -> tuple[ProfilingBuffer, ...]:
    """The sparse MLA index groups a SparseMLAIndexGroupBuilder makes at construction, inside
    load_model (v1/attention/backends/mla/index_group.py register_layer, 0.30.0:450-495,
    0.31.0:350-390, 0.32.0:356-396, 0.33.0:363-403): each group's physical top-k indices
    [rows + 1, width] int32 and valid counts [rows + 1] int32, and in 0.30 request ids arange(rows)
    int32. 0.29 has no index groups."""
    if not ctx.facts.at_least("0.30.0") or num_groups <= 0:
        return ()
    buffers: tuple[ProfilingBuffer, ...] = (
        ProfilingBuffer(
            "sparse MLA index group: physical top-k indices", (rows + 1, width), 4, "persistent", num_groups
        ),
        ProfilingBuffer("sparse MLA index group: valid top-k counts", (rows + 1,), 4, "persistent", num_groups),
    )
    if not ctx.facts.at_least("0.31.0"):
        buffers += (ProfilingBuffer("sparse MLA index group: request ids", (rows,), 4, "persistent", num_groups),)
    return buffers


@frozen
class KVLayout:
    specs: tuple[tuple[str, KVSpec], ...]
    block_size: int
    backend: BackendChoice
    mamba_cache_mode: str
    is_hybrid: bool
    is_attention_free: bool
    logs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    unknowns: tuple[str, ...] = ()
    family: str = "unknown"
    # The resolved KV cache layout puts the block dimension outermost (backends that declare
    # BLHNC/BLNHC): mixed page sizes then pack side by side instead of being unified.
    block_outermost: bool = False
    # Buffers the family's layers add to the start-up profile (see ProfilingBuffer).
    buffers: tuple[ProfilingBuffer, ...] = ()
    mamba_page_size_padded: int | None = None
    refusals: tuple[tuple[ProblemKind, str], ...] = ()  # (kind, the engine's message)
    # The grouping path vLLM takes: "generic" (get_kv_cache_groups' standard paths) or a dedicated
    # one ("glm5_next": v1/core/kv_cache_utils.py _get_kv_cache_groups_glm5_next, 0.30 and 0.31).
    grouping: str = "generic"

    # Cached views: a layout is kept per checkpoint and settings (plan/memory.py _layout) and fit
    # plans it at many budgets; each follows from the specs alone.
    @cached_property
    def has_state(self) -> bool:
        return any(spec.kind == "mamba" for _, spec in self.specs)

    @cached_property
    def kv_grouping(self) -> Grouping:
        """The groups and their shared block (planning.group_specs); NotModelled where vLLM's path is not."""
        return group_specs(dict(self.specs), block_outermost=self.block_outermost, grouping=self.grouping)

    @cached_property
    def kv_bytes_per_token(self) -> int | None:
        return bytes_per_token(dict(self.specs))

    @cached_property
    def layers_description(self) -> str:
        return describe_layers(dict(self.specs))

    @cached_property
    def layer_kinds(self) -> tuple[tuple[str, int], ...]:
        return tuple(layer_kinds(dict(self.specs)).items())


class FamilyContext:
    """What a family reads: the config, the resolved settings, the release's facts and the GPU."""

    def __init__(
        self,
        arch: str,
        config: ModelConfig,
        settings: EngineSettings,
        facts: EngineFacts,
        *,
        capability: tuple[int, int] = (9, 0),
        is_attention_free: bool = False,
        cpu_flags: frozenset[str] | None = None,
    ):
        # config.text holds no nulls (ModelConfig.from_config): t["key"] of a key set to null raises
        # KeyError, and the layout is unknown, naming it.
        self.arch, self.config, self.t, self.settings, self.facts = arch, config, config.text, settings, facts
        self.capability, self.is_attention_free = capability, is_attention_free
        self.cpu_flags = cpu_flags  # None on a GPU; the CPU's platform flags on vLLM's CPU platform
        self.tp = settings.tensor_parallel_size
        self.model_bytes = KV_DTYPE_BYTES[settings.dtype]
        kv_dtype = settings.dtype if settings.kv_cache_dtype == "auto" else settings.kv_cache_dtype
        self.kv_bytes = KV_DTYPE_BYTES[kv_dtype]  # fp8 variants are stored as uint8 (1 byte)
        self.notes: list[str] = []
        self.unknowns: list[str] = []

    def kv_heads(self, total: int | None = None) -> int:
        return max(1, (total if total is not None else self.config.num_kv_heads) // self.tp)

    def head_dim(self) -> int:
        return self.config.head_dim

    def state_dtypes(self, ssm_dtype: str = "auto") -> tuple[int, int]:
        """MambaStateDtypeCalculator: conv state in the model dtype (mamba_cache_dtype auto), ssm
        state in mamba_ssm_cache_dtype (auto = the conv dtype)."""
        conv = self.model_bytes
        if self.is_cpu and "avx512_bf16" in (self.cpu_flags or ()):
            # platforms/cpu.py check_and_update_config: "Reset SSM cache type to float32" for every
            # state backend but the accelerated gated delta-net, on CPUs with AVX-512 BF16
            return conv, 4
        return conv, conv if ssm_dtype in ("auto", None) else KV_DTYPE_BYTES[dtype_name(ssm_dtype)]

    @property
    def is_cpu(self) -> bool:
        return self.cpu_flags is not None


def layer_name(index: int, suffix: str = "") -> str:
    """vLLM's layer name without the model prefix ('model.' / 'language_model.model.')."""
    return f"layers.{index}" + (f".{suffix}" if suffix else "")


def dtype_name(text: str) -> str:
    text = str(text).removeprefix("torch.")
    return {"float": "float32", "half": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(text, text)


def divide(a: int, b: int, what: str) -> int:
    if a % b:
        raise Refusal(f"{a} is not divisible by {b}", what)
    return a // b


class Refusal(Exception):
    """What the engine refuses at model construction (a proven constraint): a shape its divide()
    rejects (kind "tp"), a KV cache dtype or a GPU the layout's kernels do not take."""

    def __init__(self, message: str, what: str, kind: ProblemKind | Literal["tp", "not_modelled"] = "tp"):
        super().__init__(message)
        self.what, self.kind = what, kind


def attention_layout(ctx: FamilyContext, layers: Sequence[Layer | None], family: str) -> KVLayout:
    """The classic path: pick the backend, its block size, align hybrids, and build one spec a layer
    (None: a layer with no cache of its own, e.g. Nemotron-H's MLP layers; names keep its index)."""
    attention = [x for x in layers if x is not None and x.kind != "mamba"]
    if any(x.head_size <= 0 or (x.kind != "mla" and x.num_kv_heads <= 0) for x in attention):
        raise KeyError("num_attention_heads or head_dim")  # no attention shape: the config does not give one
    states = [x for x in layers if x is not None and x.kind == "mamba"]
    is_hybrid = bool(attention) and bool(states)
    is_mla = any(x.kind == "mla" for x in attention)
    if ctx.cpu_flags is not None:
        if is_hybrid:
            raise Refusal("hybrid block alignment on vLLM's CPU platform is not modelled", "", "not_modelled")
        choice, block = cpu_backend(ctx.facts, is_mla=is_mla, cpu_flags=ctx.cpu_flags)
    else:
        choice = choose_backend(
            ctx.facts,
            ctx.capability,
            is_mla=is_mla,
            has_sinks=family == "gpt_oss",
            mixed_head_sizes=len({x.head_size for x in attention}) > 1,
            kv_cache_dtype=ctx.settings.kv_cache_dtype,
            is_gqa=ctx.config.num_heads // max(ctx.config.num_kv_heads, 1) > 1,
        )
        block = choice.backend.preferred_block_size(16)
    mode = "none" if (not attention or ctx.is_attention_free) else ("align" if states else "none")
    logs: list[str] = []
    if block != 16 and ctx.cpu_flags is None:
        logs.append(f"Setting kv cache block size to {block} for {choice.backend.name} backend.")
    checkpoint_blocks = _checkpoint_blocks(states, mode, ctx)
    mamba_padded, mamba_block = None, (ctx.settings.max_model_len if mode == "none" else block)
    if is_hybrid:
        block, mamba_padded, logs2 = align_hybrid_block(ctx, attention, states, block, choice, mode, checkpoint_blocks)
        logs += logs2
        mamba_block = block
    specs = _specs(layers, ctx, block, choice, mamba_padded, mamba_block, checkpoint_blocks)
    return KVLayout(
        specs=tuple(specs),
        block_size=block,
        backend=choice,
        mamba_cache_mode=mode,
        is_hybrid=is_hybrid,
        is_attention_free=not attention and bool(states),
        logs=tuple(logs),
        notes=tuple(dict.fromkeys(ctx.notes)),
        unknowns=tuple(ctx.unknowns),
        family=family,
    )


def _checkpoint_blocks(states: list[Layer], mode: str, ctx: FamilyContext) -> int:
    """A third state page per request in align mode: MambaMixer2 from 0.32; Qwen's gated delta-net in
    0.33 when its prefill runs on FlashInfer (Hopper; Blackwell with key head dim 128)."""
    if mode != "align" or not states:
        return 0
    kinds = {x.state[2] for x in states if x.state}
    if "mamba2" in kinds and ctx.facts.at_least("0.32.0"):
        return 1
    if "gdn" in kinds and ctx.facts.at_least("0.33.0") and _gdn_flashinfer(ctx.capability, ctx.config):
        return 1
    return 0


def _gdn_flashinfer(capability: tuple[int, int], config: ModelConfig) -> bool:
    if capability[0] == 9:
        return True
    return capability[0] in (10, 12) and int(config.text.get("linear_key_head_dim") or 0) == 128


def align_hybrid_block(
    ctx: FamilyContext,
    attention: list[Layer],
    states: list[Layer],
    block: int,
    choice: BackendChoice,
    mode: str,
    checkpoint_blocks: int,
) -> tuple[int, int | None, list[str]]:
    """platforms/interface.py _align_hybrid_block_size: the attention block grows until one
    attention page holds a whole state page; the state page is then padded to match."""
    first = attention[0]
    if first.kind == "mla":
        attn_1tok = first.head_size * ctx.kv_bytes
    else:
        attn_1tok = 2 * ctx.kv_heads() * ctx.head_dim() * ctx.kv_bytes
    assert states[0].state is not None
    shapes, sizes, kind = states[0].state
    mamba_page = sum(math.prod(s) * d for s, d in zip(shapes, sizes, strict=True))
    align = max(choice.backend.min_kernel_block(), block)
    if first.kind == "mla":
        align = max(align, 128)
    if ctx.facts.at_least("0.33.0") and mode == "align" and kind == "gdn" and checkpoint_blocks:
        align = math.lcm(align, 64)  # FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    attn_block = align * cdiv(mamba_page, align * attn_1tok)
    if ctx.facts.at_least("0.32.0"):
        base = choice.backend.min_kernel_block()
        attn_block = base * cdiv(attn_block, base)
    logs = []
    if block < attn_block:
        block = attn_block
        logs.append(
            f"Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page size."
        )
    attn_page = block * attn_1tok
    padded = None
    if attn_page != mamba_page:
        padded = attn_page
        logs.append(
            f"Padding mamba page size by {100 * (attn_page - mamba_page) / mamba_page:.2f}% to "
            "ensure that mamba page size and attention page size are exactly equal."
        )
    return block, padded, logs


def _specs(
    layers: Sequence[Layer | None],
    ctx: FamilyContext,
    block: int,
    choice: BackendChoice,
    mamba_padded: int | None,
    mamba_block: int,
    checkpoint_blocks: int,
) -> list[tuple[str, KVSpec]]:
    dsz = ctx.kv_bytes
    record = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(ctx.settings.kv_cache_dtype)
    out: list[tuple[str, KVSpec]] = []
    # Equal layers share one spec object: its page and the like are worked out once, not per layer.
    made: dict[Layer, KVSpec] = {}
    for i, layer in enumerate(layers):
        if layer is None:
            continue
        name = f"layers.{i}"
        if layer in made:
            out.append((name, made[layer]))
            continue
        spec: KVSpec
        if layer.kind == "mamba":
            assert layer.state is not None
            shapes, sizes, kind = layer.state
            spec = MambaSpec(shapes, sizes, mamba_block, kind, mamba_padded, checkpoint_blocks)
        elif layer.kind == "mla":
            spec = MLAAttentionSpec(block, 1, layer.head_size, dsz, head_size_v=0, state_bytes=record)
        elif layer.kind == "sliding":
            sliding_block = choice.backend.sliding_block_size(block, is_v029=not ctx.facts.at_least("0.30.0"))
            spec = SlidingWindowSpec(
                sliding_block, layer.num_kv_heads, layer.head_size, dsz, sliding_window=int(layer.window or 0)
            )
        elif layer.kind == "chunked":
            spec = ChunkedLocalAttentionSpec(
                block, layer.num_kv_heads, layer.head_size, dsz, attention_chunk_size=int(layer.window or 0)
            )
        else:
            spec = FullAttentionSpec(block, layer.num_kv_heads, layer.head_size, dsz)
        made[layer] = spec
        out.append((name, spec))
    return out
