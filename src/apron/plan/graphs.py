"""vLLM's CUDA-graph estimate, the term the KV budget subtracts for graphs.

profile_cudagraph_memory (v1/worker/gpu/cudagraph_utils.py 0.29.0:718-831, 0.30.0:847-960,
0.33.0:922-1039) captures, against a throwaway pool and a minimal KV cache, every PIECEWISE size and
the two largest FULL graphs, reads the free-memory drop (`measured`), and extrapolates the FULL part as
first + (N_full - 1) x max(second, 1 MiB). `measured` holds:

- the graphs' driver memory (capture and cudaGraphInstantiate), which grows with the kernel nodes of
  each graph: the one observed constant here, a per-layer-and-graph cost fit on dense consumer boots,
  scaled for every other layer kind by the kernels that layer launches relative to a dense one
  (LAUNCHES, read from the models' forward code; PIECEWISE graphs leave the splitting ops -
  attention, state-space mixers, the sparse indexer - outside, FULL graphs hold them);
- attention buffers the first FULL capture allocates in the pool and the extrapolation keeps whole
  (FlashAttention 3's split-KV accumulators), and their eager twin: the warm-up before each capture
  runs attention with the same split cap in the regular pool, which torch.cuda.graph's own
  empty_cache() releases inside a FULL sample's window, so the extrapolation adds it back once;
- decode-kernel globals first touched by the first decode forward (V2 profiles with skip_attn=True):
  FlashInfer's TRT-LLM workspace, FlashInfer-MLA's workspace;
- the capture stream's own cuBLAS workspace (graph_capture() opens a new stream).
"""

from __future__ import annotations

from apron.frozen import frozen, replace
from apron.plan.allocator import allocation_size
from apron.plan.model_config import ModelConfig
from apron.plan.overheads import (
    CUBLAS_WORKSPACE_BYTES,
    MIB,
    Component,
    GraphInputs,
    Overhead,
    cublas_workspace,
)
from apron.plan.ranges import (
    CONSUMER_CAPABILITIES,
    CONSUMER_TRAITS,
    HOPPER_CAPABILITIES,
    HOPPER_TRAITS,
    Observation,
    observed_range,
)
from apron.plan.settings import EngineSettings

GIB = 2**30
# Least-squares fit of a + b x layers x graphs over the 12 dense-attention consumer training boots
# (RMS residual 0.019 GiB): the intercept and the per-layer-and-graph driver cost of a dense layer.
CUDAGRAPH_BASE_BYTES = int(0.0143 * GIB)
CUDAGRAPH_PER_LAYER_GRAPH_BYTES = 0.0123 * GIB / 86
_SETTLE_GRAPHS = (
    "a capture probe per layer kind (scripts/gpu/probe_allocator.py, docs/memory.md section 9) would settle it"
)
PER_GRAPH = (
    Observation(
        "driver memory per captured graph and layer",
        capabilities=CONSUMER_CAPABILITIES,
        traits=CONSUMER_TRAITS,
        num_boots=17,
        below_fraction=0.11,
        above_fraction=0.06,
        settle=_SETTLE_GRAPHS,
    ),
    # The two H100 boots (Qwen3-32B, gpt-oss-120b) read the constant at 1.23x and 0.81x; each predicted
    # from the other misses by their whole difference: 35% below the higher, 53% above the lower.
    Observation(
        "driver memory per captured graph and layer",
        capabilities=HOPPER_CAPABILITIES,
        traits=HOPPER_TRAITS,
        num_boots=2,
        below_fraction=0.35,
        above_fraction=0.53,
        settle=_SETTLE_GRAPHS,
    ),
)
# v1/worker/gpu/cudagraph_utils.py (0.29.0:714, 0.33.0 the same): the floor of the extrapolated FULL sample.
MIN_PER_GRAPH_BYTES = 1 << 20
# v1/attention/backends/flash_attn.py (0.29.0:483-503, 0.33.0 the same) and config/attention.py:
# flash_attn_max_num_splits_for_cuda_graph.
FA3_MAX_SPLITS = 32
# envs.py VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (0.29.0:219): the TRT-LLM decode workspace
# (v1/attention/backends/flashinfer.py 0.29.0:103-109, 0.33.0:149-155), created on first decode use.
FLASHINFER_TRTLLM_WORKSPACE_BYTES = 394 * MIB
# v1/attention/backends/mla/flashinfer_mla.py (0.29.0:69-88, 0.33.0:71-89): the module's workspace.
FLASHINFER_MLA_WORKSPACE_BYTES = 128 * MIB

