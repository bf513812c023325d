"""The documents Apron stores, one frozen dataclass per kind: a plan record, a boot record, a fix
record, a probe record (and any later kind: subclass `RecordDocument` with its own KIND, to_json and from_json, and
the store reads and writes it).

A boot record holds only what was observed: every number under "measured" comes from a line of the
engine's log (its basis names the line) and is labelled measured; a number the log did not print is
absent, never estimated. Host faults are kept as what they are (outcome "host_fault") and are never
counted against the model. The stage that owns the data builds each document (the boot builds the
boot record, the fix loop the fix record); this module only says what a document is.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from apron.frozen import field, frozen
from apron.plan.quantity import UNITS, Unit, one_of
from apron.plan.result import REQUIRED_QUANTITIES, Plan
from apron.plan.result import SCHEMA as PLAN_SCHEMA
from apron.records.probe import PredictedBuffer, ProbeBlock, RetainedSegment

Json = dict[str, Any]
GIB = 2**30
Outcome = Literal["healthy", "failed", "host_fault", "harness_fault"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
FaultKind = Literal["host", "harness", "model"]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
FixStatus = Literal["hypothesis", "proven"]
FIX_STATUSES: tuple[FixStatus, ...] = get_args(FixStatus)


class RecordDocument:
    """One kind of record. Subclasses are frozen dataclasses; each registers its KIND here."""

    KIND: ClassVar[str]
    kinds: ClassVar[dict[str, type[RecordDocument]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:  # UnreadRecord stands in for kinds this Apron does not know: never registered
            RecordDocument.kinds[cls.KIND] = cls

    def to_json(self) -> Json:
        raise NotImplementedError

    @classmethod
    def from_json(cls, document: Json) -> RecordDocument:
        raise NotImplementedError

    @classmethod
    def unread_reason(cls, document: Json) -> str | None:
        """Why this Apron cannot read a record of its kind (a newer inner schema), or None."""
        return None

    def field_value(self, name: str) -> object:
        """A top-level field, for lookups by field (RecordStore.find)."""
        return getattr(self, name, None)


@frozen
class UnreadRecord(RecordDocument):
    """A record this Apron does not read: a kind it does not know or a schema newer than its own (a
    newer Apron wrote it). Listed and skipped with this reason, never a failure of the whole store."""

    KIND: ClassVar[str] = ""
    kind: str
    schema_version: object
    reason: str

    def to_json(self) -> Json:
        raise TypeError(f"an unread {self.kind} record is never written again: {self.reason}")


def document_from_json(document: Json, schema_version: int) -> RecordDocument:
    """The typed document of a stored record (KeyError, TypeError, ValueError when it is damaged);
    an UnreadRecord for a kind or schema this Apron does not read."""
    kind, version = document.get("kind"), document.get("schema_version", schema_version)
    if not isinstance(version, int) or version > schema_version:
        return UnreadRecord(str(kind), version, f"schema {version} is newer than this Apron's ({schema_version})")
    if kind not in RecordDocument.kinds:
        return UnreadRecord(str(kind), version, f"this Apron does not read {kind!r} records")
    cls = RecordDocument.kinds[str(kind)]
    reason = cls.unread_reason(document)
    return UnreadRecord(str(kind), version, reason) if reason else cls.from_json(document)


# -------------------------------------------------------------------------------------------- plan


@frozen
class PlanRecord(RecordDocument):
    """A plan as a record. No timestamp: the same plan is the same record."""

    KIND: ClassVar[str] = "plan"
    plan: Plan

    def to_json(self) -> Json:
        return {"kind": self.KIND, "plan": self.plan.to_json()}

    @classmethod
    def from_json(cls, document: Json) -> PlanRecord:
        return cls(Plan.from_json(document["plan"], "the plan record"))

    @classmethod
    def unread_reason(cls, document: Json) -> str | None:
        plan = document.get("plan")
        schema = plan.get("schema") if isinstance(plan, dict) else None
        return None if schema == PLAN_SCHEMA else f"a plan of schema {schema}: this Apron reads {PLAN_SCHEMA}"


# -------------------------------------------------------------------------------------------- boot


@frozen
class Fault:
    """Whose failure it was (apron.rules.failure decides), in a few stable words and the deciding line."""

    kind: FaultKind
    reason: str  # short and stable: what kind of failure, for people and for grouping
    evidence: str  # the line that decided it
    stage: str = ""

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    def to_json(self) -> Json:
        return {"kind": self.kind, "reason": self.reason, "evidence": self.evidence[:1000], "stage": self.stage}

    @classmethod
    def from_json(cls, document: Json) -> Fault:
        return cls(
            one_of(document["kind"], FAULT_KINDS, "fault kind"),
            str(document["reason"]),
            str(document.get("evidence", "")),
            str(document.get("stage", "")),
        )


@frozen
class Measured:
    """One number read from the engine's log."""

    value: int | float
    unit: Unit
    basis: str
    resolution_bytes: int | None = None  # a GiB figure printed with two decimals is exact to this
    per_rank: dict[str, Any] | None = None  # process -> value, where the tensor-parallel ranks printed their own

    def to_json(self) -> Json:
        out: Json = {"value": self.value, "unit": self.unit, "label": "measured", "basis": self.basis}
        if self.resolution_bytes is not None:
            out["resolution_bytes"] = self.resolution_bytes
        if self.per_rank is not None:
            out["per_rank"] = self.per_rank
        return out

    @classmethod
    def from_json(cls, document: Json) -> Measured:
        return cls(
            document["value"],
            one_of(document["unit"], UNITS, "unit"),
            str(document.get("basis", "")),
            document.get("resolution_bytes"),
            document.get("per_rank"),
        )


