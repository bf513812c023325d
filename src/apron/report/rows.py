"""Records as rows for the report: the one module that reads a record's fields.

Records are read only through RecordStore, as the typed documents it hands out (apron.records.documents);
every field the charts and pages show is taken out here, into frozen rows. A record this Apron does not
read (an UnreadRecord: a kind or schema it does not know) is listed as skipped, with its reason.

A boot's prediction is the plan record the boot links to (its plan_id): the plan it booted, so a
prediction made before the measurement. A plan made later for the same model is never paired with it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from apron.frozen import field, frozen
from apron.plan.result import Plan
from apron.records.documents import (
    BootRecord,
    FixRecord,
    HardwareIdentity,
    PlanRecord,
    ProbeRecord,
    RecordDocument,
    UnreadRecord,
)
from apron.records.probe import PredictedBuffer, ProbeBlock
from apron.records.store import RecordStore, StoredRecord

KINDS_DRAWN = ("plan", "boot", "fix", "probe")
# Arguments the boot harness adds to every vllm serve command (where it listens, what it is called):
# not settings of the deployment, so not "flags beyond defaults".
_HARNESS_FLAGS = {"--host", "--port", "--served-model-name", "--revision"}
VERDICT_NAMES = ("booted", "responded", "answered", "served")


@frozen
class Quantity:
    value: float | None
    unit: str
    label: str
    basis: str = ""
    low: float | None = None  # the plan's stated range (docs/memory.md section 7)
    high: float | None = None


@frozen
class PlanRow:
    record_id: str | None  # None for a plan that is not in a store (apron plan --html)
    model: str
    engine_version: str
    gpu_name: str
    gpu_count: int
    total_bytes_per_gpu: int
    gpu_memory_utilization: float | None
    max_model_len_tokens: int | None
    verdict: str
    quantities: dict[str, Quantity]
    layout: str  # attention layout family, e.g. "GQA", "sliding + full", "hybrid: mamba + full"
    flags: tuple[str, ...]
    command: str

    def value(self, name: str) -> float | None:
        q = self.quantities.get(name)
        return None if q is None else q.value


@frozen
class Serving:
    num_requests: int
    ttft_p50_seconds: float
    ttft_p99_seconds: float
    output_tokens_per_second_per_user: float | None


@frozen
class BootRow:
    record_id: str
    created_at: str
    outcome: str
    fault: str | None
    plan: PlanRow | None  # the linked plan: the prediction made before this boot
    plan_id: str | None
    model: str
    engine_version: str
    platform: str  # gpu | cpu | ?
    gpu_class: str  # "H100 80GB HBM3", "CPU" ...
    hardware: str  # "1 x NVIDIA H100 80GB HBM3", "CPU (AMD EPYC ...)"
    total_bytes: float | None  # one device's total as the engine saw it (measured), when logged
    measured: dict[str, float]
    verdicts: dict[str, bool | None]
    flags: tuple[str, ...]
    num_checks_passed: int | None
    num_checks: int | None
    cold_start_seconds: float | None
    serving: Serving | None
    not_comparable: str | None  # why the plan's memory numbers do not describe this boot, or None


@frozen
class FixRow:
    record_id: str
    rule: str
    engine_version: str
    status: str
    failed_boot: str | None
    corrected_boot: str | None
    corrected_flags: tuple[str, ...]


@frozen
class ProbeRow:
    """A probe record: the peak the allocator probe saw in a boot's profiling run, and how much of it the
    plan's buffers account for."""

    record_id: str
    boot_id: str
    plan_id: str
    status: str
    platform: str | None
    peak_bytes: int | None
    matched_bytes: int | None
    logged_peak_bytes: int | None
    predicted_peak_bytes: int | None
    peak_phase: str | None
    moment: str | None  # the plan's moment that the peak's blocks match best
    error: str | None
    blocks: tuple[ProbeBlock, ...] = ()  # alive at the peak, largest first, with the buffer each is
    predicted: tuple[PredictedBuffer, ...] = ()  # the moment's buffers: right or missing

    @property
    def unmatched_bytes(self) -> int | None:
        if self.peak_bytes is None or self.matched_bytes is None:
            return None
        return self.peak_bytes - self.matched_bytes


@frozen
class Skipped:
    record_id: str
    reason: str


@frozen
class Selection:
    boots: list[BootRow] = field(default_factory=list)
    plans: list[PlanRow] = field(default_factory=list)  # plans no selected boot links to
    fixes: list[FixRow] = field(default_factory=list)
    probes: list[ProbeRow] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def num_records(self) -> int:
        return len(self.boots) + len(self.plans) + len(self.fixes) + len(self.probes)


