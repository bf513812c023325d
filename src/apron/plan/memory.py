"""The KV half of the plan: requested memory, start-up terms, the KV budget, blocks and tokens.

available_kv = ceil(total x util) - weights - non-torch - activation peak - CUDA-graph estimate
(v1/worker/gpu_worker.py determine_available_memory), then vLLM's own block planner over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.hardware import Gpu
from apron.plan import overheads
from apron.plan.activation import ActivationEstimate, Buffer, estimate_activation
from apron.plan.calibration import GroupCalibration, scale_components
from apron.plan.encoder import RUNNER_BUFFER_SOURCES, EncoderProfile, estimate_encoder
from apron.plan.kv.layouts import KVLayout, build_layout
from apron.plan.kv.planning import KVPlan, NotModelled, bytes_per_token, num_blocks_for, plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Label, Problem, Quantity
from apron.plan.settings import EngineSettings
from apron.plan.weights import WeightsEstimate, is_host_table, is_tied, mxfp4_backend, pad_to

GIB = 2**30


@dataclass(frozen=True)
class MemoryPlan:
    quantities: dict[str, Quantity]
    verdict: str
    problems: tuple[Problem, ...] = ()
    unknowns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    weights: WeightsEstimate | None = None  # the estimate with the layers' construction-time buffers


def requested_bytes(gpu: Gpu, utilization: float) -> int:
    """v1/worker/utils.py request_memory: ceil(total x gpu_memory_utilization)."""
    return math.ceil(gpu.total_bytes * utilization)


@dataclass(frozen=True)
class _Traits:
    is_multimodal: bool
    is_attention_free: bool


def model_traits(checkpoint: Checkpoint, config: ModelConfig, facts: EngineFacts) -> _Traits:
    entry = facts.architecture(checkpoint.architecture) or {}
    multimodal = entry.get("supports_multimodal")
    if multimodal is None:
        multimodal = entry.get("category") == "_MULTIMODAL_MODELS" or config.is_multimodal_config
    return _Traits(bool(multimodal), bool(entry.get("is_attention_free")))


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
    layout = build_layout(
        checkpoint.architecture,
        config,
        settings,
        facts,
        capability=gpu.compute_capability,
        is_attention_free=traits.is_attention_free,
    )
    encoder = _encoder(checkpoint, config, settings, facts, gpu, traits.is_multimodal)
    moe_ws = overheads.moe_workspace_bytes(config, settings, mxfp4_backend=_mxfp4_backend(config, settings, gpu))
    forward_buffers, _ = family_buffers(layout, moe_ws)
    # made at model construction, inside load_model: vLLM counts them with the weights, not the peak
    weights = weights.with_buffers(
        tuple((b.name, b.each_bytes, b.count) for b in layout.buffers if b.when == "persistent")
    )
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
            is_quantized=config.quant_method not in (None, "mxfp4", "gpt_oss_mxfp4"),
            moe_workspace_bytes=moe_ws,
            has_compile_copy=any(m.name == "compile transient" for m in activation.moments),
            param_bytes=weights.param_bytes,
            multimodal_buffers=tuple(
                (b.name, b.num_bytes, RUNNER_BUFFER_SOURCES[b.name]) for b in (encoder.persistent if encoder else ())
            ),
        ),
    )
    graphs = overheads.cudagraph_estimate(
        config,
        settings,
        overheads.GraphInputs(
            backend=layout.backend.backend.name,
            capability=gpu.compute_capability,
            has_one_window_config=_has_one_window_config(config),
        ),
    )
    if calibration is not None:
        non_torch = overheads.Overhead(scale_components(non_torch.components, "non_torch_bytes", calibration))
        graphs = overheads.Overhead(scale_components(graphs.components, "cudagraph_bytes", calibration))
    budget = _Budget(requested, weights, activation, non_torch, graphs)
    kv, kv_unknown = _plan_kv(layout, budget, settings)
    plan = _assemble(budget, layout, kv, kv_unknown, settings, gpu, checkpoint)
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
    return estimate_encoder(
        checkpoint.architecture,
        config,
        settings,
        facts,
        checkpoint.processor_configs,
        gpu_total_bytes=gpu.total_bytes,
    )


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


def family_buffers(layout: KVLayout, moe_workspace: int) -> tuple[tuple[Buffer, ...], tuple[Buffer, ...]]:
    """The KV family's profiling buffers as activation tensors: (dummy-forward, persistent). vLLM's
    workspace manager keeps one buffer sized to its largest request (v1/worker/workspace.py), which
    the MoE workspace (in non-torch) already claims: only the growth beyond it is added."""
    forward = [Buffer(b.name, b.shape, b.dtype_bytes) for b in layout.buffers if b.when == "forward"]
    persistent = tuple(Buffer(b.name, b.shape, b.dtype_bytes) for b in layout.buffers if b.when == "persistent")
    workspace = max((b.num_bytes for b in layout.buffers if b.when == "workspace"), default=0)
    if workspace > moe_workspace:
        forward.append(Buffer("workspace growth beyond the MoE workspace", (workspace - moe_workspace,), 1))
    return tuple(forward), persistent


def _mxfp4_backend(config: ModelConfig, settings: EngineSettings, gpu: Gpu) -> tuple[str, tuple[int, int]] | None:
    if config.quant_method not in ("mxfp4", "gpt_oss_mxfp4"):
        return None
    backend, align_i, align_h = mxfp4_backend(gpu.compute_capability)
    per_rank = config.moe_intermediate_size // settings.tensor_parallel_size
    return backend, (pad_to(per_rank, align_i), pad_to(config.hidden_size, align_h))


@dataclass(frozen=True)
class _Budget:
    requested: int
    weights: WeightsEstimate
    activation: ActivationEstimate
    non_torch: overheads.Overhead
    graphs: overheads.Overhead

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


def _plan_kv(layout: KVLayout, budget: _Budget, settings: EngineSettings) -> tuple[KVPlan | None, list[str]]:
    unknown = list(layout.unknowns)
    available = budget.available
    if available is None:
        unknown += budget.activation.unmodelled or [
            "the KV budget depends on an activation moment that is not modelled"
        ]
    if unknown or available is None:
        return None, unknown
    ctx = SchedulingContext(
        max_model_len=settings.max_model_len,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        mamba_cache_mode=layout.mamba_cache_mode,
    )
    try:
        return (
            plan_kv(
                dict(layout.specs), available, ctx, block_outermost=layout.block_outermost, grouping=layout.grouping
            ),
            [],
        )
    except NotModelled as exc:
        return None, [f"KV grouping not modelled: {exc}"]


def _assemble(
    budget: _Budget,
    layout: KVLayout,
    kv: KVPlan | None,
    kv_unknown: list[str],
    settings: EngineSettings,
    gpu: Gpu,
    checkpoint: Checkpoint,
) -> MemoryPlan:
    q: dict[str, Quantity] = {}
    problems = [Problem(kind, message, "proven_constraint") for kind, message in layout.refusals]
    flags: list[str] = []
    peak = budget.activation.peak
    if peak is None:
        q["activation_peak_bytes"] = Quantity.unknown("bytes", "; ".join(budget.activation.unmodelled))
    else:
        q["activation_peak_bytes"] = Quantity(peak.num_bytes, "bytes", "predicted", f"{peak.name}: {peak.basis}")
    graphs = budget.graphs
    graph_label: Label = "derived" if graphs.num_bytes == 0 else "predicted"
    q["cudagraph_bytes"] = Quantity(graphs.num_bytes, "bytes", graph_label, graphs.basis)
    q["non_torch_bytes"] = Quantity(budget.non_torch.num_bytes, "bytes", "predicted", budget.non_torch.basis)
    q["requested_bytes"] = Quantity(
        budget.requested, "bytes", "derived", f"ceil({gpu.total_bytes:,} x {settings.gpu_memory_utilization})"
    )
    available = budget.available
    if available is None:
        q["available_kv_bytes"] = Quantity.unknown("bytes", "activation peak not modelled")
    else:
        q["available_kv_bytes"] = Quantity(
            available, "bytes", "predicted", "requested - weights - non-torch - activation peak - CUDA graphs"
        )
    q.update(kv_quantities(layout, kv, kv_unknown, settings))
    verdict = _verdict_and_problems(
        budget, kv, kv_unknown, layout, settings, problems, flags, low_end(q["available_kv_bytes"])
    )
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
        q, verdict, tuple(problems), tuple(kv_unknown), tuple(notes), tuple(flags), details, budget.weights
    )


def kv_quantities(
    layout: KVLayout, kv: KVPlan | None, unknown: list[str], settings: EngineSettings
) -> dict[str, Quantity]:
    specs = dict(layout.specs)
    per_token = bytes_per_token(specs) if not layout.unknowns else None
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
            _describe_layers(specs),
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
        "num_kv_blocks": Quantity(kv.num_blocks, "blocks", "predicted", "available // bytes per block"),
        "kv_tokens": Quantity(
            kv.kv_tokens, "tokens", "predicted", "int(max_concurrency x max_model_len), as vLLM logs 'KV cache size'"
        ),
        "max_concurrency": Quantity(
            round(kv.max_concurrency, 4),
            "sequences",
            "predicted",
            f"num_blocks / {kv.blocks_per_request} blocks per request at max_model_len {settings.max_model_len}",
        ),
    }


def _describe_layers(specs: dict[str, Any]) -> str:
    """Per-token basis in each cache's own terms (K and V for attention, one record for MLA)."""
    counts: dict[str, int] = {}
    for spec in specs.values():
        what = spec.describe()
        counts[what] = counts.get(what, 0) + 1
    return f"{len(specs)} layer caches: " + "; ".join(f"{n} x {what}" for what, n in counts.items())