# Kernel launches per layer in a captured forward, read from the models' forward code (the label of
# every count is an inference: inductor may fuse elementwise neighbours): an attention block is the
# input norm, the QKV GEMM, rotary and the output projection; a dense MLP the post-attention norm,
# gate_up, the activation and down; a modular MoE (Triton, Marlin, DeepGEMM experts) the norm, router
# GEMM, top-k, moe_align_block_size, two grouped GEMMs, the activation and the combine; a monolithic
# kernel (OAI Triton MXFP4, FlashInfer TRT-LLM) fuses the experts into two launches after routing.
LAUNCHES = {
    "attention": 4,
    "MLA": 7,  # fused q_a/kv_a projection, two LoRA norms, q_b projection, rotary, output projection
    "dense MLP": 4,
    "modular MoE": 8,
    "monolithic MoE": 5,
    "shared expert": 3,
    "sparse indexer": 6,  # wq_b, wk, k norm, rotary, weights projection, fp8 quantization
    "state mixer (outside piecewise graphs)": 3,  # norm, in_proj, out_proj
    "state mixer kernels": 4,  # conv update, x/dt projections, selective state update
    "all-reduce": 2,  # after attention and after the MLP, at tensor parallelism > 1
}
DENSE_LAUNCHES = LAUNCHES["attention"] + LAUNCHES["dense MLP"]


@frozen
class LayerWeights:
    """The model's layers in dense-layer equivalents of graph driver memory."""

    piecewise: float
    full: float
    account: str


def layer_weights(config: ModelConfig, settings: EngineSettings, inputs: GraphInputs) -> LayerWeights:
    state = inputs.num_state_layers
    attention = max(config.num_layers - state, 0)
    attn = LAUNCHES["MLA"] if config.is_mla else LAUNCHES["attention"]
    if config.get("index_topk"):
        attn += LAUNCHES["sparse indexer"]
    mlp = _mlp_launches(config, inputs.is_moe_monolithic)
    reduce = LAUNCHES["all-reduce"] if settings.tensor_parallel_size > 1 else 0
    per_attention = attn + mlp + reduce
    mixer_pw = LAUNCHES["state mixer (outside piecewise graphs)"] + reduce
    mixer_full = mixer_pw + LAUNCHES["state mixer kernels"]
    if state and not inputs.is_attention_free:
        mixer_pw, mixer_full = mixer_pw + mlp, mixer_full + mlp
    piecewise = (attention * per_attention + state * mixer_pw) / DENSE_LAUNCHES
    full = (attention * per_attention + state * mixer_full) / DENSE_LAUNCHES
    account = f"{attention} attention layers of {per_attention} launches"
    if state:
        account += f", {state} state layers of {mixer_pw} ({mixer_full} in FULL graphs)"
    return LayerWeights(piecewise, full, f"{account}, against {DENSE_LAUNCHES} for a dense layer")


def _mlp_launches(config: ModelConfig, is_monolithic: bool) -> int:
    if not config.is_moe:
        return LAUNCHES["dense MLP"]
    launches = LAUNCHES["monolithic MoE" if is_monolithic else "modular MoE"]
    if config.get("n_shared_experts") or config.get("shared_expert_intermediate_size"):
        launches += LAUNCHES["shared expert"]
    return launches


def cudagraph_estimate(config: ModelConfig, settings: EngineSettings, inputs: GraphInputs | None = None) -> Overhead:
    """vLLM's estimate (profile_cudagraph_memory), term by term; 0 in eager mode."""
    if not settings.uses_cudagraphs:
        return Overhead((Component("CUDA graphs", 0, "derived", "eager mode captures no graphs"),))
    inputs = inputs or GraphInputs(backend="FLASH_ATTN", capability=(9, 0), has_one_window_config=True)
    piecewise, full = graph_counts(settings)
    weights = layer_weights(config, settings, inputs)
    parts = [_driver_memory(weights, piecewise, full, inputs)]
    if full > 1:
        parts.append(_full_extrapolation(weights, full, inputs))
    for extra in (
        capture_stream_cublas_delta(inputs),
        *fa3_split_accumulators(config, settings, inputs),
        decode_workspace(inputs),
    ):
        if extra is not None:
            parts.append(extra)
    return Overhead(tuple(parts))


