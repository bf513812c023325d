"""The start-up activation peak: the largest of four moments of vLLM's profiling run.

vLLM measures `torch peak - torch allocated` over `profile_run` (utils/mem_utils.py
memory_profiling) and subtracts it from the KV budget. The V2 model runner (the default on CUDA in
0.29-0.33, config/vllm.py use_v2_model_runner) runs, in order: the multimodal encoder on a dummy
batch (plan/encoder.py), a forward pass over max_num_batched_tokens, and the sampler over
min(T, max_num_seqs) rows (v1/worker/gpu/model_runner.py profile_run: 0.29.0:851-884,
0.33.0:1022-1052). With torch.compile on, the first forward also compiles, and inductor's combo-kernel
benchmarking allocates random copies of every argument of the kernel it times - the embedding table
among them. The encoder's outputs stay in the encoder cache until profile_run ends, so they are part
of the forward and sampler moments as well.

Each moment is a list of named Buffer tensors (`--explain` shows them); a new layout adds its buffers
to the moment it lives in (forward_pass's `extra` hook) rather than a number to the total.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from apron.engine.facts import EngineFacts
from apron.frozen import cached_property, frozen
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, pad_to


@frozen
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype_bytes: int

    @cached_property  # a plan reads every buffer's size many times (moments, peaks, details)
    def num_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype_bytes


@frozen
class Moment:
    """A moment of profile_run. `not_yet_live`: allocations made later in the run and kept past
    it (the MoE workspace, the cuBLAS workspace before 0.33): vLLM's transient is the peak less what
    is allocated after the run, so a moment that comes before them counts them as negative (they
    are charged once, in non-torch)."""

    name: str
    buffers: tuple[Buffer, ...]
    basis: str
    is_modelled: bool = True
    not_yet_live: tuple[Buffer, ...] = ()

    @cached_property
    def num_bytes(self) -> int:
        return sum(b.num_bytes for b in self.buffers) - sum(b.num_bytes for b in self.not_yet_live)

    @cached_property
    def live_bytes(self) -> int:
        """The moment's own tensors: torch's peak increase over the run where this moment sets it."""
        return sum(b.num_bytes for b in self.buffers)


@frozen
class ActivationEstimate:
    moments: tuple[Moment, ...]  # the moments that happen in this configuration
    skipped: tuple[tuple[str, str], ...]  # (moment, why it does not happen)

    @cached_property
    def peak(self) -> Moment | None:
        """The largest moment, or None when some moment that happens is not modelled."""
        if any(not m.is_modelled for m in self.moments):
            return None
        return max(self.moments, key=lambda m: m.num_bytes) if self.moments else None

    @property
    def unmodelled(self) -> list[str]:
        return [m.basis for m in self.moments if not m.is_modelled]


# Buffers a layout adds to the forward pass (hooks for new KV/state layouts): (config, settings) -> buffers.
FORWARD_EXTRAS: list[Callable[[ModelConfig, EngineSettings], list[Buffer]]] = []


def estimate_activation(
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    *,
    is_multimodal: bool,
    is_attention_free: bool,
    capability: tuple[int, int] = (9, 0),
    encoder: Moment | None = None,
    encoder_outputs: tuple[Buffer, ...] = (),
    encoder_unknown: str | None = None,
    layer_buffers: tuple[Buffer, ...] = (),
    kept_later: tuple[KeptAllocation, ...] = (),
    block_size: int = 64,
) -> ActivationEstimate:
    """`encoder` is plan/encoder.py's moment (None where no encoder runs), `encoder_outputs` what it
    leaves in the encoder cache, `encoder_unknown` why it is not modelled (the plan says so).
    `layer_buffers`: what the KV family's layers add to the dummy forward (what they allocate at
    construction is in the weights and cancels out of every moment: plan/memory.py family_buffers).
    `kept_later`: the run's persistent allocations and the moment each is first live at.
    `block_size`: the KV block size the backend settled on (MLA's context width is aligned to it)."""
    moments, skipped = [], []
    text_only = not is_multimodal or settings.language_model_only or (encoder is None and encoder_unknown is None)
    compile_reason = _compile_skip_reason(settings, text_only)
    if compile_reason:
        skipped.append(("compile transient", compile_reason))
    else:
        moments.append(compile_transient(config, settings))
    forward = forward_pass(config, settings, is_attention_free, block_size)
    forward = Moment(forward.name, forward.buffers + layer_buffers, forward.basis, forward.is_modelled)
    moments.append(_carrying(forward, encoder_outputs))
    moments.append(_carrying(sampler(config, settings, facts, capability), encoder_outputs))
    if encoder is not None:
        moments.append(encoder)
    elif encoder_unknown is not None:
        moments.append(Moment("vision encoder", (), encoder_unknown, is_modelled=False))
    moments = [_less_kept(m, kept_later) for m in moments]
    return ActivationEstimate(tuple(moments), tuple(skipped))


# The order of profile_run's moments (model_runner.py profile_run: the encoder, then the first
# forward, which compiles before any kernel runs, then the sampler).
MOMENT_ORDER = ("vision encoder", "compile transient", "forward pass", "sampler")


@frozen
class KeptAllocation:
    """A persistent allocation made inside profile_run: first live at moment `first_live`."""

    name: str
    num_bytes: int
    first_live: str  # a MOMENT_ORDER name


def _less_kept(moment: Moment, kept: tuple[KeptAllocation, ...]) -> Moment:
    if moment.name not in MOMENT_ORDER:
        return moment
    at = MOMENT_ORDER.index(moment.name)
    later = tuple(
        Buffer(f"{k.name} (allocated later in the run, kept: charged in non-torch)", (k.num_bytes,), 1)
        for k in kept
        if k.num_bytes and MOMENT_ORDER.index(k.first_live) > at
    )
    if not later:
        return moment
    return Moment(moment.name, moment.buffers, moment.basis, moment.is_modelled, later)


def _carrying(moment: Moment, kept: tuple[Buffer, ...]) -> Moment:
    if not kept:
        return moment
    return Moment(moment.name, moment.buffers + kept, moment.basis + "; plus the encoder outputs it still holds")


def _compile_skip_reason(settings: EngineSettings, text_only: bool) -> str | None:
    if settings.enforce_eager:
        return "--enforce-eager: no torch.compile, so no inductor benchmarking"
    if not text_only:
        # V2 model_states/default.py prepare_dummy_inputs feeds inputs_embeds from a persistent
        # buffer for multimodal models, so the embedding table is not a compiled-graph input.
        return "multimodal model: the dummy run feeds pre-built embeddings (--language-model-only restores it)"
    if settings.tensor_parallel_size > 1:
        # vocab_parallel_embedding.py: use_fused_embedding when tp > 1 on CUDA routes the lookup to
        # a custom op (an extern kernel), which inductor does not benchmark with random inputs.
        return "tensor parallel: the embedding runs as vLLM's fused custom op, outside inductor's benchmark"
    return None


def compile_transient(config: ModelConfig, settings: EngineSettings) -> Moment:
    """config/compilation.py turns on inductor combo_kernels with benchmark_combo_kernel; torch's
    codegen_kernel_benchmark get_args() then allocates rand_strided copies of each kernel argument.
    The first fused kernel reads the embedding table and writes token embeddings and the first
    RMSNorm output. Two [T, H] outputs is an observation, not a reading of the source: it matches
    the measured peak of 16 of 17 training boots to 0.01 GiB (gemma-2 fits one output as well)."""
    dsz = DTYPE_BYTES[settings.dtype]
    tokens, hidden = settings.max_num_batched_tokens, config.hidden_size
    return Moment(
        "compile transient",
        (
            Buffer("random copy of the embedding table", (pad_to(config.vocab_size, 64), hidden), dsz),
            Buffer("embedding output", (tokens, hidden), dsz),
            Buffer("first RMSNorm output", (tokens, hidden), dsz),
        ),
        "inductor benchmarks the first fused kernel on random copies of its arguments during the cold "
        "compile (vLLM turns benchmark_combo_kernel on: config/compilation.py 0.29.0:985-993, 0.33.0:988-1002); "
        "gone with a warm compile cache",
    )


def forward_pass(
    config: ModelConfig, settings: EngineSettings, is_attention_free: bool, block_size: int = 64
) -> Moment:
    """The dummy forward over max_num_batched_tokens (V2: skip_attn=True, attention output still
    allocated). Inductor frees buffers at their last use; the largest live set is at the MLP
    activation: residual, hidden, gate_up output and the activation output (shapes per rank)."""
    dsz = DTYPE_BYTES[settings.dtype]
    tokens, hidden, tp = settings.max_num_batched_tokens, config.hidden_size, settings.tensor_parallel_size
    buffers = [Buffer("residual", (tokens, hidden), dsz), Buffer("hidden states", (tokens, hidden), dsz)]
    if is_attention_free:
        inner = int(config.get("intermediate_size") or 2 * hidden) // tp
        buffers += [
            Buffer("mixer in_proj output", (tokens, 2 * inner), dsz),
            Buffer("mixer output", (tokens, inner), dsz),
        ]
        return Moment("forward pass", tuple(buffers), "state-space mixer over max_num_batched_tokens")
    buffers += _mlp_buffers(config, tokens, dsz, tp)
    if config.is_mla:
        buffers.append(_mla_context(config, settings, dsz, block_size))
    for extra in FORWARD_EXTRAS:
        buffers += extra(config, settings)
    return Moment(
        "forward pass",
        tuple(buffers),
        "dummy forward over max_num_batched_tokens (model_runner.py _dummy_run(T, skip_attn=True), "
        "0.29.0:695-790, 0.33.0:839-990)",
    )


def _mlp_buffers(config: ModelConfig, tokens: int, dsz: int, tp: int) -> list[Buffer]:
    dense_inter = config.intermediate_size // tp
    if not config.is_moe:
        return [
            Buffer("MLP gate_up output", (tokens, 2 * dense_inter), dsz),
            Buffer("MLP activation output", (tokens, dense_inter), dsz),
        ]
    experts, topk = config.num_experts, max(config.num_experts_per_tok, 1)
    shared = int(config.get("n_shared_experts") or 0) * config.moe_intermediate_size
    shared = (shared or int(config.get("shared_expert_intermediate_size") or 0)) // tp
    moe = [
        Buffer("router logits", (tokens, experts), 4),
        Buffer("top-k weights", (tokens, topk), 4),
        Buffer("top-k ids", (tokens, topk), 4),
    ]
    if shared:
        moe += [
            Buffer("shared expert gate_up output", (tokens, 2 * shared), dsz),
            Buffer("shared expert activation output", (tokens, shared), dsz),
        ]
    dense_layers = int(config.get("first_k_dense_replace") or 0)
    if dense_layers and dense_inter:
        dense = [
            Buffer("dense MLP gate_up output", (tokens, 2 * dense_inter), dsz),
            Buffer("dense MLP activation output", (tokens, dense_inter), dsz),
        ]
        return max(moe, dense, key=lambda bs: sum(b.num_bytes for b in bs))
    return moe


def _mla_context(config: ModelConfig, settings: EngineSettings, dsz: int, block: int) -> Buffer:
    """mla_attention.py (0.29.0:779-791, 0.33.0:935-946): with no attention metadata (profiling) the
    layer allocates the worst-case kv_b_proj context up-projection [W, heads, qk_nope + v]; W from
    determine_chunked_prefill_workspace_size (0.29.0:2158-2181), min(max(8 L, 4 S B), 65536) aligned to
    B, the block size the backend chosen on this GPU settles on after load (update_block_size_for_backend:
    16 for FLASH_ATTN_MLA and TRITON_MLA, 64 for FlashMLA, 32 for FlashInfer-MLA)."""
    width = max(min(max(8 * settings.max_model_len, 4 * settings.max_num_seqs * block), 65536), block)
    width = pad_to(width, block)
    heads = config.num_heads // settings.tensor_parallel_size
    per_head = int(config.get("qk_nope_head_dim") or 0) + int(config.get("v_head_dim") or 0)
    return Buffer("MLA context up-projection", (width, heads, per_head), dsz)


def sampler(config: ModelConfig, settings: EngineSettings, facts: EngineFacts, capability: tuple[int, int]) -> Moment:
    """V2 _dummy_sampler_run over R = min(T, max_num_seqs) rows (model_runner.py 0.29.0:832-843,
    0.33.0:993-1016), while profile_run still holds hidden_states [T, H] and the sampled rows [R, H].
    compute_logits projects in the model dtype onto the padded vocabulary (the slice to the real
    vocabulary is a view); under tensor parallelism the all-gather output and its reordered copy are
    full [R, Vp] tensors (device_communicators/base_device_communicator.py all_gather). Soft-capping
    (logits_processor.py: /cap, tanh, *cap) makes one [R, V] temporary at a time.
    0.33 adds a second pass with SamplingParams.for_sampler_warmup(): an fp32 copy of the logits
    (sample/sampler.py 0.33.0:242), then FlashInfer's top_k_mask_logits (an fp32 [R, V] empty_like)
    and softmax (fp32 [R, V]) - flashinfer 0.7.2.post1 sampling.py top_k_top_p_sampling_from_logits,
    whose top-k-first fast path needs an int k and vLLM passes a tensor."""
    rows = min(settings.max_num_batched_tokens, settings.max_num_seqs)
    dsz = DTYPE_BYTES[settings.dtype]
    tp, vocab = settings.tensor_parallel_size, config.vocab_size
    padded = pad_to(vocab, 64 * tp)
    held = [
        Buffer("hidden states of the dummy forward", (settings.max_num_batched_tokens, config.hidden_size), dsz),
        Buffer("sampled rows' hidden states", (rows, config.hidden_size), dsz),
        Buffer("logits (model dtype, padded vocabulary)", (rows, padded // tp), dsz),
    ]
    if tp > 1:
        held += [
            Buffer("all-gathered logits", (rows, padded), dsz),
            Buffer("logits reordered after the all-gather", (rows, padded), dsz),
        ]
    first = list(held)
    if config.get("final_logit_softcapping"):
        first.append(Buffer("soft-capping temporary", (rows, vocab), dsz))
    basis = "dummy sampler run over min(max_num_batched_tokens, max_num_seqs) rows"
    if not facts.at_least("0.33.0"):
        return Moment("sampler", tuple(first), basis)
    second = held + [Buffer("fp32 logits (sampler warm-up pass)", (rows, vocab), 4)]
    if (8, 0) <= capability < (13, 0):
        # flashinfer_sampler_supported(): CUDA, FlashInfer's capability range, more than 16 SMs (every
        # GPU in the catalog from cc 8.0 has more).
        second += [
            Buffer("FlashInfer top-k masked logits (fp32)", (rows, vocab), 4),
            Buffer("FlashInfer softmax probabilities (fp32)", (rows, vocab), 4),
        ]
        basis += "; 0.33's warm-up pass: fp32 copy, FlashInfer top-k mask and softmax"
    else:
        basis += "; 0.33's warm-up pass: fp32 copy, processed in place (no FlashInfer sampler below cc 8.0)"
    chosen = first if _total(first) > _total(second) else second
    return Moment("sampler", tuple(chosen), basis)


def _total(buffers: list[Buffer]) -> int:
    return sum(b.num_bytes for b in buffers)