@frozen
class EngineIdentity:
    version: str | None
    logged_version: str | None = None
    distributions: Any = None
    wheel: str | None = None
    image_digest: str | None = None
    packages_sha256: str | None = None
    num_packages: int | None = None
    torch: str | None = None
    python: str | None = None

    def to_json(self) -> Json:
        return {"name": "vllm", **{name: getattr(self, name) for name in _ENGINE_FIELDS}}

    @classmethod
    def from_json(cls, document: Json) -> EngineIdentity:
        return cls(**{name: document.get(name) for name in _ENGINE_FIELDS})


_ENGINE_FIELDS = tuple(EngineIdentity.__dataclass_fields__)


@frozen
class HardwareIdentity:
    """The machine as its probe saw it; the GPU fields only where it has GPUs."""

    platform: str | None
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = None
    ram_bytes: int | None = None
    machine: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_total_bytes: int | None = None
    gpu_total_bytes_basis: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    gpu_probe_error: str | None = None

    def to_json(self) -> Json:
        out: Json = {name: getattr(self, name) for name in _HOST_FIELDS}
        if self.gpu_count:
            out.update({name: getattr(self, name) for name in _GPU_FIELDS})
        elif self.gpu_probe_error:
            out["gpu_probe_error"] = self.gpu_probe_error
        return out

    @classmethod
    def from_json(cls, document: Json) -> HardwareIdentity:
        return cls(**{name: document.get(name) for name in (*_HOST_FIELDS, *_GPU_FIELDS, "gpu_probe_error")})

    def describe(self) -> str:
        if self.gpu_name:
            return f"{self.gpu_count} x {self.gpu_name}"
        return f"CPU {self.cpu_model or '(model not reported)'}" if self.platform == "cpu" else "not reported"


_HOST_FIELDS = ("platform", "hostname", "cpu_model", "cpu_cores", "ram_bytes", "machine")
_GPU_FIELDS = (
    "gpu_name",
    "gpu_count",
    "gpu_total_bytes",
    "gpu_total_bytes_basis",
    "driver_version",
    "cuda_version",
)


@frozen
class EarlierAttempt:
    """A try that ended in a host fault and was retried on the next target."""

    target: str
    started_at: str
    fault: Fault
    log_sha256: str

    def to_json(self) -> Json:
        return {
            "target": self.target,
            "started_at": self.started_at,
            "fault": self.fault.to_json(),
            "log_sha256": self.log_sha256,
        }

    @classmethod
    def from_json(cls, document: Json) -> EarlierAttempt:
        return cls(
            str(document["target"]),
            str(document["started_at"]),
            Fault.from_json(document["fault"]),
            str(document["log_sha256"]),
        )


@frozen
class LogRef:
    """The engine log, kept as a blob, and what was read from it."""

    sha256: str
    bytes: int
    parsed: Json = field(default_factory=dict, compare=False)

    def to_json(self) -> Json:
        return {"sha256": self.sha256, "bytes": self.bytes, "parsed": self.parsed}

    @classmethod
    def from_json(cls, document: Json) -> LogRef:
        return cls(str(document["sha256"]), int(document["bytes"]), dict(document.get("parsed") or {}))