def _verdict_and_problems(
    budget: _Budget,
    kv: KVPlan | None,
    unknown: list[str],
    layout: KVLayout,
    settings: EngineSettings,
    problems: list[Problem],
    flags: list[str],
    available_low: int | None = None,
) -> str:
    raise_util = _utilization_that_fits(budget, kv, settings)
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
    if kv is None:
        available = budget.available
        if available is not None and available <= 0:
            problems.append(_no_memory_problem(available, raise_util))
            return "does_not_fit"
        return "unknown"
    if kv.refusal:
        others = [f"raise --gpu-memory-utilization to {raise_util}"] if raise_util else []
        others += ["raise --tp", "use --kv-cache-dtype fp8 or a quantized checkpoint"]
        kv_refusal_problems(kv, settings, problems, others)
        margin_note(kv, problems)
        return "does_not_fit"
    blocks = state_blocks_short(kv, layout, settings, available_low)
    if blocks is not None:
        _state_block_flag(kv, blocks, settings, problems, flags)
    margin_note(kv, problems)
    return "fits"


def state_blocks_short(kv: KVPlan, layout: KVLayout, settings: EngineSettings, available_low: int | None) -> int | None:
    """The KV cache blocks at the low end of the budget (num_blocks_for: the engine's own count) when
    a model with state layers captures CUDA graphs and max_num_seqs exceeds them; else None."""
    if not (layout.has_state and settings.uses_cudagraphs):
        return None
    low = kv.num_blocks if available_low is None else num_blocks_for(kv.bytes_per_block, available_low)
    blocks = min(low, kv.num_blocks)
    return blocks if settings.max_num_seqs > blocks else None


