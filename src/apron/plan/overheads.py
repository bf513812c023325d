"""Memory vLLM charges to the request besides weights and the activation peak.

"non-torch" here is what the engine's summary line calls consumed memory minus the weights: the
driver-level free-memory drop from the start-up snapshot to the end of profiling. It holds
persistent buffers made after the snapshot (sampler penalty state, MoE workspaces), lazily loaded
kernels and library workspaces, and allocator segments that empty_cache() cannot release.
The CUDA-graph term, vLLM's own estimate, is plan/graphs.py.
"""

from __future__ import annotations

from apron.engine.facts import EngineFacts
from apron.frozen import frozen
from apron.plan.model_config import ModelConfig
from apron.plan.ranges import (
    CONSUMER_CAPABILITIES,
    CONSUMER_TRAITS,
    HOPPER_CAPABILITIES,
    HOPPER_TRAITS,
    Observation,
    observed_range,
)
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
# Median, over the 17 consumer training boots (tests/fixtures/boots-training.json), of consumed -
# weights - every derived component below (each kept workspace once), the allocator replays included:
# CUDA module images loaded on first use and the cuBLAS / cuBLASLt handles (driver memory outside
# torch). Observed, not derived (0.04-0.15 GiB; tests/test_ranges.py recomputes it); the
# memory-outside-torch probe (docs/memory.md) would settle it.
BASE_NON_TORCH_BYTES = int(0.09 * GIB)
_SETTLE_NON_TORCH = "the memory-outside-torch probe (docs/memory.md section 9) would settle it"
BASE_NON_TORCH = Observation(
    "kernels, handles, small buffers",
    capabilities=CONSUMER_CAPABILITIES,
    traits=CONSUMER_TRAITS,
    num_boots=17,
    below_fraction=0.54,
    above_fraction=0.64,
    settle=_SETTLE_NON_TORCH,
)
# The same residual on the two H100 boots (Qwen3-32B, gpt-oss-120b: 0.22 and 0.26 GiB once the kept
# cuBLAS workspace is counted once): Hopper's kernels (FA3, CUTLASS sm90, FlashInfer) load larger
# module images. Each of the two boots predicted from the other misses by 0.04 GiB (18%).
BASE_NON_TORCH_HOPPER_BYTES = int(0.24 * GIB)
BASE_NON_TORCH_HOPPER = Observation(
    "kernels, handles, small buffers (Hopper)",
    capabilities=HOPPER_CAPABILITIES,
    traits=HOPPER_TRAITS,
    num_boots=2,
    below_fraction=0.18,
    above_fraction=0.18,
    settle=_SETTLE_NON_TORCH,
)
# Memory in use before vLLM's start-up snapshot at TP=1 (CUDA context): total - initial free on the
# RTX 4090 training boots. Not charged to the request, but it must fit beside it.
PRE_SNAPSHOT_BYTES = 418_759_311
# [PyTorch] aten/src/ATen/cuda/CublasHandlePool.cpp: the default cuBLAS workspace per (handle, stream) is
# 4096 KiB * 2 + 16 KiB * 8 (8.125 MiB), and 32 MiB on compute capability 9.x, 10.x and 12.x; cuBLASLt
# shares it (TORCH_CUBLASLT_UNIFIED_WORKSPACE). A PyTorch fact, not vLLM's; not re-read for torch 2.13.
CUBLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_WORKSPACE_BYTES_SM90 = 32 * MIB


@frozen
class Component:
    """One named term. `low_bytes`/`high_bytes` are its stated range: the value itself where the
    source fixes it (derived), the observations' spread where it rests on them (plan/ranges.py)."""

    name: str
    num_bytes: int
    label: str  # derived | predicted
    basis: str
    low_bytes: int | None = None
    high_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.low_bytes is None:
            object.__setattr__(self, "low_bytes", self.num_bytes)
        if self.high_bytes is None:
            object.__setattr__(self, "high_bytes", self.num_bytes)

    @property
    def low(self) -> int:
        return self.num_bytes if self.low_bytes is None else self.low_bytes

    @property
    def high(self) -> int:
        return self.num_bytes if self.high_bytes is None else self.high_bytes


@frozen
class Overhead:
    components: tuple[Component, ...]

    @property
    def num_bytes(self) -> int:
        return sum(c.num_bytes for c in self.components)

    @property
    def low_bytes(self) -> int:
        return sum(c.low for c in self.components)

    @property
    def high_bytes(self) -> int:
        return sum(c.high for c in self.components)

    @property
    def label(self) -> str:
        return "predicted"

    @property
    def basis(self) -> str:
        return "; ".join(f"{c.name} {c.num_bytes / GIB:.2f} GiB ({c.basis})" for c in self.components)


