"""Records as rows for the report: the one module that reads a record's fields.

Records are read only through RecordStore, and every field the charts and pages show is taken out
here, into frozen rows. When the records become typed documents, this is the file that changes.

A boot's prediction is the plan record the boot links to (its plan_id): the plan it booted, so a
prediction made before the measurement. A plan made later for the same model is never paired with it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apron.records.documents import UnreadRecord
from apron.records.store import SCHEMA_VERSION, RecordStore, StoredRecord

PLAN_SCHEMA = "apron.plan/1"
KINDS_DRAWN = ("plan", "boot", "fix")
# Arguments the boot harness adds to every vllm serve command (where it listens, what it is called):
# not settings of the deployment, so not "flags beyond defaults".
_HARNESS_FLAGS = {"--host", "--port", "--served-model-name", "--revision"}
VERDICT_NAMES = ("booted", "responded", "answered", "served")


@dataclass(frozen=True)
class Quantity:
    value: float | None
    unit: str
    label: str
    basis: str = ""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Serving:
    num_requests: int
    ttft_p50_seconds: float
    ttft_p99_seconds: float
    output_tokens_per_second_per_user: float | None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class FixRow:
    record_id: str
    rule: str
    engine_version: str
    status: str
    failed_boot: str | None
    corrected_boot: str | None
    corrected_flags: tuple[str, ...]


@dataclass(frozen=True)
class Skipped:
    record_id: str
    reason: str


@dataclass(frozen=True)
class Selection:
    boots: list[BootRow] = field(default_factory=list)
    plans: list[PlanRow] = field(default_factory=list)  # plans no selected boot links to
    fixes: list[FixRow] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def num_records(self) -> int:
        return len(self.boots) + len(self.plans) + len(self.fixes)


def select(store: RecordStore, record_ids: list[str] | None = None) -> Selection:
    """The chosen records (all of them when no ids are given) as rows; unknown ids raise BadInput."""
    records = [store.get(rid) for rid in record_ids] if record_ids else store.all()
    unique = list({r.id: r for r in records}.values())
    plans_seen: dict[str, PlanRow | None] = {}
    selection = Selection()
    for record in unique:
        why = _why_skipped(record)
        if why:
            selection.skipped.append(Skipped(record.id, why))
        elif record.kind == "boot":
            selection.boots.append(_boot_row(record, _linked_plan(store, record, plans_seen)))
        elif record.kind == "fix":
            selection.fixes.append(_fix_row(record))
    linked = {b.plan_id for b in selection.boots}
    for record in unique:
        if record.kind == "plan" and record.id not in linked and not _why_skipped(record):
            selection.plans.append(plan_row(record.raw["plan"], record.id))
    selection.boots.sort(key=lambda b: (b.created_at, b.record_id))
    selection.plans.sort(key=lambda p: (p.model, p.gpu_name, p.record_id or ""))
    return selection


def _why_skipped(record: StoredRecord) -> str | None:
    if isinstance(record.document, UnreadRecord):
        return record.document.reason
    doc = record.raw
    version = doc.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        return f"{record.kind} record of schema {version}: newer than this Apron (schema {SCHEMA_VERSION}); upgrade Apron to draw it"
    if record.kind not in KINDS_DRAWN:
        return f"a {record.kind} record: this Apron does not draw that kind yet"
    if record.kind == "plan" and (doc.get("plan") or {}).get("schema") != PLAN_SCHEMA:
        return f"plan of schema {(doc.get('plan') or {}).get('schema')}: this Apron reads {PLAN_SCHEMA}"
    return None


def _linked_plan(store: RecordStore, boot: StoredRecord, seen: dict[str, PlanRow | None]) -> PlanRow | None:
    plan_id = boot.raw.get("plan_id")
    if not plan_id:
        return None
    if plan_id not in seen:
        plan = store.get(plan_id)
        seen[plan_id] = None if _why_skipped(plan) else plan_row(plan.raw["plan"], plan.id)
    return seen[plan_id]


# ---- plans ---------------------------------------------------------------------------------------


def plan_row(plan: dict[str, Any], record_id: str | None = None) -> PlanRow:
    """An apron.plan/1 document (a plan record's "plan", or `apron plan --json`) as a row."""
    model, hardware, settings = plan.get("model") or {}, plan.get("hardware") or {}, plan.get("settings") or {}
    quantities = {
        name: Quantity(q.get("value"), q.get("unit", ""), q.get("label", ""), q.get("basis", ""))
        for name, q in (plan.get("quantities") or {}).items()
    }
    return PlanRow(
        record_id=record_id,
        model=model.get("repo_id") or _model_name(model),
        engine_version=(plan.get("engine") or {}).get("version") or "?",
        gpu_name=hardware.get("gpu") or "?",
        gpu_count=int(hardware.get("count") or 1),
        total_bytes_per_gpu=int(hardware.get("total_bytes_per_gpu") or 0),
        gpu_memory_utilization=settings.get("gpu_memory_utilization"),
        max_model_len_tokens=settings.get("max_model_len"),
        verdict=plan.get("verdict") or "?",
        quantities=quantities,
        layout=layout_family(plan),
        flags=tuple(plan.get("flags") or ()),
        command=plan.get("command") or "",
    )


def _model_name(model: dict[str, Any]) -> str:
    """A local checkpoint folder by its name: the path is the machine's, the name is the model's."""
    source = str(model.get("source") or "?")
    return Path(source).name or source if model.get("source_kind") == "local" else source


def layout_family(plan: dict[str, Any]) -> str:
    """The attention layout from the plan's KV layers: full (every head keeps K and V), GQA (fewer KV
    heads than query heads), MLA, sliding + full, or a hybrid whose pool also holds per-request state."""
    details = plan.get("details") or {}
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


def _boot_row(record: StoredRecord, plan: PlanRow | None) -> BootRow:
    doc = record.raw
    hardware = doc.get("hardware") or {}
    fault = doc.get("fault") or {}
    checks = (doc.get("answers") or {}).get("checks")
    outcome = doc.get("outcome") or "?"
    return BootRow(
        record_id=record.id,
        created_at=doc.get("created_at") or "",
        outcome=outcome,
        fault=f"{fault.get('kind')} fault: {fault.get('reason')}" if fault else None,
        plan=plan,
        plan_id=doc.get("plan_id"),
        model=plan.model if plan else _argv_model(doc),
        engine_version=(doc.get("engine") or {}).get("version") or "?",
        platform=hardware.get("platform") or "?",
        gpu_class=_gpu_class(hardware),
        hardware=_hardware_text(hardware),
        total_bytes=_measured(doc).get("total_memory_bytes") or hardware.get("gpu_total_bytes"),
        measured=_measured(doc),
        verdicts=_verdicts(doc, outcome),
        flags=_flags(doc),
        num_checks_passed=sum(c.get("status") == "pass" for c in checks) if checks else None,
        num_checks=len(checks) if checks else None,
        cold_start_seconds=(doc.get("timings") or {}).get("cold_start_seconds"),
        serving=_serving(doc),
        not_comparable=_not_comparable(plan, hardware, outcome),
    )


def _measured(doc: dict[str, Any]) -> dict[str, float]:
    return {name: q["value"] for name, q in (doc.get("measured") or {}).items() if q.get("value") is not None}


def _argv_model(doc: dict[str, Any]) -> str:
    argv = (doc.get("command") or {}).get("argv") or []
    return argv[2] if len(argv) > 2 else "?"


def _gpu_class(hardware: dict[str, Any]) -> str:
    if hardware.get("gpu_name"):
        return str(hardware["gpu_name"]).replace("NVIDIA ", "").replace("GeForce ", "")
    return "CPU" if hardware.get("platform") == "cpu" else "?"


def _hardware_text(hardware: dict[str, Any]) -> str:
    if hardware.get("gpu_name"):
        return f"{hardware.get('gpu_count') or 1} x {hardware['gpu_name']}"
    if hardware.get("platform") == "cpu":
        return f"CPU ({hardware.get('cpu_model') or 'model not reported'}, {hardware.get('cpu_cores') or '?'} cores)"
    return "not reported"


def _verdicts(doc: dict[str, Any], outcome: str) -> dict[str, bool | None]:
    given = (doc.get("after_healthy") or {}).get("verdicts") or {}
    out: dict[str, bool | None] = {name: given.get(name) for name in VERDICT_NAMES}
    out["booted"] = outcome == "healthy"
    return out


def _flags(doc: dict[str, Any]) -> tuple[str, ...]:
    """The vllm serve arguments after the model, less the harness's own (host, port, name)."""
    argv = list((doc.get("command") or {}).get("argv") or [])[3:]
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


def _serving(doc: dict[str, Any]) -> Serving | None:
    figures = (doc.get("serving") or {}).get("figures") or {}
    ttft = figures.get("ttft") or {}
    if not figures.get("completed") or ttft.get("p50_seconds") is None:
        return None
    return Serving(
        num_requests=int(figures["completed"]),
        ttft_p50_seconds=float(ttft["p50_seconds"]),
        ttft_p99_seconds=float(ttft["p99_seconds"]),
        output_tokens_per_second_per_user=figures.get("output_tokens_per_second_per_user"),
    )


def _not_comparable(plan: PlanRow | None, hardware: dict[str, Any], outcome: str) -> str | None:
    """Why this boot's memory numbers cannot be set against its plan's (None when they can)."""
    if plan is None:
        return "no linked plan in the store"
    if outcome == "host_fault":
        return "a host fault: nothing measured counts against the model"
    if hardware.get("platform") == "cpu":
        # A plan made for the CPU platform itself would compare; a GPU plan booted on a CPU does not.
        if plan.gpu_name.lower() != "cpu":
            return f"ran on a CPU, planned for {plan.gpu_name}"
        return None
    if not hardware.get("gpu_name"):
        return "the boot's GPU was not identified"
    if hardware["gpu_name"] != plan.gpu_name:
        return f"ran on {hardware['gpu_name']}, planned for {plan.gpu_name}"
    return None


# ---- fixes ---------------------------------------------------------------------------------------


def _fix_row(record: StoredRecord) -> FixRow:
    doc = record.raw
    return FixRow(
        record_id=record.id,
        rule=doc.get("rule") or "?",
        engine_version=doc.get("engine_version") or "?",
        status=doc.get("status") or "?",
        failed_boot=doc.get("failed_boot"),
        corrected_boot=doc.get("corrected_boot"),
        corrected_flags=tuple(doc.get("corrected_flags") or ()),
    )
