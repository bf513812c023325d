"""Resolve `--gpu` (PyTorch's device name or a short alias) to a catalog entry."""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from apron.errors import BadInput
from apron.frozen import frozen, replace

# The names of vLLM's CPU platform; apron.hardware.cpu (which reads /proc and /sys) loads for it only.
CPU_NAMES = ("cpu",)

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any, Literal

MIB = 2**20
GB = 10**9  # datasheets' unit for bandwidth
INTERCONNECTS = ("nvswitch", "nvlink", "pcie_p2p", "pcie_host")
INTERCONNECT_NAMES = {
    "nvswitch": "NVLink/NVSwitch",
    "nvlink": "NVLink",
    "pcie_p2p": "PCIe P2P",
    "pcie_host": "PCIe, no P2P",
}


@frozen
class Interconnect:
    """How the GPUs of one rented machine of this class reach each other (the all-reduce's links)."""

    kind: Literal["nvswitch", "nvlink", "pcie_p2p", "pcie_host"]
    link_bytes_per_second: int  # peak in one direction
    basis: str
    bridge_gpus: int = 0  # an NVLink bridge joins this many GPUs (H100 NVL pairs); 0: none
    bridge_bytes_per_second: int = 0

    def for_count(self, count: int) -> tuple[str, int]:
        """(name, slowest link on the ring) for COUNT GPUs: a bridge carries the ring only when it
        joins every GPU of the machine."""
        if self.bridge_gpus and count <= self.bridge_gpus:
            return "NVLink bridge", self.bridge_bytes_per_second
        return INTERCONNECT_NAMES[self.kind], self.link_bytes_per_second


@frozen
class Gpu:
    name: str  # PyTorch's device name, e.g. "NVIDIA H100 80GB HBM3"
    total_bytes: int  # as torch.cuda.mem_get_info() reports it
    compute_capability: tuple[int, int]
    is_total_exact: bool  # read on a real machine, or derived from nvidia-smi's figure
    total_bytes_basis: str
    aliases: tuple[str, ...] = ()
    # "cpu": vLLM's CPU platform (`--gpu cpu`); total_bytes is then the worker's NUMA node memory and
    # compute_capability is (0, 0), which no CPU code path reads (the CPU platform has none).
    platform: Literal["cuda", "cpu"] = "cuda"
    cpu_flags: frozenset[str] = frozenset()
    memory_bandwidth_bytes_per_second: int | None = None  # published peak; None: not in the catalog
    memory_bandwidth_basis: str = ""
    interconnect: Interconnect | None = None

    @property
    def is_cpu(self) -> bool:
        return self.platform == "cpu"

    @property
    def capability_text(self) -> str | None:
        """ "8.9"; None on the CPU platform, which has no compute capability."""
        return None if self.is_cpu else "{}.{}".format(*self.compute_capability)

    @property
    def capability_int(self) -> int:
        """Capability as vLLM compares it: 8.9 -> 89."""
        return self.compute_capability[0] * 10 + self.compute_capability[1]


def _normalize(name: str) -> str:
    text = name.lower().replace("nvidia", "").replace("geforce", "").replace("tesla", "")
    return re.sub(r"[\s_\-]+", "", text)


def _entry(raw: dict[str, Any]) -> Gpu:
    major, minor = (int(x) for x in raw["compute_capability"].split("."))
    if raw["is_total_exact"]:
        total = raw["total_bytes"]
        basis = "PyTorch total read on a rented machine"
    else:
        total = (raw["nvidia_smi_total_mib"] - raw["family_gap_mib"]) * MIB
        basis = (
            f"approximate: nvidia-smi's {raw['nvidia_smi_total_mib']} MiB minus the "
            f"{raw['family_gap_mib']} MiB gap measured on the same GPU family; pass "
            "--gpu-memory-bytes with torch.cuda.mem_get_info()[1] for the exact figure"
        )
    return Gpu(
        raw["name"],
        total,
        (major, minor),
        raw["is_total_exact"],
        basis,
        tuple(raw["aliases"]),
        memory_bandwidth_bytes_per_second=raw["memory_bandwidth_gb_per_second"] * GB,
        memory_bandwidth_basis=raw["memory_bandwidth_source"],
        interconnect=_interconnect(raw["interconnect"]),
    )


def _interconnect(raw: dict[str, Any]) -> Interconnect:
    bridge = raw.get("bridge") or {}
    return Interconnect(
        raw["kind"],
        raw["gb_per_second"] * GB,
        raw["source"],
        bridge.get("gpus", 0),
        bridge.get("gb_per_second", 0) * GB,
    )


@lru_cache(maxsize=1)
def all_gpus() -> tuple[Gpu, ...]:
    with open(os.path.join(os.path.dirname(__file__), "gpus.json"), encoding="utf-8") as table:
        data = json.load(table)
    return tuple(_entry(raw) for raw in data["gpus"])


@lru_cache(maxsize=1)
def _lookup() -> dict[str, Gpu]:
    table: dict[str, Gpu] = {}
    for gpu in all_gpus():
        for key in (gpu.name, *gpu.aliases):
            table.setdefault(_normalize(key), gpu)
    return table


def resolve_gpu(text: str, *, memory_bytes: int | None = None, capability: str | None = None) -> Gpu:
    """Find a GPU by name or alias; `memory_bytes` overrides the total (and allows unknown names).
    "cpu" is vLLM's CPU platform on this machine (its NUMA node's memory, or MEMORY_BYTES)."""
    if text.strip().lower() in CPU_NAMES:
        return cpu_device(memory_bytes)
    gpu = _lookup().get(_normalize(text))
    if gpu is None:
        if memory_bytes is not None and capability is not None:
            return Gpu(text, memory_bytes, _parse_capability(capability), True, "given with --gpu-memory-bytes")
        import difflib  # only for a name not in the catalog

        close = difflib.get_close_matches(_normalize(text), list(_lookup()), n=4, cutoff=0.5)
        names = sorted({_lookup()[c].name for c in close})
        hint = f"; close names: {', '.join(names)}" if names else ""
        raise BadInput(
            f"--gpu '{text}' is not in Apron's GPU catalog{hint}. See `apron gpus`, or give "
            "--gpu-memory-bytes and --gpu-capability for an unlisted GPU"
        )
    if memory_bytes is not None:
        return replace(
            gpu, total_bytes=memory_bytes, is_total_exact=True, total_bytes_basis="given with --gpu-memory-bytes"
        )
    return gpu


def cpu_device(
    memory_bytes: int | None = None, *, flags: frozenset[str] | None = None, basis: str | None = None
) -> Gpu:
    """This machine's CPU as vLLM's CPU worker sizes it (apron.hardware.cpu), or another machine's:
    its node memory and CPU flags given (apron.measure.machine reads them from a log)."""
    from apron.hardware.cpu import cpu_flags, node_memory

    if memory_bytes is not None:
        total, where = memory_bytes, basis or "given with --gpu-memory-bytes"
    else:
        node = node_memory()
        total, where = node.total_bytes, node.basis
    if total <= 0:
        raise BadInput("--gpu cpu: this machine's memory could not be read; give --gpu-memory-bytes")
    return Gpu("cpu", total, (0, 0), True, where, ("cpu",), "cpu", cpu_flags() if flags is None else flags)


def _parse_capability(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d)", text.strip())
    if not match:
        raise BadInput(f"--gpu-capability '{text}' must look like 8.9 (major.minor)")
    return int(match.group(1)), int(match.group(2))
