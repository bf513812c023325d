"""KV cache layouts: one frozen dataclass per layout, as in vLLM's v1/kv_cache_interface.py.

Each answers `page_size_bytes()` (one block of one layer) and `max_memory_usage_bytes(ctx)` (what one
request at max_model_len may hold in that layer), the two numbers vLLM's planner reads.
"""

from __future__ import annotations

import math

from apron.frozen import cached_property, frozen, replace

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Protocol
else:
    from apron.lite_typing import Protocol


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@frozen
class SchedulingContext:
    """The few engine settings the specs read (VllmConfig fields)."""

    max_model_len: int
    max_num_batched_tokens: int
    mamba_cache_mode: str = "none"  # none | align | all (all: vLLM <= 0.31 only)
    # VllmConfig.max_concurrent_batches: pp + 1 with async scheduling on the V2 runner (the CUDA
    # default, async on by default) - 2 for one pipeline stage.
    max_concurrent_batches: int = 2
    extra_retained_tokens: int = 0

    @property
    def max_in_flight_tokens(self) -> int:
        return self.max_concurrent_batches * self.max_num_batched_tokens


def round_up(n: int, multiple: int) -> int:
    return cdiv(n, multiple) * multiple


@frozen
class FullAttentionSpec:
    """Plain attention (MHA/GQA/MQA): K and V for each KV head on this rank.

    The page follows vLLM's AttentionSpec (kv_cache_interface.py, 0.30-0.33): heads x states x state
    bytes, where a state covers `tokens_per_state` tokens (compressed caches) and holds
    `state_bytes` (fixed records) or (head_size + head_size_v) x dtype bytes, rounded up to
    `alignment`; `page_size_padded` replaces it where a hybrid pads pages to one size."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype_bytes: int
    head_size_v: int | None = None
    page_size_padded: int | None = None
    tokens_per_state: int = 1
    state_bytes: int | None = None
    alignment: int | None = None
    # KVCacheSpec.get_block_stride_alignment() (0.31+), resolved to bytes: packed blocks round up to it.
    stride_alignment: int = 1
    role: str = ""  # what the cache holds, for describe() (e.g. "indexer keys")

    @property
    def kind(self) -> str:
        return "full"

    def state_content_bytes(self) -> int:
        value_size = self.head_size if self.head_size_v is None else self.head_size_v
        return self.state_bytes or (self.head_size + value_size) * self.dtype_bytes

    def token_bytes(self) -> int:
        return self.num_kv_heads * self.state_content_bytes() // self.tokens_per_state

    def unpadded_page_size_bytes(self) -> int:
        page = self.num_kv_heads * (self.block_size // self.tokens_per_state) * self.state_content_bytes()
        return round_up(page, self.alignment) if self.alignment else page

    def page_size_bytes(self) -> int:
        return self._page

    @cached_property
    def _page(self) -> int:  # a plan asks for every page many times (groups, blocks, details)
        return self.page_size_padded or self.unpadded_page_size_bytes()

    def is_per_token(self) -> bool:
        """Whether page / block is an exact per-token cost (no compression, padding or alignment)."""
        return self.tokens_per_state == 1 and not self.alignment and self.page_size_padded is None

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int:
        return cdiv(ctx.max_model_len, self.block_size) * self.page_size_bytes()

    def uniform_type_key(self) -> tuple[object, ...]:
        """Layers whose keys are equal can share one UniformTypeKVCacheSpecs group."""
        return ("full", self.block_size)

    def describe(self) -> str:
        value = self.head_size if self.head_size_v is None else self.head_size_v
        if value == self.head_size:
            return f"{self.num_kv_heads} KV heads x {self.head_size} x 2 (K and V) x {self.dtype_bytes} B"
        return f"{self.num_kv_heads} KV heads x ({self.head_size} K + {value} V) x {self.dtype_bytes} B"

    def with_block_size(self, block_size: int) -> KVSpec:
        return replace(self, block_size=block_size)


def _per_state(spec: FullAttentionSpec) -> str:
    every = f" per {spec.tokens_per_state} tokens" if spec.tokens_per_state > 1 else " per token"
    return every + (f", pages aligned to {spec.alignment} B" if spec.alignment else "")


@frozen
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention and the caches built like it (compressed MLA, sparse-attention
    indexer keys): one record per state, the same on every TP rank. fp8_ds_mla / nvfp4_ds_mla
    store fixed-size records (`state_bytes`)."""

    head_size_v: int | None = 0

    @property
    def kind(self) -> str:
        return "mla"

    def describe(self) -> str:
        what = f"{self.role}: " if self.role else ""
        if self.state_bytes:
            return f"{what}one {self.state_bytes}-byte record" + _per_state(self)
        return f"{what}one {self.head_size} x {self.dtype_bytes} B record" + _per_state(self)