@frozen
class NonTorchInputs:
    """What the non-torch terms depend on besides the config and the settings."""

    capability: tuple[int, int]
    is_tied: bool
    is_quantized: bool  # the linear layers are quantized (their GEMMs are not cuBLAS)
    moe_workspace_bytes: int
    traits: frozenset[str] = frozenset({"attention"})  # plan/ranges.py layer_traits
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
    parts.append(base_component(inputs))
    fusion = allreduce_fusion_workspace(config, settings, facts, inputs.capability)
    if fusion is not None:
        parts.append(fusion)
    parts.append(load_window_component(config, settings, inputs))
    parts.append(retained_component(config, settings, facts, inputs))
    return Overhead(tuple(parts))


def base_component(inputs: NonTorchInputs) -> Component:
    """Module images of the kernels first used in the window and the cuBLAS handles: what the
    derived rows leave, observed per GPU class (datacenter GPUs from cc 9.0 read Hopper's)."""
    hopper = inputs.capability >= (9, 0) and inputs.capability[0] != 12
    value = BASE_NON_TORCH_HOPPER_BYTES if hopper else BASE_NON_TORCH_BYTES
    spread = observed_range((BASE_NON_TORCH, BASE_NON_TORCH_HOPPER), value, inputs.capability, inputs.traits)
    where = "the 2 H100 boots" if hopper else "17 consumer boots"
    return Component(
        "kernels, handles, small buffers",
        value,
        "predicted",
        f"observed: the residual of {where} after the allocator replays (module images, cuBLAS handles); {spread.note}",
        spread.low_bytes,
        spread.high_bytes,
    )


# compilation/passes/fusion/allreduce_rms_fusion.py FI_ALLREDUCE_FUSION_MAX_SIZE_MB (0.29.0:104-129, the
# same through 0.33.0): the fusion workspace's cap per compute capability and TP size, in MiB.
FUSION_MAX_MIB: dict[tuple[int, int], dict[int, float]] = {
    (9, 0): {2: 64, 4: 2, 8: 0.5},
    (10, 0): {2: 64, 4: 32, 8: 1, 16: 64},
}


def allreduce_fusion_workspace(
    config: ModelConfig, settings: EngineSettings, facts: EngineFacts, capability: tuple[int, int]
) -> Component | None:
    """TP > 1 on cc 9.0 / 10.x with FlashInfer: the all-reduce + RMSNorm fusion pass builds its IPC
    workspace at the first compile, inside the window and outside torch (config/vllm.py
    enable_allreduce_rms_fusion 0.30.0:178-203; allreduce_rms_fusion.py 0.30.0:1016-1045). Tokens
    M = min(cap / (H x dtype), T); 0.33 raises M for B200 at TP 8 to FlashInfer's tuned 128 MB
    (all_reduce_utils.py 0.33.0:87-94, not capped by T). FlashInfer 0.7.2.post1's MNNVL backend (one
    node, multicast) then holds 3 buffers of max(one-shot, two-shot) bytes (comm/trtllm_mnnvl_ar.py
    93-141, 225-250); the driver's allocation granularity rounding is left out."""
    tp = settings.tensor_parallel_size
    key = (capability[0], 0) if capability[0] == 10 else capability
    cap = FUSION_MAX_MIB.get(key, {}).get(tp)
    if tp < 2 or cap is None or settings.enforce_eager:
        return None
    elem, hidden = DTYPE_BYTES[settings.dtype], config.hidden_size
    tokens = min(int(cap * MIB) // (hidden * elem), settings.max_num_batched_tokens)
    if facts.at_least("0.33.0") and key == (10, 0) and tp == 8:
        tokens = max(tokens, (128 * MIB - 1) // (hidden * elem))
    one_shot = min(tokens, MIB // (tp * elem * hidden)) * hidden * tp * elem
    two_shot = 2 * -(-tokens // tp) * tp * hidden * elem
    size = 3 * pad_to(max(one_shot, two_shot), 32)
    return Component(
        "FlashInfer all-reduce fusion workspace",
        size,
        "derived",
        f"{tokens:,} tokens of hidden size {hidden} at TP {tp} (cap {cap} MiB on this GPU), three MNNVL buffers "
        "(flashinfer comm/trtllm_mnnvl_ar.py); built by the fusion pass at the first compile",
    )


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


@frozen
class GraphInputs:
    """What vLLM's CUDA-graph estimate depends on besides the config and the settings (plan/graphs.py)."""

    backend: str  # the attention backend vLLM picks (plan/kv/backends.py)
    capability: tuple[int, int]
    has_one_window_config: bool  # every attention layer has the same sliding window (or none)
    traits: frozenset[str] = frozenset({"attention"})  # plan/ranges.py layer_traits
    num_state_layers: int = 0  # Mamba / gated delta-net / short-conv layers (splitting ops)
    is_attention_free: bool = False
    is_moe_monolithic: bool = False  # the MoE backend fuses the experts (no modular kernel)