@frozen
class BootRecord(RecordDocument):
    KIND: ClassVar[str] = "boot"
    created_at: str
    plan_id: str
    outcome: Outcome
    target: str
    engine: EngineIdentity
    hardware: HardwareIdentity
    log: LogRef | None  # None for a boot imported from a published record (calibrate/published.py)
    fault: Fault | None = None
    command: Json | None = None  # argv, env, shell line, profile (apron.boot.command.ServeCommand)
    model_path: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    measured: dict[str, Measured] = field(default_factory=dict)
    answers: Json | None = None  # the check report (apron.measure.checks)
    serving: Json | None = None  # the serving test (apron.measure.servetest)
    attempts: tuple[EarlierAttempt, ...] = ()
    notes: tuple[str, ...] = ()
    after_healthy: Json | None = None  # the rest of what ran after /health (smoke reply, verdicts)
    source: Json | None = None  # an imported boot: the file it came from, its sha256 and the entry's index

    @property
    def counts_against_model(self) -> bool:
        return self.outcome == "failed"

    @property
    def verdicts(self) -> dict[str, bool | None]:
        """booted / responded / answered / served, where the checks ran."""
        return dict((self.after_healthy or {}).get("verdicts") or {})

    @property
    def responded(self) -> bool:
        """Healthy, and the endpoint produced tokens (whether they are right, the checks say)."""
        reply = (self.after_healthy or {}).get("responded") or {}
        return self.outcome == "healthy" and bool(reply.get("ok"))

    @property
    def served_model(self) -> str | None:
        """The model argument of the `vllm serve` command the boot ran."""
        argv = (self.command or {}).get("argv") or []
        return str(argv[2]) if len(argv) > 2 else None

    def to_json(self) -> Json:
        out: Json = {
            "kind": self.KIND,
            "created_at": self.created_at,
            "plan_id": self.plan_id,
            "outcome": self.outcome,
            "counts_against_model": self.counts_against_model,
            "fault": self.fault.to_json() if self.fault else None,
            "target": self.target,
            "engine": self.engine.to_json(),
            "hardware": self.hardware.to_json(),
            "command": self.command,
            "model_path": self.model_path,
            "timings": dict(self.timings),
            "measured": {name: m.to_json() for name, m in self.measured.items()},
            "log": self.log.to_json() if self.log else None,
            "answers": self.answers,
            "serving": self.serving,
            "attempts": [a.to_json() for a in self.attempts],
            "notes": list(self.notes),
        }
        if self.after_healthy:
            out["after_healthy"] = self.after_healthy
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, document: Json) -> BootRecord:
        fault = document.get("fault")
        return cls(
            created_at=str(document.get("created_at") or ""),
            plan_id=str(document["plan_id"]),
            outcome=one_of(document["outcome"], OUTCOMES, "outcome"),
            target=str(document.get("target") or ""),
            engine=EngineIdentity.from_json(document.get("engine") or {}),
            hardware=HardwareIdentity.from_json(document.get("hardware") or {}),
            log=LogRef.from_json(document["log"]) if document.get("log") else None,
            fault=Fault.from_json(fault) if fault else None,
            command=document.get("command"),
            model_path=document.get("model_path"),
            timings=dict(document.get("timings") or {}),
            measured={name: Measured.from_json(m) for name, m in (document.get("measured") or {}).items()},
            answers=document.get("answers"),
            serving=document.get("serving"),
            attempts=tuple(EarlierAttempt.from_json(a) for a in document.get("attempts") or ()),
            notes=tuple(document.get("notes") or ()),
            after_healthy=document.get("after_healthy"),
            source=document.get("source"),
        )


# --------------------------------------------------------------------------------------------- fix


@frozen
class FixRecord(RecordDocument):
    """A correction rule applied between two boots: the failed one, and the corrected one once it ran.
    A settled fix record (corrected_boot set) names the hypothesis record it settles."""

    KIND: ClassVar[str] = "fix"
    rule: str
    engine_version: str
    failed_boot: str
    family: str
    fingerprint: str
    fields: Json
    corrected_flags: tuple[str, ...]
    corrected_command: str
    could_have_known: str
    status: FixStatus = "hypothesis"
    corrected_boot: str | None = None
    settles: str | None = None

    def to_json(self) -> Json:
        out: Json = {
            "kind": self.KIND,
            "rule": self.rule,
            "engine_version": self.engine_version,
            "failed_boot": self.failed_boot,
            "corrected_boot": self.corrected_boot,
            "status": self.status,
            "family": self.family,
            "fingerprint": self.fingerprint,
            "fields": self.fields,
            "corrected_flags": list(self.corrected_flags),
            "corrected_command": self.corrected_command,
            "could_have_known": self.could_have_known,
        }
        if self.settles is not None:
            out["settles"] = self.settles
        return out

    @classmethod
    def from_json(cls, document: Json) -> FixRecord:
        return cls(
            rule=str(document["rule"]),
            engine_version=str(document["engine_version"]),
            failed_boot=str(document["failed_boot"]),
            family=str(document.get("family", "")),
            fingerprint=str(document.get("fingerprint", "")),
            fields=dict(document.get("fields") or {}),
            corrected_flags=tuple(document.get("corrected_flags") or ()),
            corrected_command=str(document.get("corrected_command", "")),
            could_have_known=str(document.get("could_have_known", "")),
            status=one_of(document.get("status", "hypothesis"), FIX_STATUSES, "fix status"),
            corrected_boot=document.get("corrected_boot"),
            settles=document.get("settles"),
        )


