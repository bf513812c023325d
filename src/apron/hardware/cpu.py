"""`--gpu cpu`: this machine's CPU as vLLM's CPU platform sees it.

The CPU worker binds to the NUMA node of the first CPU it may run on and sizes everything from that
node's memory, not from the machine's total RAM (vllm/v1/worker/cpu_worker.py (0.32.0) CPUWorker.__init__
and determine_available_memory, through vllm/utils/cpu_resource_utils.py get_memory_node_info: the node's
MemTotal from /sys/devices/system/node/nodeN/meminfo, clamped to the cgroup's memory limit; the
machine's figures where the system has no per-node meminfo). Two CPU features change what the platform
builds: AVX-512 BF16 (the SSM state dtype reset in vllm/platforms/cpu.py check_and_update_config) and
AMX tiles (the AMX MLA backend), read from /proc/cpuinfo as torch.cpu._is_avx512_bf16_supported and
_is_amx_tile_supported read the CPU's own flags.

APRON_HOST_ROOT=DIR reads DIR/sys and DIR/proc in place of /sys and /proc: the plan of another machine's
CPU from a copy of its files, and the suite's proof that it passes on a machine of any NUMA size
(tests/fake_host.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from apron.frozen import frozen

# The flags of /proc/cpuinfo the CPU platform reads (the rest never change a plan).
PLATFORM_FLAGS = ("avx512_bf16", "amx_tile")
HOST_ROOT_ENV = "APRON_HOST_ROOT"


@frozen
class NodeMemory:
    total_bytes: int
    basis: str


def sys_root() -> Path:
    root = os.environ.get(HOST_ROOT_ENV)
    return Path(root) / "sys" if root else Path("/sys")


def proc_root() -> Path:
    root = os.environ.get(HOST_ROOT_ENV)
    return Path(root) / "proc" if root else Path("/proc")


def first_cpu(procfs: Path | None = None) -> int:
    """get_allowed_cpu_list()[0]: the lowest CPU this process may run on. /proc/self/status's
    Cpus_allowed_list is the affinity mask os.sched_getaffinity(0) returns."""
    procfs = procfs or proc_root()
    allowed = _id_list(_status_field(procfs / "self/status", "Cpus_allowed_list"))
    if not allowed and procfs == Path("/proc") and hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
    return min(allowed) if allowed else 0


def _status_field(path: Path, key: str) -> str:
    try:
        text = path.read_text()
    except OSError:
        return ""
    match = re.search(rf"^{key}:\s*(\S*)", text, re.MULTILINE)
    return match.group(1) if match else ""


def _id_list(text: str) -> list[int]:
    """ "0-3,8" -> [0, 1, 2, 3, 8] (cpu_resource_utils.py parse_id_list)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            out.extend(range(int(low), int(high or low) + 1))
    return out


def node_of(cpu: int, sysfs: Path) -> int:
    """The NUMA node a CPU belongs to (node0 where the system does not say)."""
    for entry in sorted((sysfs / "devices/system/cpu" / f"cpu{cpu}").glob("node[0-9]*")):
        return int(entry.name[4:])
    return 0


def node_memory(sysfs: Path | None = None, procfs: Path | None = None) -> NodeMemory:
    """The worker's node MemTotal (cgroup-clamped), as get_memory_node_info computes it."""
    sysfs, procfs = sysfs or sys_root(), procfs or proc_root()
    node = node_of(first_cpu(procfs), sysfs)
    meminfo = sysfs / "devices/system/node" / f"node{node}" / "meminfo"
    total, where = _kib_field(meminfo, "MemTotal"), f"NUMA node {node} MemTotal ({meminfo})"
    if total is None:
        total, where = _kib_field(procfs / "meminfo", "MemTotal"), "the machine's MemTotal (no per-node meminfo)"
    if total is None:
        total, where = 0, "no meminfo readable"
    limit = _cgroup_limit(sysfs)
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


def _cgroup_limit(sysfs: Path) -> int | None:
    """cpu_resource_utils.py get_cgroup_memory_limit: cgroup v2 memory.max, else v1's limit."""
    for path in (
        sysfs / "fs/cgroup/memory.max",
        sysfs / "fs/cgroup/memory/memory.limit_in_bytes",
    ):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # v2's "max" is no limit; v1 reports a sentinel near 2**63 for none
            return int(text) if int(text) < 2**62 or path.name == "memory.max" else None
    return None


def cpu_flags(procfs: Path | None = None) -> frozenset[str]:
    """The platform-relevant flags of the first CPU in /proc/cpuinfo."""
    try:
        text = ((procfs or proc_root()) / "cpuinfo").read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    found = set(match.group(1).split()) if match else set()
    return frozenset(flag for flag in PLATFORM_FLAGS if flag in found)


def cpu_model(procfs: Path | None = None) -> str | None:
    try:
        text = ((procfs or proc_root()) / "cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None
