"""Which attention backend vLLM picks on a GPU, and the KV block sizes its kernels accept.

Both come from the release's engine facts: `backend_priority` is platforms/cuda.py
_get_backend_priorities (the order backends are tried per compute capability) and
`attention_backends[NAME]` gives each backend's kernel block sizes and KV cache dtypes. The first
backend that passes validation wins; what validation checks beyond the dtype list (compute
capability, attention sinks) is each backend's supports_compute_capability / supports_sink, which
the facts do not carry, so it is the small table `_CAPABILITY` below. The choice is a platform fact
Apron cannot observe without a GPU, so it is reported with the plan ("backend" in the details).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from apron.engine.facts import EngineFacts
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any


@frozen
class Backend:
    name: str
    fixed_sizes: tuple[int, ...] = ()  # block sizes listed as ints
    multiple_of: int | None = None  # MultipleOf(n)
    kv_cache_dtypes: tuple[str, ...] | None = None  # None: the backend does not restrict them

    @classmethod
    def from_facts(cls, name: str, entry: dict[str, Any], sizes: list[Any] | None = None) -> Backend:
        listed = entry.get("kernel_block_sizes") if sizes is None else sizes
        fixed = tuple(s for s in listed or [] if isinstance(s, int))
        multiples = [s["multiple_of"] for s in listed or [] if isinstance(s, dict)]
        dtypes = entry.get("supported_kv_cache_dtypes")
        return cls(name, fixed, multiples[0] if multiples else None, tuple(dtypes) if dtypes is not None else None)

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


@frozen
class BackendChoice:
    backend: Backend
    reason: str


class NoBackend(Exception):
    """The release's facts do not say which backend this GPU gets (a facts file without
    backend_priority, or no listed backend validates): the KV layout is unknown."""


# supports_compute_capability / supports_sink of each backend (v1/attention/backends/*.py, 0.29-0.33):
# (capability check, sinks check). Backends not listed accept every capability and no sinks.
_CAPABILITY: dict[str, tuple[Callable[[tuple[int, int]], bool], Callable[[tuple[int, int]], bool]]] = {
    # flash_attn.py: cc >= 8.0; sinks need FlashAttention 3 (flash_attn_supports_sinks: Hopper).
    "FLASH_ATTN": (lambda cc: cc >= (8, 0), lambda cc: cc[0] == 9),
    # flashinfer.py: 8.0 <= cc <= 12.1; sinks need the TRT-LLM kernels (9.0, 10.x, 12.x).
    "FLASHINFER": (lambda cc: (8, 0) <= cc <= (12, 1), lambda cc: cc == (9, 0) or cc[0] in (10, 12)),
    "TRITON_ATTN": (lambda cc: True, lambda cc: True),
    "FLASH_ATTN_MLA": (lambda cc: cc[0] == 9, lambda cc: False),
    "FLASHMLA": (lambda cc: cc[0] in (9, 10), lambda cc: False),
    "FLASHINFER_MLA": (lambda cc: cc[0] == 10, lambda cc: False),
    "TOKENSPEED_MLA": (lambda cc: cc[0] == 10, lambda cc: False),
    "CUTLASS_MLA": (lambda cc: cc[0] == 10, lambda cc: False),
    "TRITON_MLA": (lambda cc: True, lambda cc: False),
}


def backend_from_facts(facts: EngineFacts, name: str, sizes: list[Any] | None = None) -> Backend:
    entry = facts.attention_backend(name)
    if entry is None:
        raise NoBackend(f"vLLM {facts.version}'s facts list no attention backend {name}")
    return Backend.from_facts(name, entry, sizes)


def _kernel_sizes(facts: EngineFacts, name: str, capability: tuple[int, int], is_gqa: bool) -> list[Any] | None:
    """flashinfer.py get_supported_kernel_block_sizes: pages of 128 and more only where the TRT-LLM
    kernel serves them (GQA on compute capability 10.x); [16, 32, 64] otherwise."""
    entry = facts.attention_backend(name) or {}
    variants = entry.get("kernel_block_sizes_variants") or []
    if name == "FLASHINFER" and len(variants) > 1 and not (capability[0] == 10 and is_gqa):
        return list(variants[0])
    return None


def choose_backend(
    facts: EngineFacts,
    capability: tuple[int, int],
    *,
    is_mla: bool,
    has_sinks: bool,
    mixed_head_sizes: bool,
    kv_cache_dtype: str,
    is_gqa: bool = False,
) -> BackendChoice:
    if mixed_head_sizes and not is_mla:
        # models/config.py Gemma4Config: heterogeneous head dims force FA4 where it exists, else Triton.
        backend = backend_from_facts(facts, "TRITON_ATTN")
        return BackendChoice(backend, "mixed head sizes: the model's config hook forces TRITON_ATTN")
    order = facts.backend_priority(capability, use_mla=is_mla)
    if not order:
        raise NoBackend(f"vLLM {facts.version}'s facts carry no attention backend priority")
    skipped: list[str] = []
    for name in order:
        why_not = _rejects(facts, name, capability, has_sinks, kv_cache_dtype)
        if why_not is None:
            backend = backend_from_facts(facts, name, _kernel_sizes(facts, name, capability, is_gqa))
            tried = f" (skipped {'; '.join(skipped)})" if skipped else ""
            major = f"{capability[0]}.x"
            return BackendChoice(
                backend, f"first valid {'MLA ' if is_mla else ''}backend for compute capability {major}{tried}"
            )
        skipped.append(f"{name}: {why_not}")
    raise NoBackend(f"no attention backend in vLLM {facts.version}'s priority list validates: {'; '.join(skipped)}")


def _rejects(facts: EngineFacts, name: str, capability: tuple[int, int], has_sinks: bool, kv_dtype: str) -> str | None:
    checks = _CAPABILITY.get(name)
    if checks is None:
        return "not modelled"
    capable, sinks = checks
    if not capable(capability):
        return "compute capability"
    if has_sinks and not sinks(capability):
        return "no attention sinks"
    if name == "FLASH_ATTN" and kv_dtype.startswith("fp8") and capability[0] not in (9, 10):
        # fa_utils.py flash_attn_supports_kv_cache_dtype: fp8 KV needs FlashAttention 3 (SM90) or 4 (SM100).
        return f"kv cache dtype {kv_dtype} needs FlashAttention 3 or 4"
    dtypes = (facts.attention_backend(name) or {}).get("supported_kv_cache_dtypes")
    if kv_dtype != "auto" and dtypes is not None and kv_dtype not in dtypes:
        return f"kv cache dtype {kv_dtype}"
    return None


# The KV families whose layers vLLM's CPU platform builds the way Apron counts them: plain attention
# (full, sliding, GQA), MLA, and state-only Mamba. Others plan as unknown on the CPU platform.
CPU_FAMILIES = frozenset({"decoder", "mla", "mamba1", "mamba2"})
# platforms/cpu.py check_and_update_config (0.29-0.32) sets block_size 128 unless the user gave one;
# 0.33 update_block_size_for_backend asks CPU_ATTN for its preferred size with the same default.
CPU_BLOCK_SIZE = 128


def cpu_backend(facts: EngineFacts, *, is_mla: bool, cpu_flags: frozenset[str]) -> tuple[BackendChoice, int]:
    """platforms/cpu.py get_attn_backend_cls and the block size check_and_update_config sets: CPU_ATTN
    (block 128); for MLA, AMX_MLA where the CPU has AMX tiles (block 128), else the reference CPU_MLA,
    whose decode kernel compiles for block 16 only."""
    if not is_mla:
        backend = backend_from_facts(facts, "CPU_ATTN")
        return BackendChoice(backend, "the CPU platform's attention backend"), CPU_BLOCK_SIZE
    if "amx_tile" in cpu_flags:
        backend = backend_from_facts(facts, "AMX_MLA")
        return BackendChoice(backend, "MLA on a CPU with AMX tiles"), CPU_BLOCK_SIZE
    backend = backend_from_facts(facts, "CPU_MLA")
    return BackendChoice(backend, "MLA on a CPU without AMX tiles: the reference kernel, block 16"), 16


def lcm_of_min_blocks(backends: list[Backend]) -> int:
    return math.lcm(*[b.min_kernel_block() for b in backends]) if backends else 1
