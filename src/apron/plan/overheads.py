"""Memory vLLM charges to the request besides weights and the activation peak.

"non-torch" here is what the engine's summary line calls consumed memory minus the weights: the
driver-level free-memory drop from the start-up snapshot to the end of profiling. It holds
persistent buffers made after the snapshot (sampler penalty state, MoE workspaces), lazily loaded
kernels and library workspaces, and allocator segments that empty_cache() cannot release.
The CUDA-graph term is vLLM's own estimate (profile_cudagraph_memory), which it subtracts.
"""

from __future__ import annotations

from dataclasses import dataclass

from apron.engine.facts import EngineFacts
from apron.plan.allocator import allocation_size
from apron.plan.model_config import ModelConfig
from apron.plan.retained import (
    WindowInputs,
    lands_in_copy,
    load_window_slack,
    retained_segments,
    runner_buffer_bytes,
    sampler_buffer_bytes,
)
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, pad_to

GIB = 2**30
MIB = 2**20
# Median, over the 14 dense-attention consumer training boots (tests/fixtures/boots-training.json), of
# consumed - weights - every derived component below, the allocator replays included: CUDA module
# images loaded on first use and the cuBLAS / cuBLASLt handles (driver memory outside torch). Observed,
# not derived (range 0.03-0.10 GiB; the same model reads 0.04 GiB lower on an L4 than on an RTX 4090);
# the memory-outside-torch probe (docs/memory.md) would settle it.
BASE_NON_TORCH_BYTES = int(0.07 * GIB)
# CUDA-graph estimate: least-squares fit of a + b * layers * graphs / 86 over the same 12 boots
# (RMS residual 0.019 GiB). Dense attention only; MoE and Mamba boots missed it by 0.2-0.4 GiB.
CUDAGRAPH_BASE_BYTES = int(0.0143 * GIB)
CUDAGRAPH_PER_LAYER_GRAPH_BYTES = 0.0123 * GIB / 86
# v1/worker/gpu/cudagraph_utils.py (0.29.0:714, 0.33.0 the same): the floor of the extrapolated FULL sample.
MIN_PER_GRAPH_BYTES = 1 << 20
# Memory in use before vLLM's start-up snapshot at TP=1 (CUDA context): total - initial free on the
# RTX 4090 training boots. Not charged to the request, but it must fit beside it.
PRE_SNAPSHOT_BYTES = 418_759_311
# [PyTorch] aten/src/ATen/cuda/CublasHandlePool.cpp: the default cuBLAS workspace per (handle, stream) is
# 4096 KiB * 2 + 16 KiB * 8 (8.125 MiB), and 32 MiB on compute capability 9.x, 10.x and 12.x; cuBLASLt
# shares it (TORCH_CUBLASLT_UNIFIED_WORKSPACE). A PyTorch fact, not vLLM's; not re-read for torch 2.13.
CUBLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_WORKSPACE_BYTES_SM90 = 32 * MIB
# v1/attention/backends/flash_attn.py (0.29.0:483-503, 0.33.0 the same) and config/attention.py:
# flash_attn_max_num_splits_for_cuda_graph.
FA3_MAX_SPLITS = 32


@dataclass(frozen=True)
class Component:
    name: str
    num_bytes: int
    label: str  # derived | predicted
    basis: str


@dataclass(frozen=True)
class Overhead:
    components: tuple[Component, ...]

    @property
    def num_bytes(self) -> int:
        return sum(c.num_bytes for c in self.components)

    @property
    def label(self) -> str:
        return "predicted"

    @property
    def basis(self) -> str:
        return "; ".join(f"{c.name} {c.num_bytes / GIB:.2f} GiB ({c.basis})" for c in self.components)


@dataclass(frozen=True)
class NonTorchInputs:
    """What the non-torch terms depend on besides the config and the settings."""

    capability: tuple[int, int]
    is_tied: bool
    is_quantized: bool  # the linear layers are quantized (their GEMMs are not cuBLAS)
    moe_workspace_bytes: int
    multimodal_buffers: tuple[tuple[str, int, str], ...] = ()  # (name, bytes, basis) a multimodal runner adds
    has_compile_copy: bool = False  # the compile transient happens (activation.py compile_transient)
    param_bytes: tuple[int, ...] = ()  # the checkpoint's parameters in construction order (weights.py)


