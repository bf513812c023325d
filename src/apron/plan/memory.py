"""The KV half of the plan: requested memory, start-up terms, the KV budget and what fits."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.hardware import Gpu
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Problem, Quantity
from apron.plan.settings import EngineSettings
from apron.plan.weights import WeightsEstimate


@dataclass(frozen=True)
class MemoryPlan:
    quantities: dict[str, Quantity]
    verdict: str
    problems: tuple[Problem, ...] = ()
    unknowns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)


def requested_bytes(gpu: Gpu, utilization: float) -> int:
    """v1/worker/utils.py request_memory: ceil(total x gpu_memory_utilization)."""
    return math.ceil(gpu.total_bytes * utilization)


def plan_memory(checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, facts: EngineFacts,
                settings: EngineSettings, weights: WeightsEstimate) -> MemoryPlan:
    requested = requested_bytes(gpu, settings.gpu_memory_utilization)
    pending = "the KV side of the plan is not modelled yet"
    quantities = {
        "activation_peak_bytes": Quantity.unknown("bytes", pending),
        "cudagraph_bytes": Quantity.unknown("bytes", pending),
        "non_torch_bytes": Quantity.unknown("bytes", pending),
        "requested_bytes": Quantity(requested, "bytes", "derived",
                                    f"ceil({gpu.total_bytes} x {settings.gpu_memory_utilization})"),
        "available_kv_bytes": Quantity.unknown("bytes", pending),
        "kv_bytes_per_token": Quantity.unknown("bytes", pending),
        "kv_block_bytes": Quantity.unknown("bytes", pending),
        "num_kv_blocks": Quantity.unknown("blocks", pending),
        "kv_tokens": Quantity.unknown("tokens", pending),
        "max_concurrency": Quantity.unknown("sequences", pending),
        "host_ram_bytes": Quantity.unknown("bytes", pending),
    }
    verdict = "does_not_fit" if weights.bytes_per_gpu > requested else "unknown"
    return MemoryPlan(quantities, verdict, unknowns=(pending,))
