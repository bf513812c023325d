"""What a person reads after `apron check` and `apron serve-test`."""

from __future__ import annotations

from apron.measure.checks import CheckReport
from apron.measure.servetest import Latency, ServeReport

_STATUS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}
_VERDICT = {"answered": "ANSWERED", "not_answered": "NOT ANSWERED", "served": "SERVED", "not_served": "NOT SERVED"}


def render_check_report(report: CheckReport) -> str:
    context = report.served.max_model_len_tokens
    lines = [
        f"{report.model} at {report.url}: {report.suite} checks"
        + (f" (served max_model_len {context:,} tokens)" if context else "")
    ]
    width = max(len(r.name) for r in report.results)
    for r in report.results:
        took = "" if r.latency_seconds is None else f"{r.latency_seconds:7.2f} s"
        lines.append(f"  {_STATUS[r.status]}  {r.name:<{width}}  {took:>9}  {r.reason}")
        if r.fix:
            lines.append(f"        {'':<{width}}  {'':>9}  fix: {r.fix}")
    lines.append(
        f"{_VERDICT[report.verdict]}: {report.count('pass')} passed, {report.count('fail')} failed, "
        f"{report.count('skip')} skipped"
    )
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _latency_line(title: str, latency: Latency, *, p90: bool = True) -> str:
    middle = f"  p90 {_ms(latency.p90_seconds):>11}" if p90 else ""
    return f"  {title:<5} p50 {_ms(latency.p50_seconds):>11}{middle}  p99 {_ms(latency.p99_seconds):>11}"


def render_serve_report(report: ServeReport) -> str:
    s, f = report.settings, report.figures
    per_user = f.output_tokens_per_second_per_user
    lines = [
        f"{report.model} at {report.url}: {s.num_prompts} requests, {s.input_len_tokens} tokens in, "
        f"{s.output_len_tokens} out, {s.concurrency} at a time (vllm bench serve)",
        f"{_VERDICT[report.verdict]}: {report.reason} in {f.duration_seconds:,.1f} s",
        _latency_line("TTFT", f.ttft),
        _latency_line("TPOT", f.tpot, p90=False),
        _latency_line("ITL", f.itl, p90=False),
        f"  {f.p99_note()}",
        "  per user: " + (f"{per_user:,.1f} output tokens/s (1 / median TPOT)" if per_user else "n/a"),
        f"  throughput: {f.request_throughput_per_second:,.2f} requests/s, "
        f"{f.output_tokens_per_second:,.1f} output tokens/s",
        f"  result: {report.result_path}",
    ]
    return "\n".join(lines)