def non_torch(config: ModelConfig, settings: EngineSettings, facts: EngineFacts, inputs: NonTorchInputs) -> Overhead:
    """Everything between the start-up snapshot and the end of profiling that stays: vLLM charges
    init free - free after profiling (utils/mem_utils.py memory_profiling), minus the weights."""
    parts = runner_state(config, settings)
    parts += [Component(name, size, "derived", basis) for name, size, basis in inputs.multimodal_buffers]
    if not facts.at_least("0.33.0"):
        parts.append(cublas_workspace(inputs.capability))
    if inputs.moe_workspace_bytes:
        parts.append(
            Component(
                "MoE workspace",
                inputs.moe_workspace_bytes,
                "derived",
                "v1/worker/workspace.py WorkspaceManager: the modular fused-MoE kernel's "
                "get_simultaneous(max(ws13, output), ws2) over max_num_batched_tokens (modular_kernel.py "
                "0.29.0:1173-1181)",
            )
        )
    parts.append(
        Component(
            "kernels, handles, small buffers",
            BASE_NON_TORCH_BYTES,
            "predicted",
            "observed: median residual of 14 dense consumer boots after the allocator replays (module images, cuBLAS handles)",
        )
    )
    parts.append(load_window_component(config, settings, inputs))
    parts.append(retained_component(config, settings, facts, inputs))
    return Overhead(tuple(parts))


