"""Allocator segments that outlive profiling: the profile_run allocation sequence, replayed.

vLLM charges `init free - free after profiling` (utils/mem_utils.py memory_profiling), read after
`gc.collect(); empty_cache()`. A segment of PyTorch's caching allocator that holds a live block cannot be
returned by empty_cache(), so when a persistent allocation made during profile_run lands in a large
block freed earlier in the run, the whole segment is charged as consumed. This module writes the
release's sequence as allocator events (plan/allocator.py) and replays it:

- the split limit: vLLM 0.29/0.30 set max_split_size_mb:20 only around load_model (gpu_worker.py
  0.29.0:488-495); 0.31 and later also wrap profile_run in _scoped_allocator_max_split(20)
  (gpu_worker.py 0.31.0:617-624, 0.33.0:689-697), so a freed block of 20 MiB or more is never split
  and a small persistent allocation cannot pin it;
- the compile transient's random copy of the embedding table, allocated and freed before the first
  real forward (activation.py compile_transient); no copy under --enforce-eager, tensor parallelism or
  a multimodal runner;
- the persistent allocations of the window: the default stream's cuBLAS workspace at the first cuBLAS
  GEMM (vLLM < 0.33; 0.33 runs a warm-up GEMM before the start-up snapshot, gpu_worker.py
  0.33.0:519-530) and the fused-MoE workspace at the first MoE layer (v1/worker/workspace.py). With
  quantized linear layers (Marlin, CUTLASS) the first cuBLAS GEMM is the unquantized lm_head in the
  sampler, after the forward has freed its activations.

What the source does not fix is which cached block a persistent allocation finds: inductor's compile-time
benchmarks (random arguments of the kernels it times, its L2-flush buffer, torch 2.13
_inductor/runtime/benchmarking.py:649) and the generated code's allocation order leave blocks the
allocator's best fit chooses among. That input is observed (lands_in_copy): a MoE workspace, Hopper's
32 MiB cuBLAS workspace and, on tied unquantized non-Gemma models, Ada's 8.125 MiB one land in the
table copy's segment (9 training boots); elsewhere the workspace finds a block of its own (10 boots).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from apron.engine.facts import EngineFacts
from apron.frozen import frozen
from apron.plan.allocator import (
    K_SMALL_SIZE,
    LARGE_SEGMENT_SIZE,
    MIB,
    CachingAllocator,
    Event,
    Replay,
    load_block_bytes,
    replay,
    round_size,
)
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, pad_to

PROFILE_MAX_SPLIT_BYTES = 20 * MIB  # gpu_worker.py 0.31.0:617-624: 20 MiB, "the minimum PyTorch allows"


@frozen
class WindowInputs:
    """What the sequence depends on besides the config and the settings."""

    has_compile_copy: bool  # the compile transient happens (activation.py _compile_skip_reason)
    cublas_workspace_bytes: int  # 0 where the workspace predates the snapshot (0.33)
    moe_workspace_bytes: int
    is_first_gemm_quantized: bool  # the decoder's linear layers do not go through cuBLAS
    lands_in_copy: bool  # observed: the persistent allocation finds only the copy's segment


@frozen
class RetainedSegments:
    events: tuple[Event, ...]
    result: Replay
    basis: str

    @property
    def num_bytes(self) -> int:
        """Reserved bytes no live block uses once empty_cache() has run."""
        return self.result.retained_free_bytes


def profile_window_events(
    config: ModelConfig, settings: EngineSettings, facts: EngineFacts, inputs: WindowInputs
) -> tuple[list[Event], str]:
    """The allocator events of memory_profiling's window, and a one-line account of them."""
    events = [Event("empty_cache")]  # memory_profiling enters with gc.collect(); empty_cache()
    notes = []
    if facts.at_least("0.31.0"):
        events.append(Event("max_split", PROFILE_MAX_SPLIT_BYTES))
        notes.append("profile_run under max_split_size_mb:20 (0.31+)")
    persistent = [Event("alloc", size, tag) for size, tag in _persistent(inputs)]
    if not inputs.lands_in_copy:
        # observed: the persistent allocations find blocks of their own; modelled as fresh segments
        events += persistent
    if inputs.has_compile_copy:
        dsz = DTYPE_BYTES[settings.dtype]
        table = pad_to(config.vocab_size, 64) * config.hidden_size * dsz
        events += [
            Event("alloc", table, "compile: embedding-table copy"),
            Event("free", 0, "compile: embedding-table copy"),
        ]
        notes.append("compile transient's table copy allocated and freed first")
    if inputs.lands_in_copy:
        # observed: when they come, the table copy's block is the cached block best fit finds
        events += persistent
    if persistent:
        notes.append(", ".join(e.tag for e in persistent) + " persistent")
    if facts.at_least("0.31.0"):
        events.append(Event("max_split", 0))
    events.append(Event("empty_cache"))  # memory_profiling's exit, before after_profile.measure()
    return events, "; ".join(notes)


