"""`apron records import FILE`: published boots as boot records, each linked to the plan Apron makes for it.

The format is the one tests/fixtures/boots-training.json uses (and anyone may publish): {"about": str,
"boots": [{model_id, revision, gpu, gpu_count, vllm_version, boot_outcome, serve_flags: {...},
measured: {...} | null, failure: {fingerprint, last_error} | null}]}. Each boot's measured numbers keep
the label measured, with a basis naming the file, and the resolution of vLLM's two-decimal GiB lines.
Each boot is planned now, with the settings it was served with, on the release it ran: that plan is the
prediction `apron calibrate` and `apron records compare` set beside it. Every boot is planned before
anything is written: a file that cannot be imported whole is not imported at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apron.errors import BadInput
from apron.frozen import frozen
from apron.plan.quantity import Unit
from apron.plan.result import Plan
from apron.records.documents import (
    BootRecord,
    EngineIdentity,
    Fault,
    HardwareIdentity,
    Measured,
    Outcome,
    PlanRecord,
)
from apron.records.store import RecordStore
from apron.units import GIB_RESOLUTION_BYTES

# Published field -> (the boot record's name, as the plan names it; unit).
MEASURED: dict[str, tuple[str, Unit]] = {
    "weights_bytes_per_gpu": ("weights_bytes_per_gpu", "bytes"),
    "startup_activation_peak_bytes": ("activation_peak_bytes", "bytes"),
    "available_kv_cache_bytes": ("available_kv_bytes", "bytes"),
    "kv_cache_tokens": ("kv_tokens", "tokens"),
    "max_concurrency": ("max_concurrency", "sequences"),
    "cuda_graph_vllm_estimate_bytes": ("cudagraph_bytes", "bytes"),
    "cuda_graph_actual_bytes": ("cudagraph_actual_bytes", "bytes"),
    "non_torch_increase_bytes": ("non_torch_bytes", "bytes"),
    "requested_memory_bytes": ("requested_bytes", "bytes"),
    "initial_total_memory_bytes": ("total_memory_bytes", "bytes"),
}
REQUIRED = ("model_id", "gpu", "vllm_version", "boot_outcome")
# Plans a published boot: (model id, revision, GPU name, settings, release) -> Plan.
Planner = Callable[["PublishedBoot"], Plan]


@frozen
class PublishedBoot:
    index: int
    model_id: str
    revision: str | None
    gpu: str
    gpu_count: int
    engine_version: str
    outcome: str
    flags: dict[str, Any]
    measured: dict[str, Any]
    failure: dict[str, Any] | None


@frozen
class Imported:
    boot_id: str
    plan_id: str
    boot: BootRecord
    model: str


def read_published(path: Path) -> tuple[list[PublishedBoot], str]:
    """The file's boots and its sha256; BadInput naming the file and the entry that is not one."""
    try:
        raw = path.read_bytes()
        document = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable JSON file ({exc})") from None
    boots = document.get("boots") if isinstance(document, dict) else None
    if not isinstance(boots, list) or not boots:
        raise BadInput(f'{path}: no "boots" list (the published format: tests/fixtures/boots-training.json)')
    return [_published(entry, i, path) for i, entry in enumerate(boots)], hashlib.sha256(raw).hexdigest()


def _published(entry: Any, index: int, path: Path) -> PublishedBoot:
    if not isinstance(entry, dict):
        raise BadInput(f"{path}: boots[{index}] is not an object")
    missing = [name for name in REQUIRED if not entry.get(name)]
    if missing:
        raise BadInput(f"{path}: boots[{index}] lacks {', '.join(missing)}")
    return PublishedBoot(
        index=index,
        model_id=str(entry["model_id"]),
        revision=entry.get("revision"),
        gpu=str(entry["gpu"]),
        gpu_count=int(entry.get("gpu_count") or 1),
        engine_version=str(entry["vllm_version"]).lstrip("v"),
        outcome=str(entry["boot_outcome"]),
        flags=dict(entry.get("serve_flags") or {}),
        measured=dict(entry.get("measured") or {}),
        failure=entry.get("failure"),
    )


