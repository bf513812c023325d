"""The boot record of one attempt, built by the stage that gathered it: outcome, identities, the
command, timings, and every number the engine's log printed (apron.records.documents.BootRecord)."""

from __future__ import annotations

from typing import Any

from apron.boot.session import Attempt
from apron.frozen import frozen, replace
from apron.measure.logparse import ParsedLog, parse_log
from apron.plan.quantity import Unit
from apron.records.documents import (
    BootRecord,
    EarlierAttempt,
    EngineIdentity,
    HardwareIdentity,
    LogRef,
    Measured,
    Outcome,
)
from apron.units import GIB_RESOLUTION_BYTES

# Parsed log field -> (name in the record, unit). Names shared with the plan use the plan's names,
# so `compare` lines them up.
MEASURED_FIELDS: dict[str, tuple[str, Unit]] = {
    "weights_bytes": ("weights_bytes_per_gpu", "bytes"),
    "activation_peak_bytes": ("activation_peak_bytes", "bytes"),
    "cudagraph_estimate_bytes": ("cudagraph_bytes", "bytes"),
    "cudagraph_bytes": ("cudagraph_actual_bytes", "bytes"),
    "non_torch_bytes": ("non_torch_bytes", "bytes"),
    "requested_bytes": ("requested_bytes", "bytes"),
    "available_kv_bytes": ("available_kv_bytes", "bytes"),
    "num_gpu_blocks": ("num_kv_blocks", "blocks"),
    "kv_tokens": ("kv_tokens", "tokens"),
    "max_concurrency": ("max_concurrency", "sequences"),
    "total_memory_bytes": ("total_memory_bytes", "bytes"),
    "consumed_bytes": ("consumed_bytes", "bytes"),
    "non_kv_bytes": ("non_kv_bytes", "bytes"),
    "max_model_len": ("max_model_len", "tokens"),
    "block_size": ("block_size", "tokens"),
}
TIMING_FIELDS = (
    "weights_load_seconds",
    "model_load_seconds",
    "torch_compile_seconds",
    "graph_capture_seconds",
    "init_engine_seconds",
)


@frozen
class EngineLog:
    """The engine's log of one attempt, decoded and parsed once. The boot record is built from it and it
    travels with the boot's result to whoever reads it next (the --fix loop); the store keeps the bytes."""

    text: str
    parsed: ParsedLog
    num_bytes: int

    @classmethod
    def read(cls, raw: bytes) -> EngineLog:
        text = raw.decode("utf-8", errors="replace")
        return cls(text, parse_log(text), len(raw))


def boot_record(
    plan_id: str, attempt: Attempt, log: EngineLog, log_sha256: str, earlier: list[EarlierAttempt]
) -> BootRecord:
    parsed = log.parsed
    outcome = _outcome(attempt)
    marks = dict(attempt.timings.marks)
    if "engine_start_seconds" in marks:
        marks["cold_start_seconds"] = round(marks.get("weights_download_seconds", 0) + marks["engine_start_seconds"], 3)
    hook = dict(attempt.hook_result or {})
    after_healthy = {k: v for k, v in hook.items() if k not in ("answers", "serving")}
    return BootRecord(
        created_at=attempt.started_at,
        plan_id=plan_id,
        outcome=outcome,
        target=attempt.target,
        engine=engine_identity(attempt.identity, parsed),
        hardware=hardware_identity(attempt.identity, parsed),
        log=LogRef(log_sha256, log.num_bytes, parsed.to_json()),
        fault=attempt.fault,
        command=attempt.command.to_json() if attempt.command else None,
        model_path=attempt.model_path,
        timings={**marks, **{f"log_{k}": v for k, v in log_timings(parsed).items()}},
        measured=measured_quantities(parsed) if outcome != "host_fault" else {},
        answers=hook.get("answers"),
        serving=hook.get("serving"),
        attempts=tuple(earlier),
        notes=tuple(attempt.notes),
        after_healthy=after_healthy or None,
    )


def _outcome(attempt: Attempt) -> Outcome:
    fault = attempt.fault
    if attempt.healthy:
        return "healthy"
    if fault is not None and fault.kind == "host":
        return "host_fault"
    if fault is not None and fault.kind == "harness":
        return "harness_fault"
    return "failed"


def measured_quantities(parsed: ParsedLog) -> dict[str, Measured]:
    out = {}
    for name, (record_name, unit) in MEASURED_FIELDS.items():
        value = getattr(parsed, name)
        if value is None:
            continue
        if record_name == "cudagraph_bytes" and parsed.cudagraph_estimate_bytes is None:
            continue
        basis = "vLLM log " + parsed.sources.get(name, "(derived from logged lines)")
        out[record_name] = Measured(
            value,
            unit,
            basis[:400],
            GIB_RESOLUTION_BYTES if unit == "bytes" else None,
            parsed.per_rank.get(name),
        )
    return out


def log_timings(parsed: ParsedLog) -> dict[str, float]:
    return {name: getattr(parsed, name) for name in TIMING_FIELDS if getattr(parsed, name) is not None}


def engine_identity(identity: dict[str, Any], parsed: ParsedLog) -> EngineIdentity:
    engine = identity.get("engine") or {}
    return EngineIdentity(
        version=engine.get("version") or parsed.engine_version,
        logged_version=parsed.engine_version,
        distributions=engine.get("distributions"),
        wheel=engine.get("wheel"),
        image_digest=engine.get("image_digest"),
        packages_sha256=engine.get("packages_sha256"),
        num_packages=engine.get("num_packages"),
        torch=engine.get("torch"),
        python=engine.get("python"),
    )


def hardware_identity(identity: dict[str, Any], parsed: ParsedLog) -> HardwareIdentity:
    gpus = identity.get("gpus") or {}
    cpu = identity.get("cpu") or {}
    has_gpu = bool(gpus.get("count"))
    platform = parsed.platform or ("gpu" if has_gpu else ("cpu" if identity else None))
    host = HardwareIdentity(
        platform=platform,
        hostname=identity.get("hostname"),
        cpu_model=cpu.get("model"),
        cpu_cores=cpu.get("cores"),
        ram_bytes=cpu.get("ram_bytes"),
        machine=cpu.get("machine"),
    )
    if not has_gpu:
        return replace(host, gpu_probe_error=gpus.get("error"))
    names = gpus.get("names") or []
    return replace(
        host,
        gpu_name=names[0] if names else None,
        gpu_count=gpus.get("count"),
        gpu_total_bytes=(gpus.get("total_bytes") or [None])[0],
        gpu_total_bytes_basis=gpus.get("total_bytes_basis"),
        driver_version=gpus.get("driver_version"),
        cuda_version=gpus.get("cuda_version"),
    )