# ------------------------------------------------------------------------------------ comparison


def compare(plan: Plan, boot: BootRecord) -> Json:
    """Predicted beside measured, with the error (predicted - measured) in GiB and in % of measured."""
    # the card's order (a stored plan reads back with its quantities in key order)
    names = [n for n in REQUIRED_QUANTITIES if n in plan.quantities] + sorted(
        set(plan.quantities) - set(REQUIRED_QUANTITIES)
    )
    rows = []
    for name in sorted(
        set(names) | set(boot.measured), key=lambda n: (names.index(n) if n in names else len(names), n)
    ):
        predicted, measured = plan.quantities.get(name), boot.measured.get(name)
        if measured is None and (predicted is None or predicted.value is None):
            continue
        unit = measured.unit if measured else predicted.unit if predicted else None
        row = _row(
            name,
            unit,
            predicted.value if predicted else None,
            predicted.label if predicted else None,
            measured.value if measured else None,
        )
        if measured is not None and measured.resolution_bytes and row["error"] is not None:
            row["within_log_rounding"] = abs(row["error"]) <= measured.resolution_bytes  # at most half a 0.01 GiB step
        rows.append(row)
    return {
        "plan_id": boot.plan_id,
        "outcome": boot.outcome,
        "engine": {"planned": plan.engine_version, "booted": boot.engine.version},
        "rows": rows,
        "warnings": _warnings(plan, boot),
    }


def _warnings(plan: Plan, boot: BootRecord) -> list[str]:
    warnings = []
    hardware = boot.hardware
    if hardware.platform == "cpu" and plan.gpu_name != "cpu":
        warnings.append(
            f"this boot ran on a CPU ({hardware.cpu_model or 'model not reported'}), the plan on "
            f"{plan.gpu_name}: memory numbers are not comparable, only the way they are read"
        )
    elif hardware.gpu_name and hardware.gpu_name != plan.gpu_name:
        warnings.append(f"the plan was for {plan.gpu_name}, the boot ran on {hardware.gpu_name}")
    booted = (boot.engine.version or "").split("+", 1)[0]
    if booted and booted != plan.engine_version:
        warnings.append(f"the plan was for vLLM {plan.engine_version}, the boot ran vLLM {boot.engine.version}")
    if boot.outcome == "host_fault":
        warnings.append("a host fault: nothing here is counted against the model")
    return warnings


def _row(name: str, unit: str | None, predicted: float | None, label: str | None, measured: float | None) -> Json:
    row: Json = {
        "name": name,
        "unit": unit,
        "predicted": predicted,
        "predicted_label": label,
        "measured": measured,
        "error": None,
        "error_gib": None,
        "error_pct": None,
    }
    if predicted is not None and measured is not None:
        row["error"] = predicted - measured
        if unit == "bytes":
            row["error_gib"] = round((predicted - measured) / GIB, 3)
        row["error_pct"] = round((predicted - measured) / measured * 100, 2) if measured else None
    return row


# ------------------------------------------------------------------------------------------- probe

ProbeStatus = Literal["recorded", "failed", "not_run"]
PROBE_STATUSES: tuple[ProbeStatus, ...] = get_args(ProbeStatus)


