"""Text views of records for people (the --json forms are the documents themselves)."""

from __future__ import annotations

from typing import Any

from apron.records.documents import (
    GIB,
    BootRecord,
    FixRecord,
    PlanRecord,
    ProbeRecord,
    RecordDocument,
    UnreadRecord,
)
from apron.records.store import StoredRecord


def summary_row(record: StoredRecord[RecordDocument]) -> dict[str, Any]:
    doc = record.document
    row: dict[str, Any] = {"id": record.id, "kind": record.kind, "created_at": None, "plan_id": None}
    if isinstance(doc, PlanRecord):
        plan = doc.plan
        return row | {
            "model": plan.model.repo_id or plan.model.source,
            "engine": plan.engine_version,
            "hardware": f"{plan.gpu_count} x {plan.gpu_name}",
            "outcome": plan.verdict,
        }
    if isinstance(doc, FixRecord):
        return row | {
            "model": doc.rule,
            "engine": doc.engine_version,
            "hardware": f"{doc.failed_boot[:12]} -> {str(doc.corrected_boot)[:12]}",
            "outcome": doc.status,
        }
    if isinstance(doc, BootRecord):
        return row | {
            "model": doc.served_model,
            "engine": doc.engine.version,
            "hardware": doc.hardware.describe(),
            "outcome": doc.outcome,
            "created_at": doc.created_at,
            "plan_id": doc.plan_id,
        }
    if isinstance(doc, ProbeRecord):
        peak = f"peak {doc.peak_bytes / 2**20:.1f} MiB" if doc.peak_bytes is not None else "no peak"
        return row | {
            "model": f"probe of boot {doc.boot_id[:12]}",
            "engine": None,
            "hardware": f"{doc.platform or '?'}, {peak}",
            "outcome": doc.status,
            "created_at": doc.created_at,
            "plan_id": doc.plan_id,
        }
    if isinstance(doc, UnreadRecord):
        return row | {"model": None, "engine": None, "hardware": None, "outcome": f"not read: {doc.reason}"}
    return row | {"model": None, "engine": None, "hardware": None, "outcome": None}


def render_list(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no records"
    lines = []
    for r in rows:
        lines.append(
            f"{r['id'][:12]}  {r['kind']:<4}  {str(r['outcome']):<13} vllm {str(r['engine']):<8} "
            f"{str(r['hardware'])[:40]:<40}  {r['model']}"
        )
    return "\n".join(lines)


def render_boot(record_id: str, doc: BootRecord) -> str:
    fault = doc.fault
    lines = [
        f"boot {record_id}",
        f"  outcome   {doc.outcome}" + (f" ({fault.kind} fault: {fault.reason})" if fault else ""),
        f"  plan      {doc.plan_id}",
        f"  target    {doc.target}",
        f"  engine    vllm {doc.engine.version}",
        f"  hardware  {doc.hardware.describe()}",
    ]
    if fault:
        lines.append(f"  evidence  {fault.evidence[:200]}")
    if doc.command:
        lines.append(f"  command   {doc.command.get('shell')}")
    if doc.timings:
        lines.append("  timings   " + ", ".join(f"{k} {v}" for k, v in doc.timings.items()))
    lines.append("  measured")
    for name, q in doc.measured.items():
        lines.append(f"    {name:<28} {format_value(q.value, q.unit)}")
    lines += _answer_lines(doc)
    if doc.log is not None:
        lines.append(f"  log       {doc.log.bytes} bytes, sha256 {doc.log.sha256}")
    elif doc.source:
        lines.append(f"  imported  from {doc.source.get('file')} (entry {doc.source.get('index')}); no engine log")
    for attempt in doc.attempts:
        lines.append(f"  earlier attempt on {attempt.target}: {attempt.fault.kind} fault, {attempt.fault.reason}")
    return "\n".join(lines)


def _answer_lines(doc: BootRecord) -> list[str]:
    verdicts = doc.verdicts
    if not verdicts:
        return []
    shown = ", ".join(f"{name} {'yes' if value else 'no'}" for name, value in verdicts.items() if value is not None)
    lines = [f"  verdicts  {shown}"]
    for check in (doc.answers or {}).get("checks", []):
        lines.append(f"    check {check['name']:<14} {check['status']:<5} {check['reason'][:100]}")
    serving = doc.serving or {}
    figures = serving.get("figures") or {}
    if figures:
        ttft = figures.get("ttft") or {}
        lines.append(
            f"    serving   {figures.get('completed')} completed, {figures.get('failed')} failed; TTFT p50 "
            f"{ttft.get('p50_seconds')} s, p99 {ttft.get('p99_seconds')} s; "
            f"{figures.get('output_tokens_per_second_per_user')} tokens/s per user"
        )
    elif serving.get("error"):
        lines.append(f"    serving   failed: {serving['error'][:120]}")
    return lines


def render_compare(table: dict[str, Any]) -> str:
    lines = [
        f"plan {table['plan_id']} (vllm {table['engine']['planned']}) vs boot "
        f"({table['outcome']}, vllm {table['engine']['booted']})",
        "",
    ]
    lines.append(f"  {'quantity':<24} {'predicted':>18} {'measured':>18} {'error':>12} {'error %':>9}")
    for row in table["rows"]:
        if row["error_gib"] is not None:
            error = f"{row['error_gib']:+.3f} GiB"
        elif row["error"] is not None:
            error = f"{row['error']:+,.2f}" if isinstance(row["error"], float) else f"{row['error']:+,}"
        else:
            error = "-"
        pct = f"{row['error_pct']:+.1f}%" if row["error_pct"] is not None else "-"
        lines.append(
            f"  {row['name']:<24} {format_value(row['predicted'], row['unit']):>18} "
            f"{format_value(row['measured'], row['unit']):>18} {error:>12} {pct:>9}"
        )
    for warning in table["warnings"]:
        lines.append(f"\nnote: {warning}")
    return "\n".join(lines)


def format_value(value: float | None, unit: str | None) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / GIB:.2f} GiB"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"
