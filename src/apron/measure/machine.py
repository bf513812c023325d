"""The CPU platform a vLLM CPU-engine log ran on, as far as the log prints it.

A plan checked against a shipped log must plan the log's machine, not the one the check runs on: the
NUMA node's memory is in the CPU worker's KV line ("Explicitly/Auto set (X/Y) GiB for KV cache on node
N", v1/worker/cpu_worker.py determine_available_memory 0.29.0-0.33.0, Y rounded to 0.01 GiB), and the
one CPU feature that changes a non-MLA plan, AVX-512 BF16, is in platforms/cpu.py
check_and_update_config (0.29.0:241-256, 0.32.0:303-320): where torch.cpu._is_avx512_bf16_supported()
holds, every model's config pass logs "Reset SSM cache type to float32 for accelerated GDN ..." or
"Using %s SSM state storage for the CPU accelerated GDN backend"; where it does not, neither line
appears. AMX tiles show only where an MLA model chose the backend ("Using AMX_MLA backend.",
get_attn_backend_cls 0.32.0:163); a log without that line leaves amx_tile out, which changes no
plan of a model without MLA.
"""

from __future__ import annotations

import re

from apron.frozen import frozen
from apron.measure.logparse import ParsedLog

_BF16_LINES = re.compile(
    r"Reset SSM cache type to float32 for accelerated GDN|SSM state storage for the CPU accelerated GDN"
)
_AMX_LINE = re.compile(r"Using AMX_MLA backend")
# The worker's refusals print the node too: "Available memory on node N (A/T GiB) on startup ..." and
# "... on kv cache allocation ..." (cpu_worker.py 0.32.0:81-95, 226-250).
_REFUSAL_NODE = re.compile(r"Available memory on node \d+ \([\d.]+/([\d.]+) GiB\)")


@frozen
class CpuMachine:
    """What apron.hardware.cpu_device needs to plan this machine: `cpu_device(m.node_bytes,
    flags=m.cpu_flags, basis=m.basis)`."""

    node_bytes: int  # the worker's NUMA node MemTotal, to the log's 0.01 GiB
    cpu_flags: frozenset[str]
    basis: str


def cpu_machine_of(log: ParsedLog) -> CpuMachine | None:
    """The machine the log's CPU worker ran on; None for a log that is not the CPU platform's or
    prints no node memory (a refusal before the worker started)."""
    if log.platform != "cpu":
        return None
    # The worker's lines come after the config pass: a log that has them has the flag lines where they apply.
    messages = [line.message for line in log.lines]
    node_bytes = log.total_memory_bytes or _refusal_node_bytes(messages)
    if node_bytes is None:
        return None
    flags = set()
    if any(_BF16_LINES.search(m) for m in messages):
        flags.add("avx512_bf16")
    if any(_AMX_LINE.search(m) for m in messages):
        flags.add("amx_tile")
    basis = (
        "the NUMA node memory the log's CPU worker printed (to 0.01 GiB); CPU flags as its config pass "
        f"logged them: {', '.join(sorted(flags)) or 'no AVX-512 BF16'}"
    )
    return CpuMachine(node_bytes, frozenset(flags), basis)


def _refusal_node_bytes(messages: list[str]) -> int | None:
    for message in messages:
        if match := _REFUSAL_NODE.search(message):
            return round(float(match.group(1)) * 2**30)
    return None