def select(store: RecordStore, record_ids: list[str] | None = None) -> Selection:
    """The chosen records (all of them when no ids are given) as rows; unknown ids raise BadInput."""
    records = [store.get(rid) for rid in record_ids] if record_ids else store.all()
    unique = list({r.id: r for r in records}.values())
    plans_seen: dict[str, PlanRow | None] = {}
    selection = Selection()
    for record in unique:
        doc = record.document
        why = _why_skipped(record)
        if why:
            selection.skipped.append(Skipped(record.id, why))
        elif isinstance(doc, BootRecord):
            selection.boots.append(_boot_row(record.id, doc, _linked_plan(store, doc.plan_id, plans_seen)))
        elif isinstance(doc, FixRecord):
            selection.fixes.append(_fix_row(record.id, doc))
        elif isinstance(doc, ProbeRecord):
            selection.probes.append(probe_row(record.id, doc))
    linked = {b.plan_id for b in selection.boots}
    for record in unique:
        if isinstance(record.document, PlanRecord) and record.id not in linked:
            selection.plans.append(plan_row(record.document.plan, record.id))
    selection.boots.sort(key=lambda b: (b.created_at, b.record_id))
    selection.plans.sort(key=lambda p: (p.model, p.gpu_name, p.record_id or ""))
    selection.probes.sort(key=lambda p: (p.boot_id, p.record_id))
    return selection


def _why_skipped(record: StoredRecord[RecordDocument]) -> str | None:
    if isinstance(record.document, UnreadRecord):
        return record.document.reason
    if record.kind not in KINDS_DRAWN:
        return f"a {record.kind} record: this Apron does not draw that kind yet"
    return None


def _linked_plan(store: RecordStore, plan_id: str, seen: dict[str, PlanRow | None]) -> PlanRow | None:
    if not plan_id:
        return None
    if plan_id not in seen:
        plan = store.get(plan_id).document
        seen[plan_id] = plan_row(plan.plan, plan_id) if isinstance(plan, PlanRecord) else None
    return seen[plan_id]


# ---- plans ---------------------------------------------------------------------------------------


def plan_row(plan: Plan, record_id: str | None = None) -> PlanRow:
    """A plan (a plan record's, or `apron plan`'s own) as a row."""
    settings = plan.settings
    return PlanRow(
        record_id=record_id,
        model=plan.model.repo_id or _model_name(plan.model.source, plan.model.source_kind),
        engine_version=plan.engine_version or "?",
        gpu_name=plan.gpu_name or "?",
        gpu_count=int(plan.gpu_count or 1),
        total_bytes_per_gpu=int(plan.total_bytes_per_gpu or 0),
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_model_len_tokens=settings.max_model_len,
        verdict=plan.verdict or "?",
        quantities={n: Quantity(q.value, q.unit, q.label, q.basis, q.low, q.high) for n, q in plan.quantities.items()},
        layout=layout_family(plan),
        flags=tuple(plan.flags),
        command=plan.command or "",
    )


def _model_name(source: str, source_kind: str) -> str:
    """A local checkpoint folder by its name: the path is the machine's, the name is the model's."""
    return Path(source).name or source if source_kind == "local" else source


def layout_family(plan: Plan) -> str:
    """The attention layout from the plan's KV layers: full (every head keeps K and V), GQA (fewer KV
    heads than query heads), MLA, sliding + full, or a hybrid whose pool also holds per-request state."""
    details = plan.details or {}
    layers = (details.get("kv") or {}).get("layers") or {}
    kinds = sorted({key.split()[0] for key in layers})
    if not kinds:
        return "unknown"
    states = [k for k in kinds if k == "mamba"]
    attention = [k for k in kinds if k != "mamba"]
    if states:
        return "state only (mamba)" if not attention else "hybrid: mamba + " + " + ".join(attention)
    if attention == ["mla"]:
        return "MLA"
    if attention == ["full"]:
        shape = details.get("model_shape") or {}
        heads, kv_heads = shape.get("num_attention_heads"), shape.get("num_key_value_heads")
        return "GQA" if heads and kv_heads and kv_heads < heads else "full"
    return " + ".join(sorted(attention, key=lambda k: k != "sliding"))


# ---- boots ---------------------------------------------------------------------------------------


