"""`--gpu cpu`: this machine's CPU as vLLM's CPU platform sees it.

The CPU worker binds to the NUMA node of the first CPU it may run on and sizes everything from that
node's memory, not from the machine's total RAM (vllm/v1/worker/cpu_worker.py (0.32.0) CPUWorker.__init__
and determine_available_memory, through vllm/utils/cpu_resource_utils.py get_memory_node_info: the node's
MemTotal from /sys/devices/system/node/nodeN/meminfo, clamped to the cgroup's memory limit; the
machine's figures where the system has no per-node meminfo). Two CPU features change what the platform
builds: AVX-512 BF16 (the SSM state dtype reset in vllm/platforms/cpu.py check_and_update_config) and
AMX tiles (the AMX MLA backend), read from /proc/cpuinfo as torch.cpu._is_avx512_bf16_supported and
_is_amx_tile_supported read the CPU's own flags.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CPU_NAMES = ("cpu",)
# The flags of /proc/cpuinfo the CPU platform reads (the rest never change a plan).
PLATFORM_FLAGS = ("avx512_bf16", "amx_tile")
SYS = Path("/sys")


@dataclass(frozen=True)
class NodeMemory:
    total_bytes: int
    basis: str


def first_cpu() -> int:
    """get_allowed_cpu_list()[0]: the lowest CPU this process may run on."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else {0}
    return min(allowed) if allowed else 0


def node_of(cpu: int, sys_root: Path = SYS) -> int:
    """The NUMA node a CPU belongs to (node0 where the system does not say)."""
    for entry in sorted((sys_root / "devices/system/cpu" / f"cpu{cpu}").glob("node[0-9]*")):
        return int(entry.name[4:])
    return 0


def node_memory(sys_root: Path = SYS, proc_root: Path = Path("/proc")) -> NodeMemory:
    """The worker's node MemTotal (cgroup-clamped), as get_memory_node_info computes it."""
    node = node_of(first_cpu(), sys_root)
    meminfo = sys_root / "devices/system/node" / f"node{node}" / "meminfo"
    total, where = _kib_field(meminfo, "MemTotal"), f"NUMA node {node} MemTotal ({meminfo})"
    if total is None:
        total, where = _kib_field(proc_root / "meminfo", "MemTotal"), "the machine's MemTotal (no per-node meminfo)"
    if total is None:
        total, where = 0, "no meminfo readable"
    limit = _cgroup_limit(sys_root)
    if limit is not None and limit < total:
        return NodeMemory(limit, f"the cgroup memory limit, below {where}")
    return NodeMemory(total, where)


def _kib_field(path: Path, key: str) -> int | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    match = re.search(rf"\b{key}:\s+(\d+) kB", text)
    return int(match.group(1)) * 1024 if match else None


def _cgroup_limit(sys_root: Path) -> int | None:
    """cpu_resource_utils.py get_cgroup_memory_limit: cgroup v2 memory.max, else v1's limit."""
    for path in (
        sys_root / "fs/cgroup/memory.max",
        sys_root / "fs/cgroup/memory/memory.limit_in_bytes",
    ):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # v2's "max" is no limit; v1 reports a sentinel near 2**63 for none
            return int(text) if int(text) < 2**62 or path.name == "memory.max" else None
    return None


def cpu_flags(proc_root: Path = Path("/proc")) -> frozenset[str]:
    """The platform-relevant flags of the first CPU in /proc/cpuinfo."""
    try:
        text = (proc_root / "cpuinfo").read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    found = set(match.group(1).split()) if match else set()
    return frozenset(flag for flag in PLATFORM_FLAGS if flag in found)


def cpu_model(proc_root: Path = Path("/proc")) -> str | None:
    try:
        text = (proc_root / "cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None
