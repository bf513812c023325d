"""vLLM's CPU platform (`--gpu cpu`): the KV half of a plan as the CPU build computes it.

The CPU worker does not profile: vllm/v1/worker/cpu_worker.py (0.29.0-0.33.0) determine_available_memory
returns --kv-cache-memory-bytes as the KV size when it is given ("Explicitly set (X/Y) GiB for KV cache"),
and otherwise its reservation ceil(node memory x --gpu-memory-utilization) less the worker process's
resident memory after a warm-up pass ("Auto set ... GiB memory was consumed by non-kv usages"). The
platform captures no CUDA graphs (platforms/cpu.py check_and_update_config empties
cudagraph_capture_sizes) and keeps no memory outside its allocator's accounting, so those terms are
absent from a CPU plan (null, not zero). Block size, backend and state dtypes come from the same
check_and_update_config (apron.plan.kv.backends.cpu_backend; FamilyContext.state_dtypes).
"""

from __future__ import annotations

import math
from dataclasses import replace

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.hardware import Gpu
from apron.plan.kv.layouts import KVLayout, build_layout
from apron.plan.kv.planning import KVPlan, NotModelled, plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.memory import GIB, MemoryPlan, kv_quantities, kv_refusal_problems, one_request_bytes
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Problem, Quantity
from apron.plan.settings import EngineSettings
from apron.plan.weights import WeightsEstimate

WORKER = "vllm/v1/worker/cpu_worker.py determine_available_memory"
NO_GRAPHS = "none on the CPU platform: platforms/cpu.py check_and_update_config empties cudagraph_capture_sizes"
NO_PROFILE = f"none: with --kv-cache-memory-bytes the CPU worker sizes the KV cache without a profiling run ({WORKER})"
NO_NON_TORCH = "none: the CPU worker keeps no memory outside what it reports as the KV size"
# The worker's resident memory after warm-up (Python, torch, vLLM, the weights, warm-up buffers) is
# what the auto KV size subtracts; Apron reads none of it from source.
RSS_UNKNOWN = (
    "the CPU worker's KV size without --kv-cache-memory-bytes is its reservation less the process's "
    f"resident memory after a warm-up pass ({WORKER}), which Apron does not model; "
    "give --kv-cache-memory-bytes to plan the KV cache"
)


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
    explicit = settings.kv_cache_memory_bytes
    kv = _kv(layout, explicit, settings) if explicit is not None and not unknowns else None
    if explicit is None:
        unknowns.append(RSS_UNKNOWN)
    q = _budget_quantities(gpu, settings, explicit)
    q.update(_derived(kv_quantities(layout, kv, unknowns, settings)))
    problems: list[Problem] = [Problem(kind, message, "proven_constraint") for kind, message in layout.refusals]
    q["host_ram_bytes"] = _host_ram(weights, explicit, q["requested_bytes"])
    verdict = _verdict(kv, unknowns, explicit, settings, gpu, q["host_ram_bytes"], problems)
    notes = [
        f"vLLM's CPU platform on this machine: {gpu.total_bytes / GIB:.2f} GiB ({gpu.total_bytes_basis})",
        f"attention backend {layout.backend.backend.name}: {layout.backend.reason}, block size {layout.block_size}",
    ]
    if explicit is None:
        notes.append(
            "without --kv-cache-memory-bytes the CPU worker reserves "
            f"{settings.gpu_memory_utilization} of the node's memory and refuses to start when less is free"
        )
    details = {
        "kv": {
            "backend": layout.backend.backend.name,
            "block_size": layout.block_size,
            "layers": _layers(layout),
            **({"blocks_per_request": kv.blocks_per_request, "bytes_per_block": kv.bytes_per_block} if kv else {}),
        },
        "platform": {"name": "cpu", "node_total_bytes": gpu.total_bytes, "cpu_flags": sorted(gpu.cpu_flags)},
    }
    return MemoryPlan(q, verdict, tuple(problems), tuple(unknowns), tuple(notes), (), details)


def _derived(quantities: dict[str, Quantity]) -> dict[str, Quantity]:
    """With the KV size given, blocks, tokens and concurrency are arithmetic on the inputs: derived."""
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


def _budget_quantities(gpu: Gpu, settings: EngineSettings, explicit: int | None) -> dict[str, Quantity]:
    q = {
        "activation_peak_bytes": Quantity(None, "bytes", "derived", NO_PROFILE)
        if explicit is not None
        else Quantity.unknown("bytes", "the warm-up pass's memory is inside the process's resident memory"),
        "cudagraph_bytes": Quantity(None, "bytes", "derived", NO_GRAPHS),
        "non_torch_bytes": Quantity(None, "bytes", "derived", NO_NON_TORCH)
        if explicit is not None
        else Quantity.unknown("bytes", RSS_UNKNOWN),
    }
    if explicit is not None:
        q["requested_bytes"] = Quantity(
            None, "bytes", "derived", "none: with --kv-cache-memory-bytes the utilization is not applied"
        )
        q["available_kv_bytes"] = Quantity(explicit, "bytes", "derived", f"--kv-cache-memory-bytes ({WORKER})")
    else:
        q["requested_bytes"] = Quantity(
            math.ceil(gpu.total_bytes * settings.gpu_memory_utilization),
            "bytes",
            "derived",
            f"ceil({gpu.total_bytes:,} x {settings.gpu_memory_utilization}): the CPU worker's reservation",
        )
        q["available_kv_bytes"] = Quantity.unknown("bytes", RSS_UNKNOWN)
    return q


def _host_ram(weights: WeightsEstimate, explicit: int | None, requested: Quantity) -> Quantity:
    if explicit is not None:
        return Quantity(
            weights.bytes_per_gpu + explicit,
            "bytes",
            "predicted",
            f"weights {weights.bytes_per_gpu / GIB:.2f} GiB + KV cache {explicit / GIB:.2f} GiB, both in host "
            "memory on the CPU platform; the Python processes themselves are not counted",
        )
    return Quantity(
        requested.value,
        "bytes",
        "predicted",
        "the worker's reservation, which its weights, runtime and KV cache fill",
    )


def _verdict(
    kv: KVPlan | None,
    unknowns: list[str],
    explicit: int | None,
    settings: EngineSettings,
    gpu: Gpu,
    host: Quantity,
    problems: list[Problem],
) -> str:
    if host.value is not None and explicit is not None and host.value > gpu.total_bytes:
        problems.append(
            Problem(
                "host_ram_exceeded",
                f"the weights and a {explicit / GIB:.2f} GiB KV cache need {host.value / GIB:.2f} GiB, more than "
                f"the {gpu.total_bytes / GIB:.2f} GiB of the CPU worker's NUMA node; lower --kv-cache-memory-bytes",
                "predicted",
            )
        )
        return "does_not_fit"
    if kv is None:
        return "unknown"
    if kv.refusal:
        needed = one_request_bytes(kv)
        kv_refusal_problems(kv, settings, problems, [f"raise --kv-cache-memory-bytes to {needed}"])
        return "does_not_fit"
    return "fits"


def _layers(layout: KVLayout) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for _, spec in layout.specs:
        key = f"{spec.kind} page {spec.page_size_bytes()} B, block {spec.block_size}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds
