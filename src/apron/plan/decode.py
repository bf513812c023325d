"""An upper bound on decode speed per user, from memory bandwidth and the all-reduce's link.

At N users each decode step produces one token per user, and every GPU must at least read its share
of the weights the step touches and the KV cache of the whole batch, and (under TP) pass each layer's
two all-reduces (attention output, MLP output) over its link:

    t_memory    = (weights read + N x KV of one request) / memory bandwidth
    t_allreduce = layers x 2 x 2(p-1)/p x N x hidden x activation bytes / link bandwidth    (ring all-reduce)
    tokens/s per user <= 1 / (t_memory + t_allreduce)

Weights read: every parameter on the GPU except the embedding table (a gather of N rows; read whole
as the LM head when tied), the vision tower (not run while decoding) and allocator rounding; experts
scaled by the share a batch touches when N tokens each route to k of E experts uniformly,
1 - (1 - k/E)^N. KV of one request: the pool's bytes over its max concurrency at the plan's context
(what one request of that length holds, sliding windows and recurrent states included), read whole.

It is a bound, not a benchmark: peak bandwidths from the datasheets (hardware/gpus.json), no compute,
no kernel launches, no all-reduce latency (which dominates small batches on PCIe, and more so without
peer-to-peer), no scheduling or prefill interleaving. Real decode is slower.
"""

from __future__ import annotations

from apron.frozen import frozen
from apron.hardware import Gpu
from apron.plan.model_config import ModelConfig
from apron.plan.result import Plan
from apron.plan.weights import DTYPE_BYTES

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

FORMULA = (
    "1 / ((weights read + N x KV per request) / memory bandwidth "
    "+ layers x 2 x 2(p-1)/p x N x hidden x activation bytes / link bandwidth)"
)
# Weight groups (plan/weights.py _group) a decode step does not read.
_NOT_READ = ("embedding", "allocator rounding", "vision/audio tower", "rotary cos/sin cache")


@frozen
class DecodeBound:
    tokens_per_second_per_user: float
    weights_read_bytes: int
    kv_read_bytes: int  # the whole batch's, per GPU
    allreduce_bytes: int  # per GPU per step, over its link
    memory_seconds: float
    allreduce_seconds: float
    interconnect: str
    basis: str

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_per_second_per_user": round(self.tokens_per_second_per_user, 2),
            "label": "predicted",
            "formula": FORMULA,
            "basis": self.basis,
            "interconnect": self.interconnect,
            "terms": {
                "weights_read_bytes": self.weights_read_bytes,
                "kv_read_bytes": self.kv_read_bytes,
                "allreduce_bytes": self.allreduce_bytes,
                "memory_seconds": self.memory_seconds,
                "allreduce_seconds": self.allreduce_seconds,
            },
        }


def expert_share(users: int, experts: int, top_k: int) -> float:
    """Expected share of E experts that N tokens, each routed to k distinct experts uniformly, touch."""
    if experts <= 1 or top_k <= 0:
        return 1.0
    return 1.0 - (1.0 - min(top_k, experts) / experts) ** users


def weights_read_bytes(plan: Plan, config: ModelConfig, users: int) -> int:
    groups = {g["group"]: int(g["bytes_per_gpu"]) for g in plan.details.get("weights", {}).get("groups", [])}
    total = sum(n for group, n in groups.items() if group not in _NOT_READ and group != "experts")
    if "lm_head" not in groups:
        total += groups.get("embedding", 0)  # tied: the table is the LM head, read whole every step
    share = expert_share(users, config.num_experts, config.num_experts_per_tok) if config.is_moe else 1.0
    return total + round(groups.get("experts", 0) * share)


def kv_bytes_per_request(plan: Plan) -> int | None:
    q = plan.quantities
    blocks, block_bytes, concurrency = (q[n].value for n in ("num_kv_blocks", "kv_block_bytes", "max_concurrency"))
    if not blocks or not block_bytes or not concurrency:
        return None
    return round(blocks * block_bytes / concurrency)


def decode_bound(plan: Plan, config: ModelConfig, gpu: Gpu, users: int) -> tuple[DecodeBound | None, str | None]:
    """The bound for N users on the plan's GPUs, or None and why it cannot be given."""
    if gpu.memory_bandwidth_bytes_per_second is None or gpu.interconnect is None:
        return None, f"no memory bandwidth for {gpu.name} in the GPU catalog"
    kv_request = kv_bytes_per_request(plan)
    if kv_request is None:
        return None, "the KV cache per request is unknown"
    count = plan.gpu_count
    link_name, link_bytes = gpu.interconnect.for_count(count)
    weights = weights_read_bytes(plan, config, users)
    kv = users * kv_request
    memory_seconds = (weights + kv) / gpu.memory_bandwidth_bytes_per_second
    activation = users * config.hidden_size * DTYPE_BYTES.get(plan.settings.dtype, 2)
    ring = 2 * (count - 1) / count if count > 1 else 0.0
    allreduce = round(config.num_layers * 2 * ring * activation)
    allreduce_seconds = allreduce / link_bytes if allreduce else 0.0
    basis = (
        f"{weights / 2**30:.2f} GiB of weights and {kv / 2**30:.2f} GiB of KV ({users} x "
        f"{kv_request / 2**20:.1f} MiB) per GPU at {gpu.memory_bandwidth_bytes_per_second / 1e9:,.0f} GB/s "
        f"({gpu.memory_bandwidth_basis})"
    )
    if allreduce:
        basis += (
            f"; {allreduce / 2**20:.1f} MiB of all-reduce per GPU per step over {link_name} at "
            f"{link_bytes / 1e9:,.0f} GB/s one way ({gpu.interconnect.basis})"
        )
    bound = DecodeBound(
        1.0 / (memory_seconds + allreduce_seconds),
        weights,
        kv,
        allreduce,
        memory_seconds,
        allreduce_seconds,
        link_name if count > 1 else "single GPU",
        basis,
    )
    return bound, None
