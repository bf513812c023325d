"""Which attention backend vLLM picks on a GPU, and the KV block sizes its kernels accept.

platforms/cuda.py _get_backend_priorities lists backends per compute capability; the first that
passes validation (capability, head size, sinks, KV dtype) wins. Kernel block sizes come from each
backend's get_supported_kernel_block_sizes(). This is a platform fact Apron cannot observe without a
GPU, so the choice is reported with the plan ("backend" in the details).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    name: str
    fixed_sizes: tuple[int, ...] = ()  # block sizes listed as ints
    multiple_of: int | None = None  # MultipleOf(n)

    def min_kernel_block(self) -> int:
        return min([*self.fixed_sizes, *([self.multiple_of] if self.multiple_of else [])])

    def supports(self, block_size: int) -> bool:
        sizes = [*self.fixed_sizes, *([self.multiple_of] if self.multiple_of else [])]
        return not sizes or any(block_size % s == 0 for s in sizes)

    def preferred_block_size(self, default: int = 16) -> int:
        """AttentionBackend.get_preferred_block_size: the default if the kernels accept it."""
        return default if self.supports(default) else self.min_kernel_block()

    def sliding_block_size(self, block_size: int, *, is_v029: bool) -> int:
        """Attention.get_kv_cache_spec -> _largest_kernel_block_within: 0.29 takes the smallest
        kernel block; 0.30+ the largest candidate not above the primary block."""
        multiples = [self.multiple_of] if self.multiple_of else []
        if is_v029:
            candidates = list(self.fixed_sizes) or multiples
            return min(candidates) if candidates else block_size
        candidates = list(self.fixed_sizes) + [max(m, block_size // m * m) for m in multiples]
        fitting = [b for b in candidates if b <= block_size]
        return max(fitting) if fitting else (min(candidates) if candidates else block_size)


FLASH_ATTN = Backend("FLASH_ATTN", multiple_of=16)
FLASHINFER = Backend("FLASHINFER", fixed_sizes=(16, 32, 64))
TRITON_ATTN = Backend("TRITON_ATTN", multiple_of=16)
FLASH_ATTN_MLA = Backend("FLASH_ATTN_MLA", multiple_of=16)
TRITON_MLA = Backend("TRITON_MLA", multiple_of=16)
FLASHMLA = Backend("FLASHMLA", fixed_sizes=(64,))
FLASHINFER_MLA = Backend("FLASHINFER_MLA", fixed_sizes=(32, 64))
CUTLASS_MLA = Backend("CUTLASS_MLA", fixed_sizes=(128,))


@dataclass(frozen=True)
class BackendChoice:
    backend: Backend
    reason: str


def choose_backend(
    capability: tuple[int, int], *, is_mla: bool, has_sinks: bool, mixed_head_sizes: bool, kv_cache_dtype: str
) -> BackendChoice:
    if is_mla:
        return _choose_mla(capability)
    if mixed_head_sizes:
        # models/config.py Gemma4Config: heterogeneous head dims force FA4 where it exists, else Triton.
        return BackendChoice(TRITON_ATTN, "mixed head sizes: the model's config hook forces TRITON_ATTN")
    if capability[0] == 10:
        return BackendChoice(FLASHINFER, "FlashInfer leads the priority list on compute capability 10.x")
    fa_ok = capability >= (8, 0) and not (kv_cache_dtype == "fp8_e5m2")
    if has_sinks and capability[0] != 9:
        # flash_attn_supports_sinks() needs FA3/FA4, i.e. Hopper; FlashInfer sinks need TRT-LLM kernels.
        return BackendChoice(TRITON_ATTN, "attention sinks need FlashAttention 3 (Hopper); TRITON_ATTN supports them")
    if fa_ok:
        return BackendChoice(FLASH_ATTN, "FlashAttention leads the priority list below compute capability 10")
    if capability >= (8, 0):
        return BackendChoice(FLASHINFER, "FlashAttention rejects this KV cache dtype; FlashInfer is next")
    return BackendChoice(TRITON_ATTN, "below compute capability 8.0 only TRITON_ATTN qualifies")


def _choose_mla(capability: tuple[int, int]) -> BackendChoice:
    if capability[0] == 10:
        return BackendChoice(FLASHINFER_MLA, "FLASHINFER_MLA leads the MLA list on compute capability 10.x")
    if capability[0] == 9:
        return BackendChoice(FLASH_ATTN_MLA, "FLASH_ATTN_MLA leads the MLA list on compute capability 9.x")
    return BackendChoice(TRITON_MLA, "FLASH_ATTN_MLA and FLASHMLA need Hopper; TRITON_MLA runs elsewhere")


def lcm_of_min_blocks(backends: list[Backend]) -> int:
    return math.lcm(*[b.min_kernel_block() for b in backends]) if backends else 1