def low_end(quantity: Quantity) -> int | None:
    """The low end of a predicted quantity's stated range (Quantity.low), else its value."""
    low = getattr(quantity, "low", None)
    value = quantity.value if low is None else low
    return None if value is None else int(value)


def kv_refusal_problems(kv: KVPlan, settings: EngineSettings, problems: list[Problem], others: list[str]) -> None:
    """The engine's refusal of a KV cache too small for one request, and the fix: the longest
    max_model_len that fits (never above the model's own limit), or OTHERS, what else makes room."""
    problems.append(Problem("kv_cache_too_small", kv.refusal or "", "predicted"))
    fitting = min(kv.estimated_max_model_len or 0, settings.derived_max_model_len)
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
    plan predicts plus one request's KV cache; None when nothing below 1 would, or it is unknown."""
    available = budget.available
    if kv is None or available is None or kv.refusal is None and budget.weights.bytes_per_gpu <= budget.requested:
        return None
    total = budget.requested / settings.gpu_memory_utilization
    needed = budget.requested - available + one_request_bytes(kv)
    util = math.ceil(needed / total * 100) / 100
    return util if settings.gpu_memory_utilization < util <= 0.99 else None


# Largest available-KV error on the training boots of modelled (dense-attention) families is about
# 0.15 GiB; a verdict closer than this to the admission line could go either way on a real boot.
MARGIN_BYTES = GIB // 4


