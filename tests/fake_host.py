"""A machine's /sys and /proc as files under one folder, for APRON_HOST_ROOT (apron.hardware.cpu).

`write_host` lays out what vLLM's CPU worker reads (v1/worker/cpu_worker.py, utils/cpu_resource_utils.py
0.32.0): the CPUs this process may run on (/proc/self/status Cpus_allowed_list), the NUMA node of each
CPU (/sys/devices/system/cpu/cpuN/nodeM), each node's meminfo, the machine's meminfo and cpuinfo, and
optionally a cgroup v2 memory limit. The suite plans `--gpu cpu` on such a machine to show that it
passes on a machine of any NUMA size and CPU flags (tests/test_host_independence.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

KIB = 1024


@dataclass(frozen=True)
class FakeHost:
    node_bytes: int  # the MemTotal of the node the first allowed CPU belongs to
    node: int = 0
    num_cpus: int = 2
    first_allowed_cpu: int = 0
    flags: tuple[str, ...] = ("avx512f", "avx512_bf16")
    machine_bytes: int | None = None  # /proc/meminfo MemTotal; default: the node's
    cgroup_limit_bytes: int | None = None
    has_node_meminfo: bool = True


def write_host(root: Path, host: FakeHost) -> Path:
    sysfs, procfs = root / "sys", root / "proc"
    for cpu in range(host.num_cpus):
        folder = sysfs / "devices/system/cpu" / f"cpu{cpu}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"node{host.node}").mkdir(exist_ok=True)  # a symlink to the node on Linux; a folder reads the same
    if host.has_node_meminfo:
        node = sysfs / "devices/system/node" / f"node{host.node}"
        node.mkdir(parents=True, exist_ok=True)
        kib = host.node_bytes // KIB
        (node / "meminfo").write_text(
            f"Node {host.node} MemTotal:       {kib} kB\nNode {host.node} MemFree:        {kib // 2} kB\n"
            f"Node {host.node} Active(file):   0 kB\nNode {host.node} Inactive(file): 0 kB\n"
            f"Node {host.node} SReclaimable:   0 kB\n"
        )
    if host.cgroup_limit_bytes is not None:
        (sysfs / "fs/cgroup").mkdir(parents=True, exist_ok=True)
        (sysfs / "fs/cgroup/memory.max").write_text(f"{host.cgroup_limit_bytes}\n")
    (procfs / "self").mkdir(parents=True, exist_ok=True)
    last = host.num_cpus - 1
    (procfs / "self/status").write_text(f"Name:\tpython\nCpus_allowed_list:\t{host.first_allowed_cpu}-{last}\n")
    total_kib = (host.machine_bytes or host.node_bytes) // KIB
    (procfs / "meminfo").write_text(f"MemTotal:       {total_kib} kB\nMemFree:        {total_kib // 2} kB\n")
    cpuinfo = "".join(
        f"processor\t: {cpu}\nmodel name\t: Fake CPU @ 2.00GHz\nflags\t\t: fpu sse2 avx2 {' '.join(host.flags)}\n\n"
        for cpu in range(host.num_cpus)
    )
    (procfs / "cpuinfo").write_text(cpuinfo)
    return root
