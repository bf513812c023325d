"""The KV half of the plan: requested memory, start-up terms, the KV budget, blocks and tokens.

available_kv = ceil(total x util) - weights - non-torch - activation peak - CUDA-graph estimate
(v1/worker/gpu_worker.py determine_available_memory), then vLLM's own block planner over it.
"""

from __future__ import annotations

import math

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.frozen import cached_property, field, frozen
from apron.hardware import Gpu
from apron.plan import overheads, ranges
from apron.plan.activation import ActivationEstimate, Buffer, KeptAllocation, estimate_activation
from apron.plan.graphs import cudagraph_estimate
from apron.plan.kv.layouts import KVLayout, build_layout
from apron.plan.kv.planning import KVPlan, NotModelled, plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Label, Problem, ProblemKind, Quantity
from apron.plan.settings import EngineSettings
from apron.plan.weights import (
    WeightsEstimate,
    dsv4_mxfp4_backend,
    is_dsv4_fp4,
    is_host_table,
    is_tied,
    mxfp4_backend,
    pad_to,
)

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:  # a MoE, calibrated or multimodal plan's only: imported where they are used
    from typing import Any

    from apron.plan import moe
    from apron.plan.calibration import GroupCalibration
    from apron.plan.encoder import EncoderProfile

GIB = 2**30


@frozen
class MemoryPlan:
    quantities: dict[str, Quantity]
    verdict: str
    problems: tuple[Problem, ...] = ()
    unknowns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    weights_range: ranges.Spread | None = None  # the weights' stated range (plan/ranges.py)
    weights: WeightsEstimate | None = None  # the weights as vLLM logs them, construction buffers included


def requested_bytes(gpu: Gpu, utilization: float) -> int:
    """v1/worker/utils.py request_memory: ceil(total x gpu_memory_utilization)."""
    return math.ceil(gpu.total_bytes * utilization)


@frozen
class _Traits:
    is_multimodal: bool
    is_attention_free: bool


def model_traits(checkpoint: Checkpoint, config: ModelConfig, facts: EngineFacts) -> _Traits:
    entry = facts.architecture(checkpoint.architecture) or {}
    multimodal = entry.get("supports_multimodal")
    if multimodal is None:
        multimodal = entry.get("category") == "_MULTIMODAL_MODELS" or config.is_multimodal_config
    return _Traits(bool(multimodal), bool(entry.get("is_attention_free")))


def _layout(
    checkpoint: Checkpoint,
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    capability: tuple[int, int],
    is_attention_free: bool,
) -> KVLayout:
    """build_layout, kept per checkpoint for the same inputs: fit plans one model on many GPUs and
    settings, and GPUs of one capability share the layout (it is a frozen value). The config and
    facts objects are kept beside it, so a different object never takes another's entry."""
    cache: dict[tuple[object, ...], tuple[ModelConfig, EngineFacts, KVLayout]]
    cache = checkpoint.extra.setdefault("_kv_layouts", {})
    key = (id(config), id(facts), settings, capability, is_attention_free)
    hit = cache.get(key)
    if hit is not None and hit[0] is config and hit[1] is facts:
        return hit[2]
    layout = build_layout(
        checkpoint.architecture, config, settings, facts, capability=capability, is_attention_free=is_attention_free
    )
    cache[key] = (config, facts, layout)
    return layout