def _driver_memory(weights: LayerWeights, piecewise: int, full: int, inputs: GraphInputs) -> Component:
    per_graph = CUDAGRAPH_PER_LAYER_GRAPH_BYTES
    graphs = weights.piecewise * piecewise + weights.full * min(full, 1)
    value = int(CUDAGRAPH_BASE_BYTES + per_graph * graphs)
    spread = observed_range(PER_GRAPH, value, inputs.capability, inputs.traits)
    return Component(
        "piecewise graphs and the first FULL graph",
        value,
        "predicted",
        f"{piecewise} piecewise graphs and the largest FULL graph at ~0.15 MiB per dense-layer equivalent and "
        f"graph ({weights.account}): observed, fit on 12 dense-attention consumer boots (its intercept holds the "
        f"capture stream's 20 MiB cuBLAS segment on those GPUs); {spread.note}",
        spread.low_bytes,
        spread.high_bytes,
    )


def _full_extrapolation(weights: LayerWeights, full: int, inputs: GraphInputs) -> Component:
    # cudagraph_utils.py _extrapolate_full_graph_memory (0.29.0:823-831): the second FULL sample,
    # floored at _MIN_PER_GRAPH_BYTES = 1 MiB, stands for every FULL graph after the first
    second = max(int(CUDAGRAPH_PER_LAYER_GRAPH_BYTES * weights.full), MIN_PER_GRAPH_BYTES)
    value = (full - 1) * second
    spread = observed_range(PER_GRAPH, value, inputs.capability, inputs.traits)
    return Component(
        "FULL graphs extrapolated from the second sample",
        value,
        "predicted",
        f"({full} - 1) x max(second FULL sample, 1 MiB) (cudagraph_utils.py 0.29.0:823-831, 0.33.0:1031-1039); "
        f"the sample is the observed per-layer cost over {weights.full:.1f} dense-layer equivalents; {spread.note}",
        spread.low_bytes,
        spread.high_bytes,
    )


def capture_stream_cublas_delta(inputs: GraphInputs) -> Component | None:
    """graph_capture() (distributed/parallel_state.py 0.29.0:659-661) runs the warm-ups and captures
    on a new torch.cuda.Stream; its first GEMM creates that stream's cuBLAS workspace in the regular
    pool, a fresh segment (plan/allocator.py allocation_size): 20 MiB for Ada's and Ampere's 8.125 MiB,
    32 MiB on cc 9.x/10.x/12.x. The fit's intercept already holds the 20 MiB; this is the rest."""
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