def import_boots(path: Path, store: RecordStore, planner: Planner) -> list[Imported]:
    """Plan every boot, then write the plans and boots (the same file imported twice adds nothing)."""
    boots, sha256 = read_published(path)
    plans = [planner(boot) for boot in boots]  # all or nothing: a boot that cannot be planned stops here
    out = []
    for boot, plan in zip(boots, plans, strict=True):
        plan_id = store.put(PlanRecord(plan))
        record = boot_record(boot, plan_id, path.name, sha256)
        out.append(Imported(store.put(record), plan_id, record, boot.model_id))
    return out


def boot_record(boot: PublishedBoot, plan_id: str, file_name: str, sha256: str) -> BootRecord:
    outcome, fault = _outcome(boot)
    total = boot.measured.get("initial_total_memory_bytes")
    return BootRecord(
        created_at="",  # published boots carry no time
        plan_id=plan_id,
        outcome=outcome,
        target="imported",
        engine=EngineIdentity(boot.engine_version),
        hardware=HardwareIdentity(
            "gpu",
            gpu_name=boot.gpu,
            gpu_count=boot.gpu_count,
            gpu_total_bytes=int(total) if total else None,
            gpu_total_bytes_basis="the published boot's initial total memory" if total else None,
        ),
        log=None,
        fault=fault,
        measured=measured_quantities(boot, file_name) if outcome == "healthy" else {},
        source={"file": file_name, "sha256": sha256, "index": boot.index},
    )


def measured_quantities(boot: PublishedBoot, file_name: str) -> dict[str, Measured]:
    out = {}
    for field, (name, unit) in MEASURED.items():
        value = boot.measured.get(field)
        if value is None:
            continue
        basis = f"published boot {file_name}[{boot.index}] {field} (from vLLM's log)"
        out[name] = Measured(value, unit, basis, GIB_RESOLUTION_BYTES if unit == "bytes" else None)
    return out


def _outcome(boot: PublishedBoot) -> tuple[Outcome, Fault | None]:
    if boot.outcome == "healthy":
        return "healthy", None
    failure = boot.failure or {}
    fingerprint = (failure.get("fingerprint") or ["unknown"])[0]
    evidence = str(failure.get("last_error") or "")
    kind, _, reason = str(fingerprint).partition(":")
    if kind == "harness":
        return "harness_fault", Fault("harness", reason or kind, evidence, "imported")
    if kind == "host":
        return "host_fault", Fault("host", reason or kind, evidence, "imported")
    return "failed", Fault("model", reason or kind, evidence, "imported")


def published_planner(snapshots: Path | None = None) -> Planner:
    """Plans a published boot with the settings it was served with (only those the publisher set, not
    the ones marked inferred), on its release and GPU. The checkpoint comes from the Hub or the bundled
    catalog; with `snapshots`, a folder of checkpoint snapshot files (<org>--<name>.json.gz, as `apron
    plan` reads them), from there when one is present - for a machine without the Hub."""

    def plan(boot: PublishedBoot) -> Plan:
        from apron.checkpoint import load_checkpoint
        from apron.hardware import resolve_gpu
        from apron.plan.planner import plan_checkpoint
        from apron.plan.settings import UserSettings

        snapshot = snapshots / f"{boot.model_id.replace('/', '--')}.json.gz" if snapshots else None
        if snapshot is not None and snapshot.is_file():
            checkpoint = load_checkpoint(str(snapshot))
        else:
            checkpoint = load_checkpoint(boot.model_id, boot.revision)
        flags = boot.flags
        user = UserSettings(
            tensor_parallel_size=int(flags.get("tensor_parallel_size") or 1),
            max_model_len=flags.get("max_model_len"),
            gpu_memory_utilization=flags.get("gpu_memory_utilization"),
            kv_cache_dtype=flags.get("kv_cache_dtype") or "auto",
            dtype=flags.get("dtype") or "auto",
            enforce_eager=bool(flags.get("enforce_eager")),
        )
        return plan_checkpoint(checkpoint, resolve_gpu(boot.gpu), user, boot.engine_version)

    return plan
