"""The checks and the serving test against the real vLLM CPU engine (the session `cpu_engine`: the tiny
tools model with random weights, Hermes tool parser, compact structured output, max_model_len 512)."""

from __future__ import annotations

import json

from apron.cli import main
from apron.measure import run_checks
from engine_env import vllm_venv


def test_short_questions_fail_honestly_on_random_weights(cpu_engine):
    report = run_checks(cpu_engine.url, "tiny", "short", multimodal=False, reasoning_effort=None, seed=1)
    assert report.verdict == "not_answered"
    assert report.served.max_model_len_tokens == 512
    assert [r.name for r in report.results] == ["arithmetic", "capital", "reversal"]
    for result in report.results:
        assert result.status == "fail"
        assert result.reason.startswith("wrong answer: expected ")
        assert result.latency_seconds > 0 and result.excerpt


def test_deploy_suite_on_the_real_engine(cpu_engine):
    report = run_checks(cpu_engine.url, "tiny", "deploy", multimodal=False, reasoning_effort=None, seed=2)
    results = {r.name: r for r in report.results}
    # Structured output constrains even random weights to the schema.
    assert results["json_schema"].status == "pass", results["json_schema"].reason
    # The haystack shrinks to the 512-token context and the reason says so; the code is not found.
    needle = results["needle"]
    assert needle.status == "fail"
    assert "haystack scaled down to 448 tokens: the served max_model_len is 512" in needle.reason
    assert 300 < needle.details["prompt_tokens"] <= 448 and not needle.details["prompt_tokens_estimated"]
    # tool_choice=auto goes through the Hermes parser: random weights produce no call.
    assert results["tool_call"].status == "fail"
    assert results["tool_call"].reason.startswith("no tool call: the model answered in text")
    assert results["image"].status == "skip" and results["image"].latency_seconds is None
    assert results["reasoning"].status == "fail"
    assert report.verdict == "not_answered"
    assert json.loads(json.dumps(report.to_json()))["num_passed"] == 1


def test_named_tool_choice_is_parsed_into_a_tool_call(cpu_engine):
    """tool_choice named: the server constrains the call to the Hermes format and its parser returns
    `tool_calls`; without `strict`, vLLM lets the arguments be any JSON value, which random weights may
    close at once (null: a parsed call with malformed arguments) or leave an open string until the
    budget ends (the call comes back cut off, as text): both are the constrained call, judged."""
    report = run_checks(
        cpu_engine.url,
        "tiny",
        multimodal=False,
        reasoning_effort=None,
        tool_choice="named",
        only=("tool_call",),
        seed=3,
    )
    (result,) = report.results
    assert result.status == "fail"
    if "name" in result.details:
        assert result.details["name"] == "get_weather" and result.details["num_tool_calls"] >= 1
        assert result.reason.startswith("malformed tool call")
    else:
        assert result.details == {"marker": "<tool_call>", "tool_choice": "named"}
        assert result.reason.startswith("no tool call: a call ('<tool_call>') was cut off at the")


def test_check_cli_json_and_exit_code(cpu_engine, capsys):
    code = main(
        [
            "check",
            cpu_engine.url,
            "--model",
            "tiny",
            "--only",
            "json_schema",
            "--only",
            "arithmetic",
            "--json",
            "--seed",
            "4",
        ]
    )
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert code == 1
    assert document["schema"] == "apron.check/1" and document["verdict"] == "not_answered"
    assert [c["status"] for c in document["checks"]] == ["pass", "fail"]
    assert "check json_schema: pass" in err
    assert err.strip().splitlines()[-1] == "apron: error: not answered: 1 of 2 checks failed (arithmetic)"


def test_check_cli_unknown_model_is_bad_input(cpu_engine, capsys):
    assert main(["check", cpu_engine.url, "--model", "nope"]) == 2
    assert capsys.readouterr().err == (
        f"apron: error: model 'nope' is not served at {cpu_engine.url}: it serves tiny; pass --model with one of them\n"
    )


def test_serve_test_runs_vllm_bench_serve(cpu_engine, tmp_path, capsys):
    vllm = str(vllm_venv() / "bin" / "vllm")
    code = main(
        [
            "serve-test",
            cpu_engine.url,
            "--model",
            "tiny",
            "--vllm",
            vllm,
            "--num-prompts",
            "8",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--concurrency",
            "4",
            "--result-dir",
            str(tmp_path),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    document = json.loads(out)
    figures = document["figures"]
    assert document["verdict"] == "served" and figures["completed"] == 8 and figures["failed"] == 0
    assert figures["total_output_tokens"] == 8 * 16
    for metric in ("ttft", "tpot", "itl", "e2el"):
        latency = figures[metric]
        assert 0 < latency["p50_seconds"] <= latency["p90_seconds"] <= latency["p99_seconds"]
    assert figures["output_tokens_per_second_per_user"] > 0 and figures["request_throughput_per_second"] > 0
    assert "Serving Benchmark Result" in err  # the tool's own output, streamed as progress
    assert json.loads(open(document["result_path"]).read())["completed"] == 8
    # Without --tokenizer the bench loads the served model's root from /v1/models (a local folder here).
    assert document["command"][document["command"].index("--tokenizer") + 1] == str(cpu_engine.model)
    print("serve-test figures:", json.dumps(figures))
