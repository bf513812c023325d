"""Text views of records for people (the --json forms are the documents themselves)."""

from __future__ import annotations

from typing import Any

from apron.records.documents import (
    BootRecord,
    FixRecord,
    PlanRecord,
    ProbeRecord,
    RecordDocument,
    UnreadRecord,
)
from apron.records.store import StoredRecord
from apron.units import format_bytes, format_count, format_seconds, shorten

NOT_REPORTED = "not reported"


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
            "hardware": f"{doc.failed_boot[:12]} -> {(doc.corrected_boot or 'not booted yet')[:14]}",
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


LIST_COLUMNS = (("id", 12), ("kind", 5), ("outcome", 40), ("engine", 24), ("hardware", 48), ("model", 0))


def render_list(rows: list[dict[str, Any]]) -> str:
    """One record a line, each column as wide as its longest value (up to a limit, then shortened) and
    two spaces between columns; the model last, whole."""
    if not rows:
        return "no records"
    cells = [
        {
            "id": r["id"][:12],
            "kind": r["kind"],
            "outcome": str(r["outcome"] or NOT_REPORTED),
            "engine": f"vllm {r['engine']}" if r["engine"] else NOT_REPORTED,
            "hardware": r["hardware"] or NOT_REPORTED,
            "model": r["model"] or NOT_REPORTED,
        }
        for r in rows
    ]
    widths = {name: min(max(len(name), *(len(c[name]) for c in cells)), limit) for name, limit in LIST_COLUMNS if limit}

    def line(values: dict[str, str]) -> str:
        shown = [shorten(values[name], widths[name]).ljust(widths[name]) for name, limit in LIST_COLUMNS if limit]
        return "  ".join([*shown, values["model"]])

    header = line({name: name for name, _ in LIST_COLUMNS})
    return "\n".join([header, "-" * len(header), *(line(c) for c in cells)])


TIMING_TITLES = {  # the boot's order: download, start (cold start is the two together), checks, teardown
    "weights_download_seconds": "weights",
    "engine_start_seconds": "engine start",
    "cold_start_seconds": "cold start",
    "after_healthy_seconds": "checks and serving",
    "teardown_seconds": "teardown",
}


def render_boot(record_id: str, doc: BootRecord) -> str:
    fault = doc.fault
    lines = [
        f"boot {record_id}",
        f"  outcome   {doc.outcome}" + (f" ({fault.kind} fault: {fault.reason})" if fault else ""),
        f"  plan      {doc.plan_id}",
        f"  target    {doc.target}",
        f"  engine    {'vllm ' + doc.engine.version if doc.engine.version else 'vllm, release ' + NOT_REPORTED}",
        f"  hardware  {describe_hardware(doc)}",
    ]
    if fault:
        lines.append(f"  evidence  {shorten(fault.evidence, 300)}")
    if doc.command:
        lines.append(f"  command   {doc.command.get('shell')}")
    # In the order the boot went, whatever order the stored document keeps its keys in.
    timings = [f"{title} {format_seconds(doc.timings[k])}" for k, title in TIMING_TITLES.items() if doc.timings.get(k)]
    if timings:
        lines.append("  timings   " + ", ".join(timings))
    lines.append("  measured" + ("" if doc.measured else "  nothing (the engine's log printed no accounting line)"))
    for name, q in doc.measured.items():
        note = _measured_note(doc, name)
        lines.append(f"    {name:<28} {format_quantity(q.value, q.unit)}" + (f"  ({note})" if note else ""))
    lines += _answer_lines(doc)
    if doc.log is not None:
        lines.append(f"  log       {format_bytes(doc.log.bytes)}, sha256 {doc.log.sha256}")
    elif doc.source:
        lines.append(f"  imported  from {doc.source.get('file')} (entry {doc.source.get('index')}); no engine log")
    for note in doc.notes:
        lines.append(f"  note      {shorten(note, 300)}")
    for attempt in doc.attempts:
        lines.append(f"  earlier attempt on {attempt.target}: {attempt.fault.kind} fault, {attempt.fault.reason}")
    return "\n".join(lines)


def _measured_note(doc: BootRecord, name: str) -> str | None:
    """What a measured figure is where its name alone misleads: the CPU worker's total is its NUMA node's
    memory (v1/worker/cpu_worker.py), not the host RAM of the hardware line."""
    if name == "total_memory_bytes" and doc.hardware.platform == "cpu":
        return "the NUMA node the CPU worker sizes its memory from, not the host RAM above"
    return None