def plan_memory(
    checkpoint: Checkpoint,
    config: ModelConfig,
    gpu: Gpu,
    facts: EngineFacts,
    settings: EngineSettings,
    weights: WeightsEstimate,
    calibration: GroupCalibration | None = None,
) -> MemoryPlan:
    """`calibration`: factors on the observed components (plan/calibration.py); None, the default, is none."""
    traits = model_traits(checkpoint, config, facts)
    requested = requested_bytes(gpu, settings.gpu_memory_utilization)
    layout = _layout(checkpoint, config, settings, facts, gpu.compute_capability, traits.is_attention_free)
    encoder = _encoder(checkpoint, config, settings, facts, gpu, traits.is_multimodal)
    moe_backend, moe_ws, moe_buffers = moe_terms(config, settings, gpu, facts.version)
    refusals = list(layout.refusals)  # the engine refuses at start-up: the KV layout's kernels, the MoE oracle
    if moe_backend is not None and moe_backend.refusal:
        refusals.append(("quantization_capability", moe_backend.refusal))
    kinds = ranges.layer_traits(
        is_moe=config.is_moe,
        is_mla=config.is_mla,
        has_state=layout.has_state,
        has_sliding=any(spec.kind == "sliding" for _, spec in layout.specs),
        is_attention_free=layout.is_attention_free,
    )
    forward_buffers, construction, workspace = family_buffers(layout, moe_ws)
    forward_buffers += moe_buffers
    workspace = max(workspace, triton_mla_reservation(config, settings, facts, layout.backend.backend.name))
    reserved, globals_ = sm100_mla_reservations(config, gpu)
    workspace = workspace_after_load(facts, reserved, workspace)
    weights = weights.with_buffers(construction + globals_ + reserved_buffer(reserved))
    is_quantized = config.quant_method not in (None, "mxfp4", "gpt_oss_mxfp4")
    activation = estimate_activation(
        config,
        settings,
        facts,
        is_multimodal=traits.is_multimodal,
        is_attention_free=layout.is_attention_free,
        capability=gpu.compute_capability,
        encoder=encoder.moment if encoder else None,
        encoder_outputs=encoder.kept if encoder else (),
        encoder_unknown=encoder.unknown if encoder else None,
        layer_buffers=forward_buffers,
        kept_later=kept_allocations(facts, gpu, workspace, is_quantized=is_quantized, has_encoder=encoder is not None),
        block_size=layout.block_size,
    )
    non_torch = overheads.non_torch(
        config,
        settings,
        facts,
        overheads.NonTorchInputs(
            capability=gpu.compute_capability,
            is_tied=is_tied(checkpoint, config),
            # quantization/mxfp4.py get_quant_method: MXFP4 covers the experts; linear layers stay
            # unquantized (cuBLAS), so only other methods change where the first GEMM runs
            is_quantized=is_quantized,
            moe_workspace_bytes=workspace,
            traits=kinds,
            has_compile_copy=any(m.name == "compile transient" for m in activation.moments),
            param_bytes=weights.param_bytes,
            multimodal_buffers=_multimodal_buffers(encoder),
        ),
    )
    graphs = cudagraph_estimate(
        config,
        settings,
        overheads.GraphInputs(
            backend=layout.backend.backend.name,
            capability=gpu.compute_capability,
            has_one_window_config=_has_one_window_config(config),
            traits=kinds,
            num_state_layers=sum(1 for _, spec in layout.specs if spec.kind == "mamba"),
            is_attention_free=layout.is_attention_free,
            is_moe_monolithic=moe_backend is not None and moe_backend.is_monolithic,
        ),
    )
    if calibration is not None:
        from apron.plan.calibration import scale_components  # `--calibration FILE` only

        non_torch = overheads.Overhead(scale_components(non_torch.components, "non_torch_bytes", calibration))
        graphs = overheads.Overhead(scale_components(graphs.components, "cudagraph_bytes", calibration))
    peak_range = None
    if activation.peak is not None:
        sizes = tuple((m.name, m.num_bytes) for m in activation.moments)
        peak_range = ranges.peak_spread(sizes, gpu.compute_capability, kinds)
    weights_range = ranges.weights_spread(
        weights.bytes_per_gpu, config.quant_method, len(weights.unknown_layout_tensors), weights.observed_bytes
    )
    budget = _Budget(requested, weights, activation, non_torch, graphs, weights_range, peak_range)
    kv, kv_unknown = _plan_kv(layout, budget, settings)
    plan = _assemble(budget, layout, refusals, kv, kv_unknown, settings, gpu, checkpoint)
    if encoder is not None:
        plan.details["encoder"] = _encoder_details(encoder)
    return plan


def _encoder(
    checkpoint: Checkpoint,
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    gpu: Gpu,
    is_multimodal: bool,
) -> EncoderProfile | None:
    if not is_multimodal:
        return None
    from apron.plan.encoder import estimate_encoder  # a multimodal model's only: most plans never import it

    return estimate_encoder(
        checkpoint.architecture,
        config,
        settings,
        facts,
        checkpoint.processor_configs,
        gpu_total_bytes=gpu.total_bytes,
    )


def _multimodal_buffers(encoder: EncoderProfile | None) -> tuple[tuple[str, int, str], ...]:
    """The persistent buffers only a multimodal runner allocates, each with where it comes from."""
    if encoder is None:
        return ()
    from apron.plan.encoder import RUNNER_BUFFER_SOURCES

    return tuple((b.name, b.num_bytes, RUNNER_BUFFER_SOURCES[b.name]) for b in encoder.persistent)


def _has_one_window_config(config: ModelConfig) -> bool:
    """flash_attn.py _get_sliding_window_configs: the AOT scheduler needs one window for all layers."""
    kinds = {t for t in config.layer_types or [] if t.endswith("attention") and t != "linear_attention"}
    return len(kinds) <= 1


def _encoder_details(encoder: EncoderProfile) -> dict[str, Any]:
    return {
        "family": encoder.family,
        "batch": encoder.batch,
        "skipped": encoder.skipped,
        "unknown": encoder.unknown,
        "held_outputs_bytes": sum(b.num_bytes for b in encoder.kept),
        "persistent": [{"name": b.name, "shape": list(b.shape), "bytes": b.num_bytes} for b in encoder.persistent],
    }


