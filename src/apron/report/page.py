"""The report page: one self-contained HTML file (inline CSS and SVG, no script, no font or image
fetched), the charts beside it as SVG and PNG, and a page per record.

`apron report` writes DIR/index.html, DIR/charts/NAME.svg and DIR/records/ID.html;
`apron records show ID --html` writes one record's page; `apron plan --html FILE` one plan's chart.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from apron.errors import BadInput, Failed
from apron.frozen import frozen
from apron.plan.result import Plan
from apron.records.store import RecordStore
from apron.report import charts, series
from apron.report.card import QUANTITY_TITLES, format_range, format_value
from apron.report.rows import VERDICT_NAMES, BootRow, FixRow, PlanRow, ProbeRow, Selection, plan_row, select

_CSS = """
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; margin: 0 auto; max-width: 1060px;
       padding: 1.5em; color: #1d1d1d; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 2em; }
section.chart figure { margin: 0; } svg.chart-svg { max-width: 100%; height: auto; }
p.reading { color: #333; max-width: 60em; } .notes li, .skipped li { color: #7a4b00; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } code, .id { font-family: "DejaVu Sans Mono", monospace; }
td code { display: inline-block; white-space: nowrap; font-size: 0.9em; margin-right: 0.4em; }
.yes { color: #176b2c; } .no { color: #a11; } .na { color: #888; } details summary { cursor: pointer; color: #444; }
"""


@frozen
class Written:
    index: Path
    charts: list[Path]
    records: list[Path]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _document(title: str, body: Iterable[str]) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>\n'
        f"<body>\n{''.join(body)}\n</body></html>\n"
    )


def _rid(record_id: str, prefix: str | None = "records/") -> str:
    """A record id, linked to its page (PREFIX/ID.html) unless prefix is None (a page on its own)."""
    short = _e(record_id[:12])
    if prefix is None:
        return f'<span class="id" title="{_e(record_id)}">{short}</span>'
    return f'<a class="id" href="{prefix}{_e(record_id)}.html" title="{_e(record_id)}">{short}</a>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)  # rows of _td cells
    return f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def _td(text: object, num: bool = False, raw: bool = False) -> str:
    return f'<td class="num">{text if raw else _e(text)}</td>' if num else f"<td>{text if raw else _e(text)}</td>"


def _chart_section(chart: charts.Chart, prefix: str | None = "records/") -> str:
    notes = "".join(f"<li>{_e(n)}</li>" for n in chart.notes)
    marks = _table(("record", "mark"), ([_td(_rid(m.record_id, prefix), raw=True), _td(m.text)] for m in chart.marks))
    return (
        f'<section class="chart" id="chart-{_e(chart.name)}"><h2>{_e(chart.title)}</h2>'
        f'<p class="reading">{_e(chart.reading)}</p><figure>{chart.svg}</figure>'
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
        + f"<details><summary>the records behind the {len(chart.marks)} marks</summary>{marks}</details></section>\n"
    )


# ---- the report ----------------------------------------------------------------------------------


def report_charts(selection: Selection) -> list[charts.Chart]:
    points, left_out = series.compare_points(selection)
    return [
        charts.predicted_vs_measured(points, left_out),
        charts.memory_stacks(series.memory_bars(selection)),
        charts.kv_by_layout(series.kv_points(selection)),
        charts.time_to_first_token(series.latency_rows(selection)),
    ]


def write_report(selection: Selection, out_dir: Path, store_label: str) -> Written:
    """Write the page, its charts and a page per record; nothing is written when a chart fails."""
    drawn = report_charts(selection)
    pages = {row.record_id: record_page(selection, row) for row in _all_rows(selection) if row.record_id}
    index = _document("Apron report", _report_body(selection, drawn, store_label))
    (out_dir / "charts").mkdir(parents=True, exist_ok=True)
    (out_dir / "records").mkdir(exist_ok=True)
    written = []
    for chart in drawn:
        path = out_dir / "charts" / f"{chart.name}.svg"
        path.write_bytes(_standalone_svg(chart.svg))
        written.append(path)
    records = []
    for record_id, page in pages.items():
        path = out_dir / "records" / f"{record_id}.html"
        path.write_text(page, encoding="utf-8")
        records.append(path)
    (out_dir / "index.html").write_text(index, encoding="utf-8")
    return Written(out_dir / "index.html", written, records)


def _standalone_svg(svg: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + svg + "\n").encode("utf-8")


def _all_rows(selection: Selection) -> list[BootRow | PlanRow | FixRow | ProbeRow]:
    plans = [b.plan for b in selection.boots if b.plan is not None]
    unique_plans = {p.record_id: p for p in [*plans, *selection.plans]}.values()
    return [*selection.boots, *unique_plans, *selection.fixes, *selection.probes]


def _report_body(selection: Selection, drawn: list[charts.Chart], store_label: str) -> list[str]:
    body = [
        "<header><h1>Apron report</h1>",
        f"<p>{len(selection.boots)} boots, {len(selection.plans)} plans not yet booted, {len(selection.fixes)} "
        f"fixes and {len(selection.probes)} probes from the record store <code>{_e(store_label)}</code>. Every number is labelled: predicted "
        "(the plan, made before the boot), derived, or measured (vLLM's own log of the boot).</p>",
    ]
    if selection.skipped:
        items = "".join(f"<li>{_rid(s.record_id, None)}: {_e(s.reason)}</li>" for s in selection.skipped)
        body.append(f'<section class="skipped" id="skipped"><p>Not drawn:</p><ul>{items}</ul></section>')
    body.append("</header>\n")
    body += [_chart_section(chart) for chart in drawn]
    body.append(_boots_section(selection.boots))
    if selection.fixes:
        body.append(_fixes_section(selection.fixes))
    if selection.probes:
        body.append(_probes_section(selection.probes))
    return body


def _verdict_cell(value: bool | None) -> str:
    if value is None:
        return '<span class="na">not run</span>'
    return '<span class="yes">yes</span>' if value else '<span class="no">no</span>'


def _boots_section(boots: list[BootRow], prefix: str | None = "records/") -> str:
    head = (
        "boot",
        "model",
        "GPU x count",
        "vLLM",
        "outcome",
        *VERDICT_NAMES,
        "flags beyond defaults",
        "checks passed",
        "cold start",
    )
    rows = []
    for b in boots:
        checks = f"{b.num_checks_passed} of {b.num_checks}" if b.num_checks else "not run"
        cold = f"{b.cold_start_seconds:,.1f} s" if b.cold_start_seconds is not None else "-"
        outcome = b.outcome + (f" ({b.fault})" if b.fault else "")
        rows.append(
            [
                _td(_rid(b.record_id, prefix=prefix), raw=True),
                _td(b.model),
                _td(b.hardware),
                _td(b.engine_version),
                _td(outcome),
                *[_td(_verdict_cell(b.verdicts.get(name)), raw=True) for name in VERDICT_NAMES],
                _td(" ".join(f"<code>{_e(f)}</code>" for f in b.flags) or "none", raw=True),
                _td(checks, num=True),
                _td(cold, num=True),
            ]
        )
    table = _table(head, rows, "boots") if boots else "<p>No boot records selected.</p>"
    return (
        '<section id="boots"><h2>Boots</h2><p class="reading">Each boot of a plan: did it boot, respond, '
        "answer the checks and serve the load; the vllm serve flags it ran with beyond the defaults (the "
        f"harness's host, port and name left out); cold start from launch to /health.</p>{table}</section>\n"
    )


def _fixes_section(fixes: list[FixRow], prefix: str | None = "records/") -> str:
    rows = [
        [
            _td(_rid(f.record_id, prefix=prefix), raw=True),
            _td(f.rule),
            _td(f.engine_version),
            _td(f.status),
            _td(_rid(f.failed_boot, prefix=prefix) if f.failed_boot else "-", raw=True),
            _td(_rid(f.corrected_boot, prefix=prefix) if f.corrected_boot else "-", raw=True),
            _td(" ".join(f.corrected_flags)),
        ]
        for f in fixes
    ]
    head = ("fix", "rule", "vLLM", "status", "failed boot", "corrected boot", "corrected flags")
    return f'<section id="fixes"><h2>Fixes</h2>{_table(head, rows, "fixes")}</section>\n'


def _probes_section(probes: list[ProbeRow], prefix: str | None = "records/") -> str:
    head = ("probe", "boot", "status", "peak", "matched to the plan", "unmatched", "logged peak", "predicted peak")
    rows = [
        [
            _td(_rid(p.record_id, prefix=prefix), raw=True),
            _td(_rid(p.boot_id, prefix=prefix), raw=True),
            _td(p.status + (f" ({p.error})" if p.error and p.status != "recorded" else "")),
            _td(_mib(p.peak_bytes) + (f" in {p.peak_phase}" if p.peak_phase else ""), num=True),
            _td(_mib(p.matched_bytes) + (f" ({p.moment})" if p.moment else ""), num=True),
            _td(_mib(p.unmatched_bytes), num=True),
            _td(_mib(p.logged_peak_bytes) if p.logged_peak_bytes is not None else "not logged", num=True),
            _td(_mib(p.predicted_peak_bytes), num=True),
        ]
        for p in probes
    ]
    return (
        '<section id="probes"><h2>Probes</h2><p class="reading">The allocator probe inside a boot\'s profiling '
        "run (apron probe): the peak it counted, the part of it the plan's buffers account for (by exact "
        "size and shape), and the rest; beside vLLM's logged peak where the engine prints one and the "
        f"plan's prediction.</p>{_table(head, rows, 'probes')}</section>\n"
    )


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.2f} MiB"


# ---- one record ----------------------------------------------------------------------------------


def record_page(selection: Selection, row: BootRow | PlanRow | FixRow | ProbeRow, standalone: bool = False) -> str:
    """A record's own page. In the report's records/ folder its links point at the pages beside it, and
    it leaves its bars to the report's memory chart, which holds them already. On its own
    (`records show --html`) it draws them."""
    prefix = None if standalone else ""
    if isinstance(row, BootRow):
        return _document(f"Apron boot {row.record_id[:12]}", _boot_body(row, prefix, standalone))
    if isinstance(row, PlanRow):
        return _document(f"Apron plan {(row.record_id or '')[:12]}", _plan_body(row, prefix, standalone))
    if isinstance(row, ProbeRow):
        return _document(f"Apron probe {row.record_id[:12]}", _probe_body(row, prefix))
    return _document(f"Apron fix {row.record_id[:12]}", _fix_body(row, selection, prefix))


def _probe_body(probe: ProbeRow, prefix: str | None) -> list[str]:
    blocks = [
        [
            _td(f"{b.num_bytes:,}", num=True),
            _td("[" + ", ".join(map(str, b.shape)) + "]" if b.shape is not None else "-"),
            _td(b.dtype or "-"),
            _td(b.buffer or "unmatched"),
            _td(" < ".join(([b.op] if b.op else []) + list(b.frames[:2]))),
        ]
        for b in probe.blocks
    ]
    predicted = [[_td(b.name), _td(f"{b.num_bytes:,}", num=True), _td(b.status)] for b in probe.predicted]
    return [
        f"<h1>Probe {_e(probe.record_id[:12])}</h1>",
        f"<p>Boot {_rid(probe.boot_id, prefix=prefix)}, plan {_rid(probe.plan_id, prefix=prefix)}: "
        f"{_e(probe.status)}" + (f" ({_e(probe.error)})" if probe.error else "") + ".</p>",
        _probes_section([probe], prefix=prefix),
        f"<h2>Blocks alive at the peak ({_e(probe.peak_phase or '-')}), largest first</h2>",
        _table(("bytes", "shape", "dtype", "buffer", "allocated by"), blocks),
        f"<h2>The plan's {_e(probe.moment or '-')} buffers</h2>",
        _table(("buffer", "bytes", "status"), predicted),
    ]


def _boot_body(boot: BootRow, prefix: str | None, with_chart: bool) -> list[str]:
    plan_link = _rid(boot.plan_id, prefix=prefix) if boot.plan_id else "none"
    body = [
        f"<h1>Boot {_e(boot.record_id[:12])}</h1>",
        f"<p>{_e(boot.model)} on {_e(boot.hardware)}, vLLM {_e(boot.engine_version)}: {_e(boot.outcome)}"
        + (f" ({_e(boot.fault)})" if boot.fault else "")
        + f". Plan {plan_link}. Record <code>{_e(boot.record_id)}</code>.</p>",
    ]
    if boot.not_comparable:
        body.append(f'<ul class="notes"><li>not comparable with its plan: {_e(boot.not_comparable)}</li></ul>')
    if with_chart:
        bars = ([series.plan_bar(boot.plan, "planned")] if boot.plan else []) + [series.boot_bar(boot, "measured")]
        body.append(_chart_section(charts.memory_stacks(bars, name="memory-boot"), prefix=prefix))
    else:
        body.append(_see_report_chart())
    body.append(_compare_table(boot))
    body.append(_boots_section([boot], prefix=prefix))
    if boot.serving:
        s = boot.serving
        speed = f"{s.output_tokens_per_second_per_user:,.1f}" if s.output_tokens_per_second_per_user else "-"
        body.append(
            f"<p>Serving test: {s.num_requests} requests; time to first token p50 {s.ttft_p50_seconds:.3f} s, "
            f"p99 {s.ttft_p99_seconds:.3f} s (with {s.num_requests} requests, p99 is the slowest one or two); "
            f"{speed} tokens per second per user.</p>"
        )
    return body


def _compare_table(boot: BootRow) -> str:
    names = [n for n in QUANTITY_TITLES if n in boot.measured or (boot.plan and boot.plan.value(n) is not None)]
    rows = []
    for name in names:
        q = boot.plan.quantities.get(name) if boot.plan else None
        measured = boot.measured.get(name)
        unit = q.unit if q else ("bytes" if name.endswith("_bytes") or "_bytes_" in name else "")
        rows.append(
            [
                _td(QUANTITY_TITLES[name]),
                _td(format_value(q, name) if q else "-", num=True),
                _td(q.label if q else "-"),
                _td(_measured_text(measured, unit, name), num=True),
            ]
        )
    return "<h2>Predicted beside measured</h2>" + _table(("quantity", "predicted", "label", "measured"), rows)


def _measured_text(value: float | None, unit: str, name: str) -> str:
    if value is None:
        return "not logged"
    return format_value(_Measured(value, unit), name)


@frozen
class _Measured:
    value: float
    unit: str
    label: str = "measured"


def _plan_body(plan: PlanRow, prefix: str | None, with_chart: bool) -> list[str]:
    rows = [
        [
            _td(QUANTITY_TITLES.get(name, name)),
            _td(" ".join(filter(None, (format_value(q, name), format_range(q)))), num=True),
            _td(q.label),
            _td(q.basis),
        ]
        for name, q in plan.quantities.items()
    ]
    return [
        f"<h1>Plan {_e((plan.record_id or '')[:12])}: {_e(plan.model)}</h1>",
        f"<p>vLLM {_e(plan.engine_version)} on {plan.gpu_count} x {_e(plan.gpu_name)} "
        f"({plan.total_bytes_per_gpu / 2**30:,.2f} GiB each), attention layout {_e(plan.layout)}. "
        f"Verdict: <strong>{_e(plan.verdict)}</strong>."
        + (f" Record <code>{_e(plan.record_id)}</code>." if plan.record_id else "")
        + "</p>",
        _chart_section(plan_chart(plan), prefix=prefix if plan.record_id else None)
        if with_chart
        else _see_report_chart(),
        _table(("quantity", "value", "label", "basis"), rows, "card"),
        f"<h2>Command</h2><p><code>{_e(plan.command)}</code></p>",
    ]


def _see_report_chart() -> str:
    return '<p><a href="../index.html#chart-memory">Its memory bars are in the report.</a></p>'


def plan_chart(plan: PlanRow) -> charts.Chart:
    return charts.memory_stacks(
        [series.plan_bar(plan, f"{series.short_model(plan.model)} planned")], name="memory-plan"
    )


def _fix_body(fix: FixRow, selection: Selection, prefix: str | None) -> list[str]:
    boots = [b for b in selection.boots if b.record_id in (fix.failed_boot, fix.corrected_boot)]
    return [
        f"<h1>Fix {_e(fix.record_id[:12])}: rule {_e(fix.rule)}</h1>",
        f"<p>vLLM {_e(fix.engine_version)}, status <strong>{_e(fix.status)}</strong>; corrected flags "
        f"<code>{_e(' '.join(fix.corrected_flags) or 'none')}</code>.</p>",
        _fixes_section([fix], prefix=prefix),
        _boots_section(boots, prefix=prefix),
    ]


def write_plan_page(plan: PlanRow, path: Path) -> Path:
    """`apron plan --html FILE`: chart 2 for one plan, with the card's numbers and labels."""
    page = record_page(Selection(plans=[plan]), plan, standalone=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def write_record_page(store: RecordStore, record_id: str, path: Path | None) -> Path:
    """`apron records show ID --html [FILE]`: one record's page, on its own (default ./apron-ID.html)."""
    selection = select(store, [record_id])
    if selection.skipped:
        raise BadInput(f"record {selection.skipped[0].record_id[:12]} cannot be drawn: {selection.skipped[0].reason}")
    row = _all_rows(selection)[0]
    if isinstance(row, FixRow):
        selection = select(store, [row.record_id, *(b for b in (row.failed_boot, row.corrected_boot) if b)])
    page = record_page(selection, row, standalone=True)
    path = path or Path(f"apron-{(row.record_id or '')[:12]}.html")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def write_plan_html(plan: dict[str, Any], path: Path) -> Path:
    """`apron plan --html FILE`, from the plan's apron.plan/1 document."""
    return write_plan_page(plan_row(Plan.from_json(plan, "the plan")), path)


def build_report(store: RecordStore, record_ids: list[str], out_dir: Path) -> dict[str, Any]:
    """`apron report`: the page for the chosen records (all without ids); what was written, as JSON."""
    selection = select(store, record_ids or None)
    if not selection.num_records and not selection.skipped:
        raise Failed(f"the record store {store.root} holds no records: `apron boot` a plan first")
    written = write_report(selection, out_dir, str(store.root))
    return {
        "index": str(written.index),
        "charts": [str(p) for p in written.charts],
        "record_pages": [str(p) for p in written.records],
        "num_boots": len(selection.boots),
        "num_plans": len(selection.plans),
        "num_fixes": len(selection.fixes),
        "num_probes": len(selection.probes),
        "skipped": [{"id": s.record_id, "reason": s.reason} for s in selection.skipped],
    }
