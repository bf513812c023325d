"""`apron check` and `apron serve-test` without an engine: bad input, and the text a person reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

from apron.cli import main
from apron.measure.checks import CheckOptions, CheckReport, CheckResult
from apron.measure.endpoint import ServedModel
from apron.measure.servetest import ServeReport, ServeTestSettings, read_bench_result
from apron.report.answers import render_check_report, render_serve_report

FIXTURES = Path(__file__).parent / "fixtures"


def test_serve_test_missing_executable_one_line_exit_2(capsys):
    assert main(["serve-test", "http://127.0.0.1:9", "--model", "m", "--vllm", "/no/such/vllm"]) == 2
    err = capsys.readouterr().err
    assert err == "apron: error: --vllm /no/such/vllm: no such executable; give the path of the `vllm` command\n"


def test_serve_test_bad_parameters_exit_2(capsys):
    assert main(["serve-test", "http://127.0.0.1:9", "--model", "m", "--num-prompts", "0"]) == 2
    assert "--num-prompts must be at least 1" in capsys.readouterr().err


def test_serve_test_without_vllm_exits_1(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["serve-test", "http://127.0.0.1:9", "--model", "m"]) == 1
    assert capsys.readouterr().err == (
        "apron: error: vLLM is not installed here (no `vllm` on PATH): install vllm or pass --vllm PATH\n"
    )


def test_check_bad_url_and_unreachable_server(capsys):
    assert main(["check", "localhost:8000", "--model", "m"]) == 2
    assert main(["check", "http://127.0.0.1:9", "--model", "m"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("apron: error: URL 'localhost:8000' is not an http(s) URL")
    assert lines[1].startswith("apron: error: cannot reach http://127.0.0.1:9: ")
    assert len(lines) == 2  # one line each, no traceback


def test_check_unknown_suite_or_check_is_bad_input(capsys):
    assert main(["check", "http://127.0.0.1:9", "--model", "m", "--suite", "long"]) == 2
    assert main(["check", "http://127.0.0.1:9", "--model", "m", "--only", "poem"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--suite'" in err and "unknown check 'poem'" in err


def test_check_report_text():
    results = (
        CheckResult("needle", "fail", "wrong answer: expected 'K7Q2M9XP', got \"\\n\"", None, 1.5, "{}"),
        CheckResult(
            "tool_call", "fail", "the tool call came back as text", "serve with --tool-call-parser hermes", 0.25, "{}"
        ),
        CheckResult("json_schema", "pass", "valid JSON for the schema", None, 0.5, "{}"),
        CheckResult("image", "skip", "text-only model: no image input", None, None, ""),
    )
    report = CheckReport("http://h:8000", "tiny", "deploy", ServedModel("tiny", "/m", 512), CheckOptions(), 1, results)
    text = render_check_report(report)
    assert text.splitlines()[0] == "tiny at http://h:8000: deploy checks (served max_model_len 512 tokens)"
    assert re.search(r"^  FAIL  tool_call +0\.25 s  the tool call came back as text$", text, re.MULTILINE)
    assert re.search(r"^ +fix: serve with --tool-call-parser hermes$", text, re.MULTILINE)
    assert re.search(r"^  SKIP  image +text-only model: no image input$", text, re.MULTILINE)
    assert text.splitlines()[-1] == "NOT ANSWERED: 1 passed, 2 failed, 1 skipped"
    assert json.loads(json.dumps(report.to_json()))["verdict"] == "not_answered"


def test_serve_report_text():
    path = FIXTURES / "servetest" / "bench-serve-8x64-16.json"
    report = ServeReport(
        "http://h:8000", "tiny", ServeTestSettings(8, 64, 16, 4), read_bench_result(path), str(path), ()
    )
    lines = render_serve_report(report).splitlines()
    assert lines[0] == "tiny at http://h:8000: 8 requests, 64 tokens in, 16 out, 4 at a time (vllm bench serve)"
    assert lines[1].startswith("SERVED: all 8 requests completed in ")
    assert lines[2].startswith("  TTFT  p50 ") and " p90 " in lines[2] and " p99 " in lines[2]
    assert "p99 over 8 requests is the slowest one or two of them" in lines[5]
    assert lines[6].startswith("  per user: ") and "output tokens/s (1 / median TPOT)" in lines[6]