def describe_hardware(doc: BootRecord) -> str:
    hardware = doc.hardware
    if hardware.gpu_name:
        return f"{hardware.gpu_count} x {hardware.gpu_name}"
    if hardware.platform == "cpu":
        cores = f", {hardware.cpu_cores} cores" if hardware.cpu_cores else ""
        ram = f", {format_bytes(hardware.ram_bytes)} host RAM" if hardware.ram_bytes else ""
        return f"CPU ({hardware.cpu_model or 'model ' + NOT_REPORTED}{cores}{ram})"
    return NOT_REPORTED


def _answer_lines(doc: BootRecord) -> list[str]:
    verdicts = doc.verdicts
    if not verdicts:
        return []
    shown = ", ".join(f"{name} {'yes' if value else 'no'}" for name, value in verdicts.items() if value is not None)
    skipped = (doc.after_healthy or {}).get("answers_skipped")
    lines = [f"  verdicts  {shown}" + (f"; {skipped}" if skipped else "")]
    for check in (doc.answers or {}).get("checks", []):
        lines.append(f"    check {check['name']:<14} {check['status']:<5} {shorten(check['reason'], 100)}")
    serving = doc.serving or {}
    figures = serving.get("figures") or {}
    if figures:
        ttft = figures.get("ttft") or {}
        per_user = figures.get("output_tokens_per_second_per_user")
        lines.append(
            f"    serving   {figures.get('completed')} completed, {figures.get('failed')} failed; TTFT p50 "
            f"{format_seconds(ttft.get('p50_seconds'))}, p99 {format_seconds(ttft.get('p99_seconds'))}; "
            f"{format_count(per_user, 'tokens/s per user')}"
        )
    elif serving.get("error"):
        lines.append(f"    serving   failed: {shorten(serving['error'], 120)}")
    return lines


def render_fix(record_id: str, doc: FixRecord) -> str:
    corrected = doc.corrected_boot or "not booted yet"
    return "\n".join(
        [
            f"fix {record_id}",
            f"  rule      {doc.rule} ({doc.status} on vllm {doc.engine_version})",
            f"  failure   {doc.family} (fingerprint {doc.fingerprint[:12]})",
            f"  failed    boot {doc.failed_boot}",
            f"  corrected boot {corrected}",
            f"  flags     {' '.join(doc.corrected_flags) or 'settings changed'}",
            f"  command   {doc.corrected_command}",
            f"  the plan  {doc.could_have_known}",
        ]
    )


def render_fields(record_id: str, kind: str, document: dict[str, Any]) -> str:
    """A record kind without its own view: its top-level fields, one a line, nested ones summarised."""
    lines = [f"{kind} {record_id}"]
    for name, value in document.items():
        if name in ("kind", "schema_version"):
            continue
        if isinstance(value, dict):
            shown = f"{len(value)} fields (--json shows them)"
        elif isinstance(value, list):
            shown = f"{len(value)} items (--json shows them)"
        elif value is None:
            shown = "none"
        else:
            shown = shorten(str(value), 200)
        lines.append(f"  {name:<20} {shown}")
    return "\n".join(lines)


def render_compare(table: dict[str, Any]) -> str:
    booted = table["engine"]["booted"]
    lines = [
        f"plan {table['plan_id']} (vllm {table['engine']['planned']}) vs boot "
        f"({table['outcome']}, {'vllm ' + booted if booted else 'engine release ' + NOT_REPORTED})",
        "",
    ]
    lines.append(f"  {'quantity':<24} {'predicted':>18} {'measured':>18} {'error':>12} {'error %':>9}")
    for row in table["rows"]:
        if row["error"] is not None and row["unit"] == "bytes":
            error = ("+" if row["error"] >= 0 else "") + format_bytes(row["error"])
        elif row["error"] is not None:
            error = f"{row['error']:+,.2f}" if isinstance(row["error"], float) else f"{row['error']:+,}"
        else:
            error = "-"
        pct = f"{row['error_pct']:+.1f}%" if row["error_pct"] is not None else "-"
        if row.get("within_log_rounding"):
            pct = "rounding"  # the log prints the figure to two decimals of a GiB
        predicted = format_quantity(row["predicted"], row["unit"], "none" if row["predicted_label"] else "not planned")
        lines.append(
            f"  {row['name']:<24} {predicted:>18} "
            f"{format_quantity(row['measured'], row['unit'], 'not logged'):>18} {error:>12} {pct:>9}"
        )
    for warning in table["warnings"]:
        lines.append(f"\nnote: {warning}")
    return "\n".join(lines)


def format_quantity(value: float | None, unit: str | None, missing: str = "-") -> str:
    if value is None:
        return missing
    if unit == "bytes":
        return format_bytes(value)
    return format_count(value)