def _persistent(inputs: WindowInputs) -> list[tuple[int, str]]:
    out = []
    if inputs.cublas_workspace_bytes and not inputs.is_first_gemm_quantized:
        out.append((inputs.cublas_workspace_bytes, "cuBLAS workspace"))
    if inputs.moe_workspace_bytes:
        out.append((inputs.moe_workspace_bytes, "MoE workspace"))
    if inputs.cublas_workspace_bytes and inputs.is_first_gemm_quantized:
        # the lm_head's GEMM in the sampler: the forward's freed activations are cached by then
        out.append((inputs.cublas_workspace_bytes, "cuBLAS workspace (lm_head GEMM)"))
    return out


def retained_segments(
    config: ModelConfig, settings: EngineSettings, facts: EngineFacts, inputs: WindowInputs
) -> RetainedSegments:
    events, account = profile_window_events(config, settings, facts, inputs)
    result = replay(events)
    where = "the table copy's segment" if inputs.lands_in_copy else "a segment of its own"
    basis = (
        f"PyTorch caching-allocator replay of profile_run ({account}); the persistent allocations "
        f"land in {where} (observed: which cached block they find is set by inductor's compile-time "
        "benchmarks, not by vLLM's source)"
    )
    return RetainedSegments(tuple(events), result, basis)


LOAD_MAX_SPLIT_BYTES = 20 * MIB  # gpu_worker.py 0.29.0:488-495, the same in every release read


def load_window_events(
    runner_bytes: Sequence[int], param_bytes: Sequence[int], buffer_bytes: Sequence[int]
) -> list[Event]:
    """The start-up snapshot to the start of profiling: the runner's input buffers (its __init__),
    then load_model under max_split_size_mb:20 - every parameter (initialize_model builds the modules on
    the GPU), DeviceMemoryProfiler's empty_cache() on exit, then the model state, sampler and
    structured-output buffers built inside the same scope (v1/worker/gpu/model_runner.py
    0.29.0:374-470)."""
    events = [Event("alloc", n, f"runner {i}") for i, n in enumerate(runner_bytes)]
    events.append(Event("max_split", LOAD_MAX_SPLIT_BYTES))
    events += [Event("alloc", n, f"param {i}") for i, n in enumerate(param_bytes)]
    events += [Event("empty_cache"), Event("mark", 0, "loaded")]
    events += [Event("alloc", n, f"buffer {i}") for i, n in enumerate(buffer_bytes)]
    events.append(Event("max_split", 0))
    return events


@functools.lru_cache(maxsize=64)
def load_window_slack(
    runner_bytes: tuple[int, ...], param_bytes: tuple[int, ...], buffer_bytes: tuple[int, ...]
) -> int:
    """Reserved bytes the load window leaves beyond what the weights estimate (each parameter's
    allocator block) and the buffers' own components (their requested bytes) already count: the free
    tails of the 20 MiB segments that parameters and buffers of 1-10 MiB share, the small pool's tails,
    and the 2 MiB rounding of buffers of 20 MiB or more. Cached: plans that differ only in settings the
    window does not see (max_model_len, the GPU beyond its batch defaults) replay it once."""
    reserved = sum(
        _pool_reserved_bytes(is_small, runner_bytes, param_bytes, buffer_bytes) for is_small in (True, False)
    )
    counted = sum(load_block_bytes(n) for n in param_bytes) + sum(runner_bytes) + sum(buffer_bytes)
    return max(reserved - counted, 0)