def fa3_split_accumulators(config: ModelConfig, settings: EngineSettings, inputs: GraphInputs) -> list[Component]:
    """FlashAttention 3 (cc 9.x) with FULL graphs and its ahead-of-time scheduler caps splits at
    flash_attn_max_num_splits_for_cuda_graph = 32 "so that large enough intermediate buffers are
    pre-allocated during capture"; the buffers are "[num_splits, num_heads, num_tokens, head_size]"
    (flash_attn.py 0.29.0:483-503 and 587-597; the MLA backend the same, flashattn_mla.py
    0.30.0:128-159, 203-216, with head size kv_lora_rank). Without the AOT scheduler (several
    sliding-window configurations turn it off, flash_attn.py 0.29.0:575-585) FA3's own heuristic picks
    the splits per call and a capture's short dummy sequences take one: no accumulators (gpt-oss-120b's
    H100 estimate has none). The first FULL sample, at the largest FULL size, allocates them in the
    graph pool; the eager warm-ups run attention with the same cap in the regular pool, a copy the
    estimate counts once more (the second component). float32 (the FA3 accumulator type) is an
    inference from the FA3 interface, not read."""
    if inputs.capability[0] != 9 or inputs.backend not in ("FLASH_ATTN", "FLASH_ATTN_MLA"):
        return []
    if inputs.backend == "FLASH_ATTN" and config.is_mla:
        return []
    sizes = settings.cudagraph_capture_sizes
    full_sizes = [s for s in sizes if s <= settings.max_num_seqs]
    if not full_sizes:
        return []
    heads = config.num_heads // settings.tensor_parallel_size
    width = (config.kv_lora_rank or 0) if inputs.backend == "FLASH_ATTN_MLA" else config.head_dim
    tokens, eager = max(full_sizes), max(sizes)
    graph_pool = FA3_MAX_SPLITS * tokens * heads * (width + 1) * 4
    regular_pool = FA3_MAX_SPLITS * eager * heads * (width + 1) * 4
    if inputs.backend == "FLASH_ATTN" and not inputs.has_one_window_config:
        # Without the AOT scheduler FA3's heuristic decides; a split cap of 32 is still passed
        # (flash_attn.py 0.29.0:483-503, 597): the buffers may come, so one copy is the high end.
        return [
            Component(
                "FA3 split-KV accumulators (heuristic splits: the high end)",
                0,
                "predicted",
                "several sliding-window configurations turn FA3's AOT scheduler off (flash_attn.py 0.29.0:575-585); "
                "gpt-oss-120b's H100 estimate shows no accumulators, but max_num_splits 32 is still passed, so the "
                f"high end holds one copy ([32, {tokens} tokens, {heads} heads, {width}] float32)",
                0,
                graph_pool,
            )
        ]
    out = [
        Component(
            "FA3 split-KV accumulators (first FULL graph)",
            graph_pool,
            "predicted",
            f"[32 splits, {tokens} tokens, {heads} heads, head size {width}] output plus the log-sum-exp, "
            "float32: flash_attn.py's own sizing of the buffers max_num_splits reserves",
        )
    ]
    if inputs.backend == "FLASH_ATTN":
        out.append(
            Component(
                "FA3 split-KV accumulators (eager warm-up, regular pool)",
                regular_pool,
                "predicted",
                f"a second copy ({eager} tokens at most): the eager warm-up before each capture runs attention "
                "with the same split cap in the regular pool; torch.cuda.graph's empty_cache() releases it inside "
                "the FULL samples' window, so the second sample reads it as a release and vLLM's "
                "measured - s2 adds it back once (cudagraph_utils.py 0.29.0:799-831); inferred, supported by "
                "the H100 Qwen3-32B boot",
            )
        )
    else:
        # FA3-MLA's eager decode path takes the same cap (flashattn_mla.py 0.30.0:203-216); whether the
        # piecewise warm-up's dummy batch reaches it is not read: the high end holds that copy.
        out[0] = replace(out[0], high_bytes=graph_pool + regular_pool)
    return out


def decode_workspace(inputs: GraphInputs) -> Component | None:
    """Module globals the first decode forward creates (V2's profile_run skips attention, so the
    first decode forward is the estimate's): FlashInfer's TRT-LLM decode workspace (SM100's first
    choice for standard attention) and FlashInfer-MLA's workspace. Persistent: measured once."""
    if inputs.backend == "FLASHINFER" and inputs.capability[0] == 10:
        size, what = FLASHINFER_TRTLLM_WORKSPACE_BYTES, "flashinfer.py 0.29.0:103-109 (torch.zeros, 394 MiB)"
    elif inputs.backend == "FLASHINFER_MLA":
        size, what = FLASHINFER_MLA_WORKSPACE_BYTES, "mla/flashinfer_mla.py 0.29.0:69-88 (128 MiB)"
    else:
        return None
    return Component("decode kernel workspace (first decode forward)", size, "derived", what)


def graph_counts(settings: EngineSettings) -> tuple[int, int]:
    """FULL_AND_PIECEWISE (the O2 default): one piecewise graph per capture size and one full graph
    per size up to max_num_seqs (decode batches; v1/cudagraph_dispatcher.py)."""
    sizes = settings.cudagraph_capture_sizes
    return len(sizes), sum(1 for s in sizes if s <= settings.max_num_seqs)
