"""Text views of records for people (the --json forms are the documents themselves)."""

from __future__ import annotations

from apron.measure.logparse import GIB
from apron.records.store import StoredRecord


def summary_row(record: StoredRecord) -> dict:
    doc = record.document
    if record.kind == "plan":
        plan = doc.get("plan", {})
        return {
            "id": record.id,
            "kind": "plan",
            "model": plan.get("model", {}).get("repo_id") or plan.get("model", {}).get("source"),
            "engine": plan.get("engine", {}).get("version"),
            "hardware": f"{plan.get('hardware', {}).get('count')} x {plan.get('hardware', {}).get('gpu')}",
            "outcome": plan.get("verdict"),
            "created_at": None,
            "plan_id": None,
        }
    if record.kind == "fix":
        return {
            "id": record.id,
            "kind": "fix",
            "model": doc.get("rule"),
            "engine": doc.get("engine_version"),
            "hardware": f"{doc.get('failed_boot', '')[:12]} -> {str(doc.get('corrected_boot'))[:12]}",
            "outcome": doc.get("status"),
            "created_at": None,
            "plan_id": None,
        }
    hw = doc.get("hardware", {})
    hardware = (
        f"{hw.get('gpu_count')} x {hw.get('gpu_name')}"
        if hw.get("gpu_name")
        else f"CPU {hw.get('cpu_model') or '?'}"
        if hw.get("platform") == "cpu"
        else "?"
    )
    return {
        "id": record.id,
        "kind": "boot",
        "model": (doc.get("command") or {}).get("argv", [None, None, None])[2],
        "engine": doc.get("engine", {}).get("version"),
        "hardware": hardware,
        "outcome": doc.get("outcome"),
        "created_at": doc.get("created_at"),
        "plan_id": doc.get("plan_id"),
    }


def render_list(rows: list[dict]) -> str:
    if not rows:
        return "no records"
    lines = []
    for r in rows:
        lines.append(
            f"{r['id'][:12]}  {r['kind']:<4}  {str(r['outcome']):<13} vllm {str(r['engine']):<8} "
            f"{str(r['hardware'])[:40]:<40}  {r['model']}"
        )
    return "\n".join(lines)


def render_boot(record: StoredRecord) -> str:
    doc = record.document
    fault = doc.get("fault") or {}
    lines = [
        f"boot {record.id}",
        f"  outcome   {doc.get('outcome')}" + (f" ({fault.get('kind')} fault: {fault.get('reason')})" if fault else ""),
        f"  plan      {doc.get('plan_id')}",
        f"  target    {doc.get('target')}",
        f"  engine    vllm {doc.get('engine', {}).get('version')}",
        f"  hardware  {summary_row(record)['hardware']}",
    ]
    if fault:
        lines.append(f"  evidence  {fault.get('evidence', '')[:200]}")
    if doc.get("command"):
        lines.append(f"  command   {doc['command'].get('shell')}")
    timings = doc.get("timings", {})
    if timings:
        lines.append("  timings   " + ", ".join(f"{k} {v}" for k, v in timings.items()))
    lines.append("  measured")
    for name, q in doc.get("measured", {}).items():
        lines.append(f"    {name:<28} {format_value(q.get('value'), q.get('unit'))}")
    lines += _answer_lines(doc)
    log = doc.get("log", {})
    lines.append(f"  log       {log.get('bytes')} bytes, sha256 {log.get('sha256')}")
    for attempt in doc.get("attempts", []):
        lines.append(
            f"  earlier attempt on {attempt['target']}: {attempt['fault']['kind']} fault, {attempt['fault']['reason']}"
        )
    return "\n".join(lines)


def _answer_lines(doc: dict) -> list[str]:
    hook = doc.get("after_healthy") or {}
    verdicts = hook.get("verdicts")
    if not verdicts:
        return []
    shown = ", ".join(f"{name} {'yes' if value else 'no'}" for name, value in verdicts.items() if value is not None)
    lines = [f"  verdicts  {shown}"]
    for check in (doc.get("answers") or {}).get("checks", []):
        lines.append(f"    check {check['name']:<14} {check['status']:<5} {check['reason'][:100]}")
    serving = doc.get("serving") or {}
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


def render_compare(table: dict) -> str:
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


def format_value(value, unit) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / GIB:.2f} GiB"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"