def family_buffers(
    layout: KVLayout, moe_workspace: int
) -> tuple[tuple[Buffer, ...], tuple[tuple[str, int, int], ...], int]:
    """The KV family's profiling buffers: (dummy-forward tensors, model-construction buffers as
    (name, bytes of one, how many) for WeightsEstimate.with_buffers, the workspace manager's buffer). Construction buffers are allocated inside load_model, so vLLM
    counts them with the weights and they cancel out of the transient (peak less allocated after
    the run). vLLM's workspace manager keeps one buffer sized to its largest request
    (v1/worker/workspace.py), persistent past the run: the larger of the MoE workspace and the
    family's own requests, charged once in non-torch."""
    forward = tuple(Buffer(b.name, b.shape, b.dtype_bytes) for b in layout.buffers if b.when == "forward")
    construction = tuple((b.name, b.each_bytes, b.count) for b in layout.buffers if b.when == "persistent")
    workspace = max((b.num_bytes for b in layout.buffers if b.when == "workspace"), default=0)
    return forward, construction, max(workspace, moe_workspace)


# envs.py VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (0.29.0:219): what an MLA prefill backend reserves.
MLA_PREFILL_RESERVATION_BYTES = 394 * 2**20
# v1/attention/backends/mla/cutlass_mla.py (0.29.0-0.33.0:99): g_sm100_workspace, 128 MiB at import.
CUTLASS_MLA_GLOBAL_BYTES = 128 * 2**20