def runner_state(config: ModelConfig, settings: EngineSettings) -> list[Component]:
    """Persistent GPU buffers the V2 runner and its sampler build after the snapshot (all releases)."""
    seqs, vocab, tokens = settings.max_num_seqs, config.vocab_size, settings.max_num_batched_tokens
    words = -(-vocab // 32)
    return [
        Component(
            "sampler penalty state",
            4 * seqs * vocab + 4 * seqs * words,
            "derived",
            "v1/worker/gpu/sample/penalties.py (0.29.0:32-42): int32 [max_num_seqs, vocab] output_bin_counts "
            "and [max_num_seqs, vocab/32] prompt_bin_mask",
        ),
        Component(
            "structured-output bitmask",
            4 * seqs * words + 4 * seqs,
            "derived",
            "v1/worker/gpu/structured_outputs.py (0.29.0:48-53, 0.33.0:60-65): int32 grammar_bitmask "
            "[max_num_seqs, vocab/32] and logits_indices [max_num_seqs]",
        ),
        Component(
            "per-request sampler state",
            seqs * 4 * (3 * 1024 + 128 + 1024 + 129 + 128),
            "derived",
            "sample/logit_bias.py (allowed ids, bias ids, bias [S, 1024], stop ids [S, 128]), "
            "sample/bad_words.py ([S, 1024] + [S, 129]), sample/logprob.py ([S, 128]); 4-byte elements",
        ),
        Component(
            "runner input buffers",
            tokens * (4 + 8 + 1) + seqs * (4 * 4 + 8) + 4 * (seqs + 1),
            "derived",
            "v1/worker/gpu/input_batch.py InputBuffers (input_ids, positions, is_padding per token; "
            "query_start_loc, seq_lens, dcp_local_seq_lens) and gpu/states.py RequestState (total_len, "
            "num_computed_tokens, last_sampled_tokens); all_token_ids lives in pinned host memory",
        ),
    ]


def cublas_workspace(capability: tuple[int, int]) -> Component:
    size = CUBLAS_WORKSPACE_BYTES_SM90 if capability[0] in (9, 10, 12) else CUBLAS_WORKSPACE_BYTES
    return Component(
        "cuBLAS workspace (default stream)",
        size,
        "derived",
        "the first GEMM after the start-up snapshot allocates it from the caching allocator (vLLM "
        "< 0.33; 0.33 runs a warm-up GEMM before the snapshot, gpu_worker.py 0.33.0:519-530); size: "
        "PyTorch's default for this compute capability",
    )


def load_window_component(config: ModelConfig, settings: EngineSettings, inputs: NonTorchInputs) -> Component:
    """The caching allocator's slack after load_model: what its segments reserve beyond the weights'
    blocks and the buffers' requested bytes (plan/retained.py load_window_slack)."""
    buffers = [size for _, size, _ in inputs.multimodal_buffers]
    buffers += sampler_buffer_bytes(settings.max_num_seqs, config.vocab_size)
    runner = runner_buffer_bytes(settings.max_num_seqs, settings.max_num_batched_tokens)
    slack = load_window_slack(tuple(runner), inputs.param_bytes, tuple(buffers))
    return Component(
        "load-window allocator slack",
        slack,
        "derived",
        f"caching-allocator replay of {len(inputs.param_bytes)} parameters in construction order under "
        "max_split_size_mb:20, then the sampler and structured-output buffers: free tails of shared 20 MiB "
        "segments and of the small pool, 2 MiB rounding of large buffers (re-laid quantized layouts are "
        "left out)",
    )


def retained_component(
    config: ModelConfig, settings: EngineSettings, facts: EngineFacts, inputs: NonTorchInputs
) -> Component:
    """Reserved bytes that empty_cache() cannot return after profile_run: the caching allocator's
    replay of the window's sequence (plan/retained.py, plan/allocator.py)."""
    cublas = 0 if facts.at_least("0.33.0") else cublas_workspace(inputs.capability).num_bytes
    landing = lands_in_copy(
        config,
        is_tied=inputs.is_tied,
        is_quantized=inputs.is_quantized,
        moe_workspace_bytes=inputs.moe_workspace_bytes,
        cublas_workspace_bytes=cublas,
    )
    window = WindowInputs(
        has_compile_copy=inputs.has_compile_copy,
        cublas_workspace_bytes=cublas,
        moe_workspace_bytes=inputs.moe_workspace_bytes,
        is_first_gemm_quantized=inputs.is_quantized,
        lands_in_copy=landing,
    )
    retained = retained_segments(config, settings, facts, window)
    return Component("retained allocator segments", retained.num_bytes, "predicted", retained.basis)


@dataclass(frozen=True)
class GraphInputs:
    """What vLLM's CUDA-graph estimate depends on besides the config and the settings."""

    backend: str  # the attention backend vLLM picks (plan/kv/backends.py)
    capability: tuple[int, int]
    has_one_window_config: bool  # every attention layer has the same sliding window (or none)


def cudagraph_estimate(config: ModelConfig, settings: EngineSettings, inputs: GraphInputs | None = None) -> Overhead:
    """vLLM subtracts profile_cudagraph_memory() (v1/worker/gpu/cudagraph_utils.py 0.29.0:718-831,
    0.33.0:922-1039): a real capture of every piecewise size and the 2 largest FULL graphs, read off
    cudaMemGetInfo, with the FULL part extrapolated as first + (N_full - 1) x max(second, 1 MiB)."""
    if not settings.uses_cudagraphs:
        return Overhead((Component("CUDA graphs", 0, "derived", "eager mode captures no graphs"),))
    piecewise, full = graph_counts(settings)
    layers = config.num_layers
    per_graph = CUDAGRAPH_PER_LAYER_GRAPH_BYTES * layers
    parts = [
        Component(
            "piecewise graphs and the first FULL graph",
            int(CUDAGRAPH_BASE_BYTES + per_graph * (piecewise + min(full, 1))),
            "predicted",
            f"{piecewise} piecewise graphs and the largest FULL graph over {layers} layers at ~0.15 MiB per "
            "layer and graph: observed, fit on 12 dense-attention consumer boots (its intercept holds the "
            "capture stream's 20 MiB cuBLAS segment on those GPUs); MoE and Mamba boots differed by up to "
            "0.4 GiB; a capture probe per graph kind would settle it",
        )
    ]
    if full > 1:
        # cudagraph_utils.py _extrapolate_full_graph_memory (0.29.0:823-831): the second FULL sample,
        # floored at _MIN_PER_GRAPH_BYTES = 1 MiB, stands for every FULL graph after the first
        second = max(int(per_graph), MIN_PER_GRAPH_BYTES)
        parts.append(
            Component(
                "FULL graphs extrapolated from the second sample",
                (full - 1) * second,
                "predicted",
                f"({full} - 1) x max(second FULL sample, 1 MiB) (cudagraph_utils.py 0.29.0:823-831, "
                "0.33.0:1031-1039); the sample is the observed per-layer slope",
            )
        )
    stream = capture_stream_cublas_delta(inputs)
    if stream:
        parts.append(stream)
    accumulators = fa3_split_accumulators(config, settings, inputs)
    if accumulators:
        parts.append(accumulators)
    return Overhead(tuple(parts))


def capture_stream_cublas_delta(inputs: GraphInputs | None) -> Component | None:
    """graph_capture() (distributed/parallel_state.py 0.29.0:659-661) runs the warm-ups and captures
    on a new torch.cuda.Stream; its first GEMM creates that stream's cuBLAS workspace in the regular
    pool, a fresh segment (plan/allocator.py allocation_size): 20 MiB for Ada's and Ampere's 8.125 MiB,
    32 MiB on cc 9.x/10.x/12.x. The fit's intercept already holds the 20 MiB; this is the rest."""
    if inputs is None:
        return None
    fitted = allocation_size(CUBLAS_WORKSPACE_BYTES)
    delta = allocation_size(cublas_workspace(inputs.capability).num_bytes) - fitted
    if delta <= 0:
        return None
    return Component(
        "capture stream's cuBLAS workspace (beyond the fit's GPUs)",
        delta,
        "derived",
        "a new capture stream's workspace segment: 32 MiB on this compute capability against the 20 MiB "
        "segment of the fit's GPUs (PyTorch's default workspace size, caching-allocator segment rounding)",
    )


def fa3_split_accumulators(
    config: ModelConfig, settings: EngineSettings, inputs: GraphInputs | None
) -> Component | None:
    """FlashAttention 3 (cc 9.x) with FULL graphs and its ahead-of-time scheduler (one sliding-window
    configuration across layers) caps splits at flash_attn_max_num_splits_for_cuda_graph = 32 "so that
    large enough intermediate buffers are pre-allocated during capture"; the buffers are "[num_splits,
    num_heads, num_tokens, head_size]" (flash_attn.py 0.29.0:483-503 and 587-597). The first FULL
    sample, at the largest FULL size, allocates them in the graph pool and the estimate keeps that
    sample whole. float32 (the FA3 accumulator type) is an inference from the FA3 interface, not read."""
    if inputs is None or inputs.backend != "FLASH_ATTN" or inputs.capability[0] != 9:
        return None
    if not inputs.has_one_window_config or config.is_mla:
        return None
    full_sizes = [s for s in settings.cudagraph_capture_sizes if s <= settings.max_num_seqs]
    if not full_sizes:
        return None
    tokens, heads = max(full_sizes), config.num_heads // settings.tensor_parallel_size
    size = FA3_MAX_SPLITS * tokens * heads * (config.head_dim + 1) * 4
    return Component(
        "FA3 split-KV accumulators (first FULL graph)",
        size,
        "predicted",
        f"[32 splits, {tokens} tokens, {heads} heads, head size {config.head_dim}] output plus the "
        "log-sum-exp, float32: flash_attn.py's own sizing of the buffers max_num_splits reserves",
    )


def graph_counts(settings: EngineSettings) -> tuple[int, int]:
    """FULL_AND_PIECEWISE (the O2 default): one piecewise graph per capture size and one full graph
    per size up to max_num_seqs (decode batches; v1/cudagraph_dispatcher.py)."""
    sizes = settings.cudagraph_capture_sizes
    return len(sizes), sum(1 for s in sizes if s <= settings.max_num_seqs)


def moe_workspace_bytes(
    config: ModelConfig, settings: EngineSettings, *, mxfp4_backend: tuple[str, tuple[int, int]] | None
) -> int:
    """Persistent workspace the modular fused-MoE kernel takes from the workspace manager on its first
    call: get_simultaneous(max(ws13, output), ws2) in the activation dtype, M = max_num_batched_tokens
    (modular_kernel.py 0.29.0:1173-1181). Triton experts (experts/triton_moe.py 0.29.0:218-233): ws13
    (M, topk, max(N_act, K)), ws2 (M, topk, max(N, K)), N the per-rank w13 width and N_act = N / 2
    for gated activations (adjust_N_for_activation). Marlin experts (MXFP4 below Hopper,
    experts/marlin_moe.py 0.29.0:704-733): ws1 (M*topk, max(N, K)), ws2 (M*topk*max(2N, K)) with the
    padded intermediate N. Monolithic kernels (the OAI Triton MXFP4 kernels vLLM prefers on Hopper,
    oracle/mxfp4.py 0.29.0:191-198, and TRT-LLM's on SM100) allocate inside the kernel: none here.
    DeepGEMM's FP8 block-quant shapes on Hopper are not modelled (the Triton shapes are used)."""
    if not config.is_moe:
        return 0
    tokens, topk = settings.max_num_batched_tokens, max(config.num_experts_per_tok, 1)
    dsz = DTYPE_BYTES[settings.dtype]
    if mxfp4_backend is not None:
        backend, (inter, hidden) = mxfp4_backend
        if backend != "MARLIN":
            return 0
        ws13 = tokens * topk * max(inter, hidden)
        ws2 = tokens * topk * max(2 * inter, hidden)
    else:
        inter = config.moe_intermediate_size // settings.tensor_parallel_size
        hidden = config.hidden_size
        ws13 = tokens * topk * max(inter, hidden)
        ws2 = tokens * topk * max(2 * inter, hidden)
    output = tokens * hidden
    return (pad_to(max(ws13, output) * dsz, 256)) + pad_to(ws2 * dsz, 256)