@frozen
class ProbePhase:
    """The peak inside one part of the profiling run (the function it was in: _dummy_run,
    _dummy_sampler_run, an encoder), every block alive then, and the planner moment that matches best."""

    name: str
    peak_bytes: int
    moment: str  # the planner's moment whose buffers account for most of the live bytes
    blocks: tuple[ProbeBlock, ...]  # largest first, each with its planner buffer or None
    predicted: tuple[PredictedBuffer, ...]  # that moment's buffers: right or missing
    allocated: tuple[ProbeBlock, ...] = ()  # the largest blocks the phase allocated, alive at its peak or not

    @property
    def matched_bytes(self) -> int:
        return sum(b.num_bytes for b in self.blocks if b.buffer is not None)

    def to_json(self) -> Json:
        return {
            "name": self.name,
            "peak_bytes": self.peak_bytes,
            "moment": self.moment,
            "matched_bytes": self.matched_bytes,
            "blocks": [b.to_json() for b in self.blocks],
            "predicted": [b.to_json() for b in self.predicted],
            "allocated": [b.to_json() for b in self.allocated],
        }

    @classmethod
    def from_json(cls, document: Json) -> ProbePhase:
        return cls(
            str(document["name"]),
            int(document["peak_bytes"]),
            str(document.get("moment", "")),
            tuple(ProbeBlock.from_json(b) for b in document.get("blocks") or ()),
            tuple(PredictedBuffer.from_json(b) for b in document.get("predicted") or ()),
            tuple(ProbeBlock.from_json(b) for b in document.get("allocated") or ()),
        )


@frozen
class ProbeRecord(RecordDocument):
    """What the allocator probe saw inside one boot's profiling run (measure/probe_hook.py), beside what
    the plan predicted. Every byte figure here is measured by the allocator (CUDA) or the profiler (CPU)
    of that boot, except the predicted_* fields, which are the linked plan's."""

    KIND: ClassVar[str] = "probe"
    created_at: str
    boot_id: str
    plan_id: str
    status: ProbeStatus
    function: str | None = None  # "module:Qualified.name" that was wrapped and ran
    platform: str | None = None  # cuda | cpu
    error: str | None = None  # why nothing (or not everything) was recorded
    peak_bytes: int | None = None  # the sum of blocks allocated in the run and alive at its peak
    allocator_peak_bytes: int | None = None  # the allocator's (CUDA) or profiler's (CPU) own counter
    logged_peak_bytes: int | None = None  # vLLM's logged activation peak (the boot record's), when logged
    predicted_peak_bytes: int | None = None
    predicted_moment: str | None = None
    peak_phase: str | None = None
    phases: tuple[ProbePhase, ...] = ()
    segments: tuple[RetainedSegment, ...] = ()
    retained_free_bytes: int | None = None  # reserved bytes in segments that hold a live block (CUDA)
    predicted_retained_bytes: int | None = None
    non_torch_growth_bytes: int | None = None
    non_torch_basis: str | None = None
    seconds: float | None = None
    ranks: tuple[tuple[int | None, int | None], ...] = ()  # (rank, peak bytes) of every process that ran it
    notes: tuple[str, ...] = ()

    @property
    def peak(self) -> ProbePhase | None:
        return next((p for p in self.phases if p.name == self.peak_phase), None)

    @property
    def matched_bytes(self) -> int | None:
        peak = self.peak
        return peak.matched_bytes if peak else None

    def to_json(self) -> Json:
        out: Json = {"kind": self.KIND}
        for name in _PROBE_SCALARS:
            out[name] = getattr(self, name)
        out["matched_bytes"] = self.matched_bytes
        out["phases"] = [p.to_json() for p in self.phases]
        out["segments"] = [s.to_json() for s in self.segments]
        out["ranks"] = [list(r) for r in self.ranks]
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_json(cls, document: Json) -> ProbeRecord:
        return cls(
            created_at=str(document.get("created_at") or ""),
            boot_id=str(document["boot_id"]),
            plan_id=str(document["plan_id"]),
            status=one_of(document["status"], PROBE_STATUSES, "probe status"),
            phases=tuple(ProbePhase.from_json(p) for p in document.get("phases") or ()),
            segments=tuple(RetainedSegment.from_json(s) for s in document.get("segments") or ()),
            ranks=tuple((r[0], r[1]) for r in document.get("ranks") or ()),
            notes=tuple(document.get("notes") or ()),
            **{name: document.get(name) for name in _PROBE_OPTIONAL},
        )


_PROBE_OPTIONAL = (
    "function",
    "platform",
    "error",
    "peak_bytes",
    "allocator_peak_bytes",
    "logged_peak_bytes",
    "predicted_peak_bytes",
    "predicted_moment",
    "peak_phase",
    "retained_free_bytes",
    "predicted_retained_bytes",
    "non_torch_growth_bytes",
    "non_torch_basis",
    "seconds",
)
_PROBE_SCALARS = ("created_at", "boot_id", "plan_id", "status", *_PROBE_OPTIONAL)