def sm100_mla_reservations(config: ModelConfig, gpu: Gpu) -> tuple[int, tuple[tuple[str, int, int], ...]]:
    """What MLA layers take at construction on SM100: (workspace-manager reservation, module globals).
    The prefill backend for GLM-4.7-style heads (qk_nope 192, rope 64, v 256) is TRT-LLM ragged, which
    reserves 394 MiB in the workspace manager in its __init__ (mla/prefill/trtllm_ragged.py
    0.29.0:79, 0.33.0:100; selector: v1/attention/backends/mla/prefill/selector.py 0.29.0); other heads
    take FlashAttention. Validating the SM100 MLA backends imports cutlass_mla.py, whose module global
    is 128 MiB (platforms/cuda.py 0.33.0:398-401; that the import falls in load_model is an inference)."""
    if not config.is_mla or gpu.compute_capability[0] != 10:
        return 0, ()
    dims = tuple(int(config.get(k) or 0) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    reserved = MLA_PREFILL_RESERVATION_BYTES if dims == (192, 64, 256) else 0
    return reserved, (("CUTLASS-MLA module workspace (import)", CUTLASS_MLA_GLOBAL_BYTES, 1),)


def triton_mla_reservation(config: ModelConfig, settings: EngineSettings, facts: EngineFacts, backend: str) -> int:
    """0.33's TRITON_MLA reserves its split-KV logits in the workspace manager inside the profile
    forward, "so the KV cache is sized around it" (v1/attention/backends/mla/triton_mla.py
    0.33.0:234-243, 55-71): fp32 [max_num_seqs, heads, splits, kv_lora_rank + 1] with splits =
    next_pow2(max_model_len // 512), which vLLM caps at 2 x the GPU's SMs; the catalog has no SM
    count, so the cap is left out (an upper bound, binding only past 2 x SMs x 512 tokens). Before
    0.33 the builder reserves it after profiling: slack, not budget."""
    if backend != "TRITON_MLA" or not config.is_mla or not facts.at_least("0.33.0"):
        return 0
    splits = 1 << max(settings.max_model_len // 512 - 1, 0).bit_length()
    heads = max(config.num_heads // settings.tensor_parallel_size, 1)
    return settings.max_num_seqs * heads * splits * ((config.kv_lora_rank or 0) + 1) * 4


def reserved_buffer(reserved: int) -> tuple[tuple[str, int, int], ...]:
    return (("MLA prefill workspace reservation", reserved, 1),) if reserved else ()


def workspace_after_load(facts: EngineFacts, reserved: int, final: int) -> int:
    """The workspace manager's bytes charged outside the weights when a construction-time reservation
    (RESERVED, inside the weights) came first. Before 0.33 the reserving backends keep a view of the
    buffer, so a larger request later (the MoE layer) allocates a new one beside it ("a retained view
    would pin the old buffer when another user grows the shared workspace", prefill/trtllm_ragged.py
    0.33.0:97); from 0.33 the old one is freed and only the growth stays."""
    if not reserved or final <= reserved:
        return 0 if reserved else final
    return final if not facts.at_least("0.33.0") else final - reserved


def kept_allocations(
    facts: EngineFacts, gpu: Gpu, workspace_bytes: int, *, is_quantized: bool, has_encoder: bool
) -> tuple[KeptAllocation, ...]:
    """The persistent allocations profile_run makes, and the moment each is first live at: the
    default stream's cuBLAS workspace at the first cuBLAS GEMM (vLLM < 0.33; 0.33 makes it before
    the snapshot, gpu_worker.py 0.33.0:519-530): in the vision encoder where one runs, else the
    forward's first linear layer, or with quantized linear layers the unquantized lm_head in the
    sampler; the workspace manager's buffer at the first layer that asks for it (the forward)."""
    kept = []
    if not facts.at_least("0.33.0"):
        first = "vision encoder" if has_encoder else "sampler" if is_quantized else "forward pass"
        kept.append(
            KeptAllocation("cuBLAS workspace", overheads.cublas_workspace(gpu.compute_capability).num_bytes, first)
        )
    if workspace_bytes:
        kept.append(KeptAllocation("workspace manager buffer", workspace_bytes, "forward pass"))
    return tuple(kept)


def moe_terms(
    config: ModelConfig, settings: EngineSettings, gpu: Gpu, release: str = "0.33.0"
) -> tuple[moe.MoEBackend | None, int, tuple[Buffer, ...]]:
    """The fused-MoE kernel vLLM picks on this GPU (plan/moe.py), its workspace-manager bytes, and
    the intermediates a monolithic kernel allocates inside the forward."""
    if not config.is_moe:
        return None, 0, ()
    from apron.plan import moe  # a dense model's plan never imports the MoE kernel oracle

    backend = moe.choose_backend(
        config,
        gpu.compute_capability,
        release,
        env=settings.user.env_dict,
        tensor_parallel_size=settings.tensor_parallel_size,
    )
    dims = None
    aligns = None
    if config.quant_method in ("mxfp4", "gpt_oss_mxfp4"):
        _, *aligns = mxfp4_backend(gpu.compute_capability)
    elif is_dsv4_fp4(config):
        _, *aligns = dsv4_mxfp4_backend(gpu.compute_capability, release)
    if aligns:
        per_rank = config.moe_intermediate_size // settings.tensor_parallel_size
        dims = (pad_to(per_rank, aligns[0]), pad_to(config.hidden_size, aligns[1]))
    workspace = moe.workspace_bytes(config, settings, backend, mxfp4_dims=dims, release=release)
    return backend, workspace, moe.monolithic_buffers(config, settings, backend)


@frozen
class _Budget:
    requested: int
    weights: WeightsEstimate
    activation: ActivationEstimate
    non_torch: overheads.Overhead
    graphs: overheads.Overhead
    weights_range: ranges.Spread
    peak_range: ranges.Spread | None

    @property
    def peak_bytes(self) -> int | None:
        peak = self.activation.peak
        return None if peak is None else peak.num_bytes

    @property
    def available(self) -> int | None:
        if self.peak_bytes is None:
            return None
        return (
            self.requested
            - self.weights.bytes_per_gpu
            - self.non_torch.num_bytes
            - self.peak_bytes
            - self.graphs.num_bytes
        )

    def term_ranges(self) -> dict[str, tuple[int, int]] | None:
        """Each subtracted term's (low, high): its components' ranges, and for a predicted term
        half a log step on each side (ranges.RESOLUTION_BYTES); None while the peak is unknown.
        Worked out once per budget (a plan reads it for both ends of the KV range and its basis)."""
        return self._term_ranges

    @cached_property
    def _term_ranges(self) -> dict[str, tuple[int, int]] | None:
        if self.peak_range is None:
            return None
        raw = {
            "weights_bytes_per_gpu": (self.weights_range.low_bytes, self.weights_range.high_bytes),
            "non_torch_bytes": (self.non_torch.low_bytes, self.non_torch.high_bytes),
            "activation_peak_bytes": (self.peak_range.low_bytes, self.peak_range.high_bytes),
            "cudagraph_bytes": (self.graphs.low_bytes, self.graphs.high_bytes),
        }
        step = ranges.RESOLUTION_BYTES
        return {name: (max(lo - step, 0), hi + step) if hi else (lo, hi) for name, (lo, hi) in raw.items()}

    @property
    def available_low(self) -> int | None:
        """Every subtracted term at its high end."""
        terms = self.term_ranges()
        return None if terms is None else self.requested - sum(hi for _, hi in terms.values())

    @property
    def available_high(self) -> int | None:
        terms = self.term_ranges()
        return None if terms is None else self.requested - sum(lo for lo, _ in terms.values())


def _plan_kv(layout: KVLayout, budget: _Budget, settings: EngineSettings) -> tuple[KVPlan | None, list[str]]:
    unknown = list(layout.unknowns)
    available = budget.available
    if available is None:
        unknown += budget.activation.unmodelled or [
            "the KV budget depends on an activation moment that is not modelled"
        ]
    if unknown or available is None:
        return None, unknown
    try:
        return kv_at(layout, available, settings), []
    except NotModelled as exc:
        return None, [f"KV grouping not modelled: {exc}"]


def kv_at(layout: KVLayout, available_bytes: int, settings: EngineSettings, like: KVPlan | None = None) -> KVPlan:
    """vLLM's block planner over AVAILABLE_BYTES (the central budget or an end of its range; LIKE, the
    central plan, lends the ends its groups)."""
    ctx = SchedulingContext(
        max_model_len=settings.max_model_len,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        mamba_cache_mode=layout.mamba_cache_mode,
    )
    return plan_kv(
        dict(layout.specs),
        available_bytes,
        ctx,
        block_outermost=layout.block_outermost,
        grouping=layout.grouping,
        like=like or layout.kv_grouping,
    )


@frozen
class KVRange:
    """The block planner at the two ends of the budget's range."""

    low: KVPlan
    high: KVPlan


def _kv_range(layout: KVLayout, budget: _Budget, settings: EngineSettings, kv: KVPlan | None) -> KVRange | None:
    low, high = budget.available_low, budget.available_high
    if kv is None or low is None or high is None:
        return None
    return KVRange(kv_at(layout, low, settings, kv), kv_at(layout, high, settings, kv))


def _assemble(
    budget: _Budget,
    layout: KVLayout,
    refusals: list[tuple[ProblemKind, str]],
    kv: KVPlan | None,
    kv_unknown: list[str],
    settings: EngineSettings,
    gpu: Gpu,
    checkpoint: Checkpoint,
) -> MemoryPlan:
    q: dict[str, Quantity] = {}
    problems = [Problem(kind, message, "proven_constraint") for kind, message in refusals]
    flags: list[str] = []
    terms = budget.term_ranges() or {}
    peak = budget.activation.peak
    if peak is None:
        q["activation_peak_bytes"] = Quantity.unknown("bytes", "; ".join(budget.activation.unmodelled))
    else:
        q["activation_peak_bytes"] = _ranged(
            peak.num_bytes, "predicted", f"{peak.name}: {peak.basis}", terms.get("activation_peak_bytes")
        )
    graphs = budget.graphs
    graph_label: Label = "derived" if graphs.num_bytes == 0 else "predicted"
    q["cudagraph_bytes"] = _ranged(graphs.num_bytes, graph_label, graphs.basis, terms.get("cudagraph_bytes"))
    q["non_torch_bytes"] = _ranged(
        budget.non_torch.num_bytes, "predicted", budget.non_torch.basis, terms.get("non_torch_bytes")
    )
    q["requested_bytes"] = Quantity(
        budget.requested, "bytes", "derived", f"ceil({gpu.total_bytes:,} x {settings.gpu_memory_utilization})"
    )
    available = budget.available
    if available is None:
        q["available_kv_bytes"] = Quantity.unknown("bytes", "activation peak not modelled")
    else:
        q["available_kv_bytes"] = Quantity(
            available,
            "bytes",
            "predicted",
            "requested - weights - non-torch - activation peak - CUDA graphs; the range takes every term at "
            "its other end (docs/memory.md section 7)",
            budget.available_low,
            budget.available_high,
        )
    kv_range = _kv_range(layout, budget, settings, kv)
    q.update(kv_quantities(layout, kv, kv_unknown, settings, kv_range))
    verdict = _verdict_and_problems(budget, kv, kv_range, layout, settings, problems, flags)
    q["host_ram_bytes"] = host_ram(checkpoint, settings, layout, budget.weights.host_table_bytes)
    verdict = _host_ram_verdict(q["host_ram_bytes"], settings, problems, verdict)
    notes = list(layout.notes) + [f"attention backend {layout.backend.backend.name}: {layout.backend.reason}"]
    if peak is not None and peak.name == "compile transient":
        notes.append(
            f"the activation peak is the cold-compile transient ({peak.num_bytes / GIB:.2f} GiB); "
            "a warm torch.compile cache skips it and leaves that much more for the KV cache"
        )
    details = {
        "activation": _activation_details(budget.activation),
        "non_torch": [c.__dict__ for c in budget.non_torch.components],
        "cudagraphs": [c.__dict__ for c in budget.graphs.components],
        "kv": _kv_details(layout, kv),
    }
    return MemoryPlan(
        q,
        verdict,
        tuple(problems),
        tuple(kv_unknown),
        tuple(notes),
        tuple(flags),
        details,
        _stepped(budget.weights_range, terms.get("weights_bytes_per_gpu")),
        budget.weights,
    )


def _stepped(spread: ranges.Spread, term: tuple[int, int] | None) -> ranges.Spread:
    """The weights' range as the budget takes it (half a log step wider on each side)."""
    return spread if term is None else ranges.Spread(term[0], term[1], spread.note)


def _ranged(value: int, label: Label, basis: str, term: tuple[int, int] | None) -> Quantity:
    low, high = term if term is not None else (value, value)
    return Quantity(value, "bytes", label, basis, min(low, value), max(high, value))


def kv_quantities(
    layout: KVLayout,
    kv: KVPlan | None,
    unknown: list[str],
    settings: EngineSettings,
    kv_range: KVRange | None = None,
) -> dict[str, Quantity]:
    per_token = layout.kv_bytes_per_token if not layout.unknowns else None
    if layout.unknowns:
        token_q = Quantity.unknown("bytes", "; ".join(layout.unknowns))
    elif per_token is None:
        token_q = Quantity(
            None,
            "bytes",
            "derived",
            "no single per-token figure: sliding windows or "
            "fixed per-request state decide capacity, not tokens x bytes",
        )
    else:
        token_q = Quantity(
            per_token,
            "bytes",
            "derived",
            layout.layers_description,
        )
    if kv is None:
        why = "; ".join(unknown) or "not modelled"
        return {
            "kv_bytes_per_token": token_q,
            "kv_block_bytes": Quantity.unknown("bytes", why),
            "num_kv_blocks": Quantity.unknown("blocks", why),
            "kv_tokens": Quantity.unknown("tokens", why),
            "max_concurrency": Quantity.unknown("sequences", why),
        }
    groups = ", ".join(f"{len(g.layer_names)} x {g.spec.kind}" for g in kv.groups)
    return {
        "kv_bytes_per_token": token_q,
        "kv_block_bytes": Quantity(
            kv.bytes_per_block,
            "bytes",
            "derived",
            f"block size {layout.block_size}; {len(kv.groups)} groups ({groups}); largest group's pages",
        ),
        "num_kv_blocks": Quantity(
            kv.num_blocks, "blocks", "predicted", "available // bytes per block", *_ends(kv_range, "num_blocks")
        ),
        "kv_tokens": Quantity(
            kv.kv_tokens,
            "tokens",
            "predicted",
            "int(max_concurrency x max_model_len), as vLLM logs 'KV cache size'",
            *_ends(kv_range, "kv_tokens"),
        ),
        "max_concurrency": Quantity(
            round(kv.max_concurrency, 4),
            "sequences",
            "predicted",
            f"num_blocks / {kv.blocks_per_request} blocks per request at max_model_len {settings.max_model_len}",
            *_ends(kv_range, "max_concurrency"),
        ),
    }


def _ends(kv_range: KVRange | None, field_name: str) -> tuple[float | None, float | None]:
    """The block planner's FIELD at the low and high ends of the budget (None: no range)."""
    if kv_range is None:
        return None, None
    low, high = getattr(kv_range.low, field_name), getattr(kv_range.high, field_name)
    if field_name == "max_concurrency":
        return round(low, 4), round(high, 4)
    return low, high


def _verdict_and_problems(
    budget: _Budget,
    kv: KVPlan | None,
    kv_range: KVRange | None,
    layout: KVLayout,
    settings: EngineSettings,
    problems: list[Problem],
    flags: list[str],
) -> str:
    """fits: one request at max_model_len fits at the low end of the budget's range; tight: only
    above it (the fix names the setting that fits at the low end); does_not_fit: not even at the
    central estimate. Every setting suggested fits at the low end."""
    low = kv_range.low if kv_range is not None else kv
    raise_util = _utilization_that_fits(budget, low, settings)
    if budget.weights.bytes_per_gpu > budget.requested:
        problems.append(
            Problem(
                "weights_exceed_request",
                f"The weights need {budget.weights.bytes_per_gpu / GIB:.2f} "
                f"GiB per GPU but vLLM may use {budget.requested / GIB:.2f} GiB "
                f"(--gpu-memory-utilization {settings.gpu_memory_utilization}); "
                + (f"raise --gpu-memory-utilization to {raise_util}, or " if raise_util else "")
                + "raise --tp or use a quantized checkpoint",
                "predicted",
            )
        )
        return "does_not_fit"
    if kv is None or low is None:
        available = budget.available
        if available is not None and available <= 0:
            problems.append(_no_memory_problem(available, raise_util))
            return "does_not_fit"
        return "unknown"
    if kv.refusal:
        others = [f"raise --gpu-memory-utilization to {raise_util}"] if raise_util else []
        others += ["raise --tp", "use --kv-cache-dtype fp8 or a quantized checkpoint"]
        kv_refusal_problems(kv, settings, problems, others, low)
        if kv_range is not None and not kv_range.high.refusal:
            problems.append(_range_note(kv, kv_range, "at the high end of the range it would fit"))
        return "does_not_fit"
    if layout.has_state and settings.uses_cudagraphs and settings.max_num_seqs > low.num_blocks:
        _state_block_flag(kv, low, settings, problems, flags)
    if low.refusal:
        assert kv_range is not None  # a low end that differs from the central plan has a range
        problems.append(_range_note(kv, kv_range, "it fits at the central estimate, not at the low end"))
        _tight_fix(low, settings, problems, raise_util)
        return "tight"
    return "fits"


def _range_note(kv: KVPlan, kv_range: KVRange, what: str) -> Problem:
    low = kv_range.low.num_blocks * kv_range.low.bytes_per_block
    high = kv_range.high.num_blocks * kv_range.high.bytes_per_block
    return Problem(
        "tight",
        f"one request at max_model_len needs {one_request_bytes(kv) / GIB:.2f} GiB of KV cache and the "
        f"predicted budget is {kv.num_blocks * kv.bytes_per_block / GIB:.2f} GiB "
        f"({low / GIB:.2f}-{high / GIB:.2f}): {what}",
        "predicted",
    )


def _tight_fix(low: KVPlan, settings: EngineSettings, problems: list[Problem], raise_util: float | None) -> None:
    fitting = min(low.estimated_max_model_len or 0, settings.derived_max_model_len)
    options = [f"--max-model-len {fitting}"] if fitting > 0 else []
    options += [f"--gpu-memory-utilization {raise_util}"] if raise_util else []
    if options:
        text = " or ".join(options) + " fits at the low end of the range"
    else:
        text = "nothing below --gpu-memory-utilization 0.99 fits at the low end: raise --tp"
    problems.append(Problem("fix", text, "predicted"))


def kv_refusal_problems(
    kv: KVPlan, settings: EngineSettings, problems: list[Problem], others: list[str], low: KVPlan | None = None
) -> None:
    """The engine's refusal of a KV cache too small for one request, and the fix: the longest
    max_model_len that fits at the low end of the budget's range (LOW; never above the model's own
    limit), or OTHERS, what else makes room."""
    problems.append(Problem("kv_cache_too_small", kv.refusal or "", "predicted"))
    fitting = min((low or kv).estimated_max_model_len or 0, settings.derived_max_model_len)
    if fitting > 0:
        limit = " (the model's own limit)" if fitting == settings.derived_max_model_len else ""
        text = f"largest max_model_len that fits: --max-model-len {fitting}{limit}; or " + ", or ".join(others)
    else:
        text = "no max_model_len fits; " + ", or ".join(others)
    problems.append(Problem("fix", text, "predicted"))


def one_request_bytes(kv: KVPlan) -> int:
    """What _check_enough_kv_cache_memory needs: one request at max_model_len plus the null block."""
    return kv.bytes_per_block * (kv.blocks_per_request + 1)


def _utilization_that_fits(budget: _Budget, kv: KVPlan | None, settings: EngineSettings) -> float | None:
    """The --gpu-memory-utilization (two decimals, at most 0.99) whose request holds everything the
    plan predicts at the low end of its range plus one request's KV cache; None when nothing below 1
    would, when the plan fits already, or when it is unknown."""
    available = budget.available_low if budget.available_low is not None else budget.available
    if kv is None or available is None or kv.refusal is None and budget.weights.bytes_per_gpu <= budget.requested:
        return None
    total = budget.requested / settings.gpu_memory_utilization
    needed = budget.requested - available + one_request_bytes(kv)
    util = math.ceil(needed / total * 100) / 100
    return util if settings.gpu_memory_utilization < util <= 0.99 else None


# The error band `apron fit` kept before plans stated a range (plan/fit.py); plans use the range.
MARGIN_BYTES = GIB // 4


def _no_memory_problem(available: int, raise_util: float | None) -> Problem:
    fix = f"raise --gpu-memory-utilization to {raise_util}" if raise_util else "raise --tp"
    return Problem(
        "no_kv_memory",
        "No available memory for the cache blocks. Try increasing "
        f"`gpu_memory_utilization` when initializing the engine. (Predicted KV budget "
        f"{available / GIB:.2f} GiB: {fix}.)",
        "predicted",
    )


def _state_block_flag(
    kv: KVPlan, low: KVPlan, settings: EngineSettings, problems: list[Problem], flags: list[str]
) -> None:
    """config/compilation.py resolve_cudagraph_mode_and_sizes (0.29.0-0.32.0) refuses FULL graph
    capture when a hybrid's max_num_seqs exceeds its KV cache blocks (each decoding sequence holds a
    state block); the plan lowers max_num_seqs to the blocks at the low end of the budget's range
    (LOW), so the flag holds wherever in the range the engine lands."""
    if settings.max_num_seqs > kv.num_blocks:
        ends = f" ({low.num_blocks} at the low end of the range)" if low.num_blocks != kv.num_blocks else ""
        message = (
            f"max_num_seqs ({settings.max_num_seqs}) exceeds available Mamba cache blocks "
            f"({kv.num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA "
            f"graph capture cannot proceed. Please lower max_num_seqs to at most {kv.num_blocks} "
            f"or increase gpu_memory_utilization.{ends}"
        )
    else:
        message = (
            f"max_num_seqs ({settings.max_num_seqs}) is within the {kv.num_blocks} Mamba cache blocks of the "
            f"predicted KV budget but above the {low.num_blocks} at its low end: vLLM refuses CUDA graph capture "
            "when the state blocks fall short (each decode sequence requires one)"
        )
    problems.append(Problem("max_num_seqs_exceeds_state_blocks", message, "predicted"))
    flags.append(f"--max-num-seqs {max(low.num_blocks, 1)}")


def host_ram(checkpoint: Checkpoint, settings: EngineSettings, layout: KVLayout, table_bytes: int = 0) -> Quantity:
    """Host memory the boot needs: the V2 runner's pinned token table (gpu/states.py all_token_ids,
    int32 [max_num_seqs, max_model_len], UVA), one checkpoint shard read at a time while loading,
    and the n-gram tables vLLM keeps in pinned host memory (EngramConfig.cpu_offload, default on:
    DeepSeek-V4.1's Engram tables, Qwen3.8-Flash-Next's PLE n-gram embedding; the TP ranks of one
    replica hold one copy between them)."""
    pinned = 4 * settings.max_num_seqs * settings.max_model_len
    shards = dict(checkpoint.shard_bytes)
    if table_bytes:  # the tables go straight into their pinned copy; the rest of their shard is read
        for tensor in checkpoint.tensors:
            if is_host_table(tensor.name):
                shards[tensor.file] -= tensor.num_bytes
    largest = max(shards.values(), default=0)
    unmodelled = [
        k
        for k in ("ngram_vocab_size_ratio", "hidden_size_per_layer_input")
        if checkpoint.config.get(k) or (checkpoint.config.get("text_config") or {}).get(k)
    ]
    if unmodelled:
        return Quantity.unknown(
            "bytes", f"config names tables ({', '.join(unmodelled)}) whose host placement is not modelled"
        )
    tables = f" + pinned n-gram tables {table_bytes / GIB:.2f} GiB (from the headers)" if table_bytes else ""
    return Quantity(
        pinned + largest + table_bytes,
        "bytes",
        "predicted",
        f"pinned token table {pinned / GIB:.2f} GiB + largest shard {largest / GIB:.2f} GiB read "
        f"while loading{tables}; the Python processes themselves are not counted",
    )


def _host_ram_verdict(host: Quantity, settings: EngineSettings, problems: list[Problem], verdict: str) -> str:
    """--host-ram-bytes: a machine that cannot hold the host side does not fit."""
    limit = settings.user.host_ram_bytes
    if limit is None or host.value is None or host.value <= limit:
        return verdict
    problems.append(
        Problem(
            "host_ram_exceeded",
            f"the host needs {host.value / GIB:.1f} GiB of RAM ({host.basis}) but has "
            f"{limit / GIB:.1f} GiB (--host-ram-bytes); use a larger host, or keep the n-gram tables on "
            "the GPUs with --engram-config '{\"cpu_offload\": false}'",
            "predicted",
        )
    )
    return "does_not_fit"


def _activation_details(activation: ActivationEstimate) -> dict[str, Any]:
    """`bytes` is vLLM's transient for the moment (its live tensors less the run's later persistent
    allocations, `not_yet_live`); `live_bytes` what torch's peak increase over the run reads there."""
    peak = activation.peak
    return {
        "peak": peak.name if peak else None,
        "peak_live_bytes": peak.live_bytes if peak else None,
        "moments": [
            {
                "name": m.name,
                "bytes": m.num_bytes if m.is_modelled else None,
                "live_bytes": m.live_bytes if m.is_modelled else None,
                "basis": m.basis,
                "buffers": [{"name": b.name, "shape": list(b.shape), "bytes": b.num_bytes} for b in m.buffers],
                "not_yet_live": [{"name": b.name, "bytes": b.num_bytes} for b in m.not_yet_live],
            }
            for m in activation.moments
        ],
        "skipped": [list(s) for s in activation.skipped],
    }


def _kv_details(layout: KVLayout, kv: KVPlan | None) -> dict[str, Any]:
    out = {
        "backend": layout.backend.backend.name,
        "block_size": layout.block_size,
        "mamba_cache_mode": layout.mamba_cache_mode,
        "layers": dict(layout.layer_kinds),
        "engine_logs": list(layout.logs),
    }
    if kv is not None:
        out.update(
            {
                "groups": [len(g.layer_names) for g in kv.groups],
                "bytes_per_block": kv.bytes_per_block,
                "blocks_per_request": kv.blocks_per_request,
                "warnings": list(kv.warnings),
            }
        )
    return out