def _boot_row(record_id: str, doc: BootRecord, plan: PlanRow | None) -> BootRow:
    fault = doc.fault
    checks = (doc.answers or {}).get("checks")
    measured = {name: q.value for name, q in doc.measured.items() if q.value is not None}
    return BootRow(
        record_id=record_id,
        created_at=doc.created_at,
        outcome=doc.outcome,
        fault=f"{fault.kind} fault: {fault.reason}" if fault else None,
        plan=plan,
        plan_id=doc.plan_id,
        model=plan.model if plan else (doc.served_model or "?"),
        engine_version=doc.engine.version or "?",
        platform=doc.hardware.platform or "?",
        gpu_class=_gpu_class(doc.hardware),
        hardware=_hardware_text(doc.hardware),
        total_bytes=measured.get("total_memory_bytes") or doc.hardware.gpu_total_bytes,
        measured=measured,
        verdicts=_verdicts(doc),
        flags=_flags(doc),
        num_checks_passed=sum(c.get("status") == "pass" for c in checks) if checks else None,
        num_checks=len(checks) if checks else None,
        cold_start_seconds=doc.timings.get("cold_start_seconds"),
        serving=_serving(doc),
        not_comparable=_not_comparable(plan, doc.hardware, doc.outcome),
    )


def _gpu_class(hardware: HardwareIdentity) -> str:
    if hardware.gpu_name:
        return hardware.gpu_name.replace("NVIDIA ", "").replace("GeForce ", "")
    return "CPU" if hardware.platform == "cpu" else "?"


def _hardware_text(hardware: HardwareIdentity) -> str:
    if hardware.gpu_name:
        return f"{hardware.gpu_count or 1} x {hardware.gpu_name}"
    if hardware.platform == "cpu":
        return f"CPU ({hardware.cpu_model or 'model not reported'}, {hardware.cpu_cores or '?'} cores)"
    return "not reported"


def _verdicts(doc: BootRecord) -> dict[str, bool | None]:
    given = doc.verdicts
    out: dict[str, bool | None] = {name: given.get(name) for name in VERDICT_NAMES}
    out["booted"] = doc.outcome == "healthy"
    return out


def _flags(doc: BootRecord) -> tuple[str, ...]:
    """The vllm serve arguments after the model, less the harness's own (host, port, name)."""
    argv = list((doc.command or {}).get("argv") or [])[3:]
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        if word.split("=")[0] in _HARNESS_FLAGS:
            i += 1 if "=" in word or not takes_value else 2
            continue
        out.append(shlex.join(argv[i : i + 2]) if takes_value else word)
        i += 2 if takes_value else 1
    return tuple(out)


def _serving(doc: BootRecord) -> Serving | None:
    figures = (doc.serving or {}).get("figures") or {}
    ttft = figures.get("ttft") or {}
    if not figures.get("completed") or ttft.get("p50_seconds") is None:
        return None
    return Serving(
        num_requests=int(figures["completed"]),
        ttft_p50_seconds=float(ttft["p50_seconds"]),
        ttft_p99_seconds=float(ttft["p99_seconds"]),
        output_tokens_per_second_per_user=figures.get("output_tokens_per_second_per_user"),
    )


def _not_comparable(plan: PlanRow | None, hardware: HardwareIdentity, outcome: str) -> str | None:
    """Why this boot's memory numbers cannot be set against its plan's (None when they can)."""
    if plan is None:
        return "no linked plan in the store"
    if outcome == "host_fault":
        return "a host fault: nothing measured counts against the model"
    if hardware.platform == "cpu":
        # A plan made for the CPU platform itself would compare; a GPU plan booted on a CPU does not.
        if plan.gpu_name.lower() != "cpu":
            return f"ran on a CPU, planned for {plan.gpu_name}"
        return None
    if not hardware.gpu_name:
        return "the boot's GPU was not identified"
    if hardware.gpu_name != plan.gpu_name:
        return f"ran on {hardware.gpu_name}, planned for {plan.gpu_name}"
    return None


# ---- fixes ---------------------------------------------------------------------------------------


def _fix_row(record_id: str, doc: FixRecord) -> FixRow:
    return FixRow(
        record_id=record_id,
        rule=doc.rule or "?",
        engine_version=doc.engine_version or "?",
        status=doc.status or "?",
        failed_boot=doc.failed_boot,
        corrected_boot=doc.corrected_boot,
        corrected_flags=tuple(doc.corrected_flags),
    )


# ---- probes --------------------------------------------------------------------------------------


def probe_row(record_id: str, doc: ProbeRecord) -> ProbeRow:
    peak = doc.peak
    return ProbeRow(
        record_id=record_id,
        boot_id=doc.boot_id,
        plan_id=doc.plan_id,
        status=doc.status,
        platform=doc.platform,
        peak_bytes=doc.peak_bytes,
        matched_bytes=doc.matched_bytes,
        logged_peak_bytes=doc.logged_peak_bytes,
        predicted_peak_bytes=doc.predicted_peak_bytes,
        peak_phase=doc.peak_phase,
        moment=peak.moment if peak else None,
        error=doc.error,
        blocks=peak.blocks if peak else (),
        predicted=peak.predicted if peak else (),
    )