def margin_note(kv: KVPlan, problems: list[Problem]) -> None:
    needed = kv.bytes_per_block * (kv.blocks_per_request + 1)
    available = kv.num_blocks * kv.bytes_per_block
    if abs(available - needed) < MARGIN_BYTES:
        problems.append(
            Problem(
                "tight",
                f"one request at max_model_len needs {needed / GIB:.2f} GiB of KV cache "
                f"and the predicted budget is {available / GIB:.2f} GiB: within the prediction's "
                "error band, so the real boot may go either way",
                "predicted",
            )
        )


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
    kv: KVPlan, low_blocks: int, settings: EngineSettings, problems: list[Problem], flags: list[str]
) -> None:
    """config/compilation.py resolve_cudagraph_mode_and_sizes (0.29.0-0.32.0) refuses FULL graph
    capture when a hybrid's max_num_seqs exceeds its KV cache blocks (each decoding sequence holds a
    state block); the plan lowers max_num_seqs to the blocks at the low end of the KV budget."""
    if settings.max_num_seqs > kv.num_blocks:
        message = (
            f"max_num_seqs ({settings.max_num_seqs}) exceeds available Mamba cache blocks "
            f"({kv.num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA "
            f"graph capture cannot proceed. Please lower max_num_seqs to at most {kv.num_blocks} "
            "or increase gpu_memory_utilization."
        )
    else:
        message = (
            f"max_num_seqs ({settings.max_num_seqs}) is within the {kv.num_blocks} Mamba cache blocks of the "
            f"predicted KV budget but above the {low_blocks} at its low end: vLLM refuses CUDA graph capture "
            "when the state blocks fall short (each decode sequence requires one)"
        )
    problems.append(Problem("max_num_seqs_exceeds_state_blocks", message, "predicted"))
    flags.append(f"--max-num-seqs {max(low_blocks, 1)}")


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
    peak = activation.peak
    return {
        "peak": peak.name if peak else None,
        "moments": [
            {
                "name": m.name,
                "bytes": m.num_bytes if m.is_modelled else None,
                "basis": m.basis,
                "buffers": [{"name": b.name, "shape": list(b.shape), "bytes": b.num_bytes} for b in m.buffers],
            }
            for m in activation.moments
        ],
        "skipped": [list(s) for s in activation.skipped],
    }


def _kv_details(layout: KVLayout, kv: KVPlan | None) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for _, spec in layout.specs:
        key = f"{spec.kind} page {spec.page_size_bytes()} B, block {spec.block_size}"
        kinds[key] = kinds.get(key, 0) + 1
    out = {
        "backend": layout.backend.backend.name,
        "block_size": layout.block_size,
        "mamba_cache_mode": layout.mamba_cache_mode,
        "layers": kinds,
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