def _pool_reserved_bytes(
    is_small: bool, runner_bytes: tuple[int, ...], param_bytes: tuple[int, ...], buffer_bytes: tuple[int, ...]
) -> int:
    """One pool's reserved bytes at the end of load_window_events. CUDACachingAllocator keeps its small
    (<= 1 MiB) and large pools apart (a request takes a block of its own pool only; empty_cache frees
    each pool's whole free segments), so each replays alone; the pool's state after the parameters is
    kept per parameter list (fit's settings change only the buffers), and the buffers, which only
    allocate, go on from a fork of it. tests/test_allocator_fork.py holds this to the whole replay."""

    def mine(sizes: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(n for n in sizes if (round_size(n) <= K_SMALL_SIZE) == is_small)

    alloc = _after_load(mine(runner_bytes), mine(param_bytes)).fork()
    for i, n in enumerate(mine(buffer_bytes)):
        alloc.malloc(n, f"buffer {i}")
    return alloc.reserved


@functools.lru_cache(maxsize=32)
def _after_load(runner_bytes: tuple[int, ...], param_bytes: tuple[int, ...]) -> CachingAllocator:
    """load_window_events up to the mark, for one pool's requests (never changed: callers fork it)."""
    alloc = CachingAllocator()
    for i, n in enumerate(runner_bytes):
        alloc.malloc(n, f"runner {i}")
    alloc.max_split = LOAD_MAX_SPLIT_BYTES
    for i, n in enumerate(param_bytes):
        alloc.malloc(n, f"param {i}")
    alloc.empty_cache()
    return alloc


def sampler_buffer_bytes(max_num_seqs: int, vocab_size: int) -> list[int]:
    """The buffers the V2 sampler and structured outputs build, in order (the same tensors as
    overheads.runner_state): PenaltiesState, LogitBiasState, BadWordsState, LogprobTokenIdsState,
    StructuredOutputsWorker."""
    s, words = max_num_seqs, -(-vocab_size // 32)
    penalties = [4 * s * vocab_size, 4 * s * words]  # penalties.py output_bin_counts, prompt_bin_mask
    logit_bias = [4 * s * 1024, 4 * s * 1024, 4 * s * 1024, 4 * s * 128]  # logit_bias.py
    bad_words_and_logprobs = [4 * s * 1024, 4 * s * 129, 4 * s * 128]  # bad_words.py, logprob.py
    structured = [4 * s * words, 4 * s]  # structured_outputs.py grammar_bitmask, logits_indices
    return penalties + logit_bias + bad_words_and_logprobs + structured


def runner_buffer_bytes(max_num_seqs: int, max_num_batched_tokens: int) -> list[int]:
    """InputBuffers and RequestState on the GPU (input_batch.py 0.29.0:28-38, states.py 0.29.0:34-85)."""
    s, t = max_num_seqs, max_num_batched_tokens
    return [4 * t, 8 * t, t, 4 * (s + 1), 4 * s, 4 * s, 4 * s, 4 * s, 8 * s]


def lands_in_copy(
    config: ModelConfig, *, is_tied: bool, is_quantized: bool, moe_workspace_bytes: int, cublas_workspace_bytes: int
) -> bool:
    """The observed input: where the first persistent allocation of the window lands.

    - a MoE workspace: in the copy (gpt-oss-20b); it is larger than any other block the compile
      leaves, so best fit has nothing else to give it;
    - a cuBLAS workspace of 20 MiB or more (32 MiB on cc 9.x/10.x/12.x) before an unquantized first
      GEMM: in the copy (both H100 boots, Qwen3-32B and gpt-oss-120b, whose Hopper MoE kernel takes no
      workspace); it cannot use the remainders of the 20 MiB segments that 1-10 MiB transients leave;
    - the 8.125 MiB workspace: in the copy on tied, unquantized, non-Gemma models (Qwen3-0.6B, 1.7B,
      mamba-2.8b), elsewhere on the untied ones, gemma-2 and the quantized ones (10 boots).
    Which cached block best fit finds is set by inductor's compile-time benchmarks, not by vLLM's
    source: the allocator-snapshot probe (docs/memory.md) would settle it."""
    if moe_workspace_bytes:
        return True
    if is_quantized or not cublas_workspace_bytes:
        return False
    if cublas_workspace_bytes >= LARGE_SEGMENT_SIZE:
        return True
    return is_tied and not config.text_model_type.startswith("gemma")
