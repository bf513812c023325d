"""`apron boot`: resolve the plan, boot it on the targets (retrying host faults on the next one, a
bounded number of times), and write the boot record beside the plan record."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from apron.boot.hosts import Host, LocalHost, SshHost, SshTarget
from apron.boot.session import AfterHealthy, Attempt, BootOptions, BootRun, Progress, new_run_name, now_iso
from apron.boot.targets import TargetSpec
from apron.errors import BadInput, HostFault
from apron.measure import logparse
from apron.records.documents import log_timings, measured_quantities, plan_record
from apron.records.store import RecordStore

PLAN_SCHEMA = "apron.plan/1"


@dataclass(frozen=True)
class SshSettings:
    identity_file: str | None = None
    known_hosts_file: str | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class BootResult:
    record_id: str
    record: dict
    plan_id: str


def load_plan_input(value: str, store: RecordStore) -> dict | None:
    """A saved plan: an apron.plan/1 JSON file, a plan record file, or a plan record id in the store.
    None when VALUE is not a saved plan (then it is a SOURCE to plan)."""
    path = Path(value)
    if path.is_file() and path.suffix == ".json":
        try:
            document = json.loads(path.read_text())
        except ValueError as exc:
            raise BadInput(f"{path}: not JSON ({exc})") from None
        return _plan_from_document(document, str(path))
    if not path.exists() and len(value) >= 8 and all(c in "0123456789abcdef" for c in value.lower()):
        record = store.get(value)
        return _plan_from_document(record.document, f"record {record.id}")
    return None


def _plan_from_document(document: dict, label: str) -> dict:
    if isinstance(document, dict) and document.get("kind") == "plan":
        document = document.get("plan")
    if not isinstance(document, dict) or document.get("schema") != PLAN_SCHEMA:
        if isinstance(document, dict) and document.get("model") and document.get("config"):
            return None  # a checkpoint snapshot file, not a plan: plan it
        raise BadInput(f"{label} is not a plan ({PLAN_SCHEMA} JSON or a plan record)")
    if not document.get("command"):
        raise BadInput(f"{label}: the plan has no command")
    return document


def open_host(spec: TargetSpec, ssh: SshSettings, plan: dict, progress: Progress) -> tuple[Host, object]:
    """The host for a target, and what must be called to give the machine back (None if nothing)."""
    if spec.kind == "local":
        return LocalHost(), None
    if spec.kind == "ssh":
        host = SshHost(SshTarget(spec.host, spec.user, spec.port, ssh.identity_file, ssh.known_hosts_file, ssh.options))
        progress(f"connecting to {host.address}")
        host.check()
        return host, None
    from apron.boot.sky import SkyCluster

    cluster = SkyCluster.for_plan(plan, spec.cloud)
    progress(f"launching {cluster.name} on SkyPilot ({cluster.describe()})")
    return cluster.launch(ssh), cluster.down


def boot(
    plan: dict,
    targets: list[TargetSpec],
    options: BootOptions,
    store: RecordStore,
    after_healthy: AfterHealthy | None = None,
    ssh: SshSettings = SshSettings(),
    progress: Progress = lambda m: None,
) -> BootResult:
    if not targets:
        raise BadInput("--on: give at least one target (local, ssh://user@host, sky)")
    plan_id = store.put(plan_record(plan))
    attempts: list[dict] = []
    for number in range(options.retries + 1):
        spec = targets[number % len(targets)]
        attempt, log_bytes = _attempt(spec, plan, options, ssh, after_healthy, progress)
        last = number == options.retries
        if attempt.fault is not None and attempt.fault.is_host and not last:
            progress(
                f"host fault on {attempt.target}: {attempt.fault.reason} ({attempt.fault.evidence[:160]}); "
                f"retrying on {targets[(number + 1) % len(targets)].address}"
            )
            attempts.append(
                {
                    "target": attempt.target,
                    "started_at": attempt.started_at,
                    "fault": attempt.fault.to_json(),
                    "log_sha256": store.put_blob(log_bytes),
                }
            )
            continue
        record = boot_record(plan_id, attempt, log_bytes, store, attempts)
        return BootResult(store.put(record), record, plan_id)
    raise AssertionError("unreachable")


def _attempt(
    spec: TargetSpec,
    plan: dict,
    options: BootOptions,
    ssh: SshSettings,
    after_healthy: AfterHealthy | None,
    progress: Progress,
) -> tuple[Attempt, bytes]:
    from apron.boot.faults import classify
    from apron.paths import cache_dir

    local_dir = cache_dir() / "boot-logs" / new_run_name()  # never the run folder: that is the target's
    if spec.kind == "sky" and not (options.vllm or options.venv):
        from apron.boot.sky import VENV

        options = replace(options, venv=VENV)  # where the task's setup installed the pinned vLLM
    release = None
    try:
        host, release = open_host(spec, ssh, plan, progress)
    except HostFault as exc:
        attempt = Attempt(target=spec.address, started_at=now_iso())
        attempt.fault = classify("connect", exc.message)
        return attempt, b""
    try:
        attempt = BootRun(host, plan, options, local_dir, after_healthy, progress).execute()
    finally:
        if release is not None:
            progress(f"tearing down {spec.address}")
            release()
    log_bytes = attempt.log_path.read_bytes() if attempt.log_path and attempt.log_path.exists() else b""
    return attempt, log_bytes


def boot_record(plan_id: str, attempt: Attempt, log_bytes: bytes, store: RecordStore, attempts: list[dict]) -> dict:
    parsed = logparse.parse_log(log_bytes.decode("utf-8", errors="replace"))
    fault = attempt.fault
    if attempt.healthy:
        outcome = "healthy"
    elif fault is not None and fault.kind == "host":
        outcome = "host_fault"
    elif fault is not None and fault.kind == "harness":
        outcome = "harness_fault"
    else:
        outcome = "failed"
    marks = dict(attempt.timings.marks)
    if "engine_start_seconds" in marks:
        marks["cold_start_seconds"] = round(marks.get("weights_download_seconds", 0) + marks["engine_start_seconds"], 3)
    identity = attempt.identity or {}
    hook = attempt.hook_result or {}
    record = {
        "kind": "boot",
        "created_at": attempt.started_at,
        "plan_id": plan_id,
        "outcome": outcome,
        "counts_against_model": outcome == "failed",
        "fault": fault.to_json() if fault else None,
        "target": attempt.target,
        "engine": engine_identity(identity, parsed),
        "hardware": hardware_identity(identity, parsed),
        "command": attempt.command.to_json() if attempt.command else None,
        "model_path": attempt.model_path,
        "timings": {**marks, **{f"log_{k}": v for k, v in log_timings(parsed).items()}},
        "measured": measured_quantities(parsed) if outcome != "host_fault" else {},
        "log": {"sha256": store.put_blob(log_bytes), "bytes": len(log_bytes), "parsed": parsed.to_json()},
        "answers": hook.get("answers"),
        "serving": hook.get("serving"),
        "attempts": attempts,
        "notes": attempt.notes,
    }
    extra = {k: v for k, v in hook.items() if k not in ("answers", "serving")}
    if extra:
        record["after_healthy"] = extra
    return record


def engine_identity(identity: dict, parsed) -> dict:
    engine = identity.get("engine") or {}
    return {
        "name": "vllm",
        "version": engine.get("version") or parsed.engine_version,
        "logged_version": parsed.engine_version,
        "distributions": engine.get("distributions"),
        "wheel": engine.get("wheel"),
        "image_digest": engine.get("image_digest"),
        "packages_sha256": engine.get("packages_sha256"),
        "num_packages": engine.get("num_packages"),
        "torch": engine.get("torch"),
        "python": engine.get("python"),
    }


def hardware_identity(identity: dict, parsed) -> dict:
    gpus = identity.get("gpus") or {}
    cpu = identity.get("cpu") or {}
    has_gpu = bool(gpus.get("count"))
    platform = parsed.platform or ("gpu" if has_gpu else ("cpu" if identity else None))
    out = {
        "platform": platform,
        "hostname": identity.get("hostname"),
        "cpu_model": cpu.get("model"),
        "cpu_cores": cpu.get("cores"),
        "ram_bytes": cpu.get("ram_bytes"),
        "machine": cpu.get("machine"),
    }
    if has_gpu:
        names = gpus.get("names") or []
        out.update(
            {
                "gpu_name": names[0] if names else None,
                "gpu_count": gpus.get("count"),
                "gpu_total_bytes": (gpus.get("total_bytes") or [None])[0],
                "gpu_total_bytes_basis": gpus.get("total_bytes_basis"),
                "driver_version": gpus.get("driver_version"),
                "cuda_version": gpus.get("cuda_version"),
            }
        )
    elif gpus.get("error"):
        out["gpu_probe_error"] = gpus["error"]
    return out