@frozen
class SlidingWindowSpec(FullAttentionSpec):
    """Sliding-window attention: the window plus the tokens in flight, plus one block."""

    sliding_window: int = 0

    @property
    def kind(self) -> str:
        return "sliding"

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int:
        tokens = min(self.sliding_window - 1 + ctx.extra_retained_tokens + ctx.max_in_flight_tokens, ctx.max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes()

    def uniform_type_key(self) -> tuple[object, ...]:
        return ("sliding", self.sliding_window, self.block_size)

    def describe(self) -> str:
        return f"window {self.sliding_window}: " + super().describe()


@frozen
class SlidingWindowMLASpec(SlidingWindowSpec):
    """A sliding window of MLA-format records (DeepSeek-V4's SWA cache and compressor states)."""

    head_size_v: int | None = 0
    bounded_replay: bool = False

    @property
    def kind(self) -> str:
        return "sliding_mla"

    def uniform_type_key(self) -> tuple[object, ...]:
        return ("sliding_mla", self.sliding_window, self.bounded_replay, self.block_size)

    def describe(self) -> str:
        what = f"{self.role}: " if self.role else ""
        record = f"{self.state_bytes}-byte" if self.state_bytes else f"{self.head_size} x {self.dtype_bytes} B"
        return f"{what}window {self.sliding_window} of {record} records in {self.block_size}-token blocks"


@frozen
class CircularBufferSpec(FullAttentionSpec):
    """A ring of `block_size` entries: one block per request for its whole life."""

    head_size_v: int | None = 0

    @property
    def kind(self) -> str:
        return "ring"

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int:
        return self.page_size_bytes()

    def uniform_type_key(self) -> tuple[object, ...]:
        return ("ring", self.block_size)

    def describe(self) -> str:
        what = f"{self.role}: " if self.role else ""
        return (
            f"{what}a {self.block_size}-entry ring of {self.num_kv_heads} x {self.state_content_bytes()} B per request"
        )


@frozen
class ChunkedLocalAttentionSpec(FullAttentionSpec):
    """Chunked local attention (Llama-4 style): one chunk plus the tokens in flight."""

    attention_chunk_size: int = 0

    @property
    def kind(self) -> str:
        return "chunked"

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int:
        tokens = min(self.attention_chunk_size + ctx.max_in_flight_tokens, ctx.max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes()

    def uniform_type_key(self) -> tuple[object, ...]:
        return ("chunked", self.attention_chunk_size, self.block_size)

    def describe(self) -> str:
        return f"chunk {self.attention_chunk_size}: " + super().describe()


@frozen
class MambaSpec:
    """A fixed state per request (Mamba-1/2, gated delta-net, short conv, linear attention): one page
    per request, two in prefix-caching "align" mode, plus a prefill checkpoint block where the
    layer asks for one."""

    shapes: tuple[tuple[int, ...], ...]
    dtype_bytes: tuple[int, ...]
    block_size: int
    state_kind: str  # mamba1 | mamba2 | gdn | short_conv | linear_attention
    page_size_padded: int | None = None
    num_prefill_checkpoint_blocks: int = 0
    num_speculative_blocks: int = 0
    tp_replicated: bool = False  # the whole state on every TP rank (Qwen3.8-Flash-Next's PLE conv)
    stride_alignment: int = 1

    @property
    def kind(self) -> str:
        return "mamba"

    def real_page_size_bytes(self) -> int:
        return sum(math.prod(shape) * size for shape, size in zip(self.shapes, self.dtype_bytes, strict=True))

    def page_size_bytes(self) -> int:
        return self.page_size_padded or self.real_page_size_bytes()

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int:
        page = self.page_size_bytes()
        if ctx.mamba_cache_mode == "all":
            return (cdiv(ctx.max_model_len, self.block_size) + self.num_speculative_blocks) * page
        if ctx.mamba_cache_mode == "align":
            return page * (2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks)
        return page * (1 + self.num_speculative_blocks)

    def token_bytes(self) -> int | None:
        return None  # a fixed state per request, whatever its length

    def is_per_token(self) -> bool:
        return False

    def uniform_type_key(self) -> tuple[object, ...]:
        return (
            "mamba",
            self.page_size_bytes(),
            self.num_prefill_checkpoint_blocks,
            self.num_speculative_blocks,
            self.tp_replicated,
            self.block_size,
        )

    def describe(self) -> str:
        shapes = " + ".join("x".join(map(str, shape)) for shape in self.shapes)
        return f"{self.state_kind} state {shapes} ({self.real_page_size_bytes()} B) per request"

    def with_block_size(self, block_size: int) -> KVSpec:
        return replace(self, block_size=block_size)


class KVSpec(Protocol):
    """What the planner asks of every layer's cache (vLLM's KVCacheSpec)."""

    @property
    def block_size(self) -> int: ...

    @property
    def stride_alignment(self) -> int: ...

    @property
    def kind(self) -> str: ...

    def is_per_token(self) -> bool: ...

    def token_bytes(self) -> int | None: ...

    def page_size_bytes(self) -> int: ...

    def max_memory_usage_bytes(self, ctx: SchedulingContext) -> int: ...

    def uniform_type_key(self) -> tuple[object, ...]: ...

    def describe(self) -> str: ...

    def with_block_size(self, block_size: int) -> KVSpec: ...


def blocks_per_request(spec: KVSpec, ctx: SchedulingContext) -> int:
    return cdiv(spec.max_memory_usage_bytes(ctx), spec.page_size_bytes())
