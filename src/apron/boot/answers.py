"""What the boot does once /health answers: will the model answer, and how fast does it serve.

A model that boots is not a model that answers. After /health the boot sends one short request
(does the endpoint produce tokens at all), runs the check suite that fits the plan (short on one GPU,
deploy on several, or as asked) and vLLM's own serving benchmark next to the engine, and the boot
record keeps all three with a verdict per part: booted / responded / answered / served.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apron.boot.session import AfterHealthy, Progress, ServedEngine
from apron.errors import Failed
from apron.frozen import frozen
from apron.measure.endpoint import Endpoint
from apron.plan.result import Plan

if TYPE_CHECKING:
    from apron.measure.servetest import ServeTestSettings

SMOKE_TOKENS = 8
RANDOM_WEIGHTS_NOTE = "answers not checked: random weights"


@frozen
class AnswerSettings:
    suite: str | None = None  # short | deploy | none; None: short on one GPU, deploy on several
    serve_test: bool = True
    num_prompts: int = 50
    input_len: int = 512
    output_len: int = 128
    concurrency: int = 4
    reasoning_effort: str | None = None


def suite_for(plan: Plan, settings: AnswerSettings) -> str | None:
    if settings.suite == "none":
        return None
    if settings.suite:
        return settings.suite
    return "deploy" if plan.gpu_count > 1 else "short"


def after_healthy_hook(plan: Plan, settings: AnswerSettings, progress: Progress = lambda m: None) -> AfterHealthy:
    def hook(endpoint: ServedEngine) -> dict[str, Any]:
        out: dict[str, Any] = {"responded": smoke_answer(endpoint.url, endpoint.served_model_name)}
        progress(f"smoke request: {'answered' if out['responded']['ok'] else out['responded']['error']}")
        suite = suite_for(plan, settings)
        if suite and plan.model.has_random_weights:
            # The checks ask questions with one right answer; random weights never give it, and a
            # failed check would be noise, not a finding.
            out["answers_skipped"] = RANDOM_WEIGHTS_NOTE
            progress(RANDOM_WEIGHTS_NOTE)
        elif suite:
            out["answers"] = _checks(endpoint, plan, suite, settings, progress)
        if settings.serve_test:
            out["serving"] = _serving(endpoint, settings, progress)
        out["verdicts"] = verdicts(out)
        return out

    return hook


def verdicts(out: dict[str, Any]) -> dict[str, bool | None]:
    answers, serving = out.get("answers") or {}, out.get("serving") or {}
    return {
        "booted": True,
        "responded": bool(out["responded"]["ok"]),
        "answered": answers.get("verdict") == "answered" if answers else None,
        "served": serving.get("verdict") == "served" if serving else None,
    }


def smoke_answer(url: str, model: str, timeout_seconds: float = 300) -> dict[str, Any]:
    """One chat request of a few tokens: the endpoint returns tokens (what the text is, the checks judge)."""
    body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": SMOKE_TOKENS, "temperature": 0}
    try:
        with Endpoint(url, model, timeout_seconds=timeout_seconds) as endpoint:
            reply = endpoint.chat(body)
    except Failed as exc:
        return {"ok": False, "error": exc.message[:300], "latency_seconds": None}
    if not reply.is_ok:
        return {"ok": False, "error": (reply.error or f"HTTP {reply.status_code}")[:300], "latency_seconds": None}
    tokens = (reply.body.get("usage") or {}).get("completion_tokens") or 0
    return {
        "ok": tokens > 0,
        "error": None if tokens else "no tokens in the reply",
        "completion_tokens": tokens,
        "latency_seconds": round(reply.latency_seconds, 3),
    }


def _checks(
    endpoint: ServedEngine, plan: Plan, suite: str, settings: AnswerSettings, progress: Progress
) -> dict[str, Any]:
    from apron.measure.checks import run_checks

    try:
        report = run_checks(
            endpoint.url,
            endpoint.served_model_name,
            suite,
            multimodal=plan.sends_images,
            reasoning_effort=settings.reasoning_effort,
            reasoning_parser=plan.flag_value("--reasoning-parser"),
            tool_parser=plan.flag_value("--tool-call-parser"),
            progress=progress,
        )
    except Exception as exc:  # noqa: BLE001 - a broken check run is recorded, the boot record still lands
        return {"verdict": "not_answered", "error": f"{type(exc).__name__}: {exc}"[:500]}
    return report.to_json()


def _serving(endpoint: ServedEngine, settings: AnswerSettings, progress: Progress) -> dict[str, Any]:
    """vllm bench serve runs on the target, next to the engine (its tokenizer is there too)."""
    from apron.measure.servetest import ServeTestSettings

    test = ServeTestSettings(
        settings.num_prompts, settings.input_len, settings.output_len, settings.concurrency, 0
    ).validate()
    try:
        from apron.boot.hosts import LocalHost

        if isinstance(endpoint.host, LocalHost):
            from apron.measure.servetest import run_serve_test

            return run_serve_test(
                endpoint.url,
                endpoint.served_model_name,
                vllm_executable=endpoint.vllm,
                num_prompts=test.num_prompts,
                input_len=test.input_len_tokens,
                output_len=test.output_len_tokens,
                concurrency=test.concurrency,
                progress=progress,
            ).to_json()
        return _remote_serving(endpoint, test, progress)
    except Exception as exc:  # noqa: BLE001 - recorded as a failed serving test, not a lost boot
        return {"verdict": "not_served", "error": f"{type(exc).__name__}: {exc}"[:500]}


def _remote_serving(endpoint: ServedEngine, test: ServeTestSettings, progress: Progress) -> dict[str, Any]:
    from apron.measure.servetest import ServeReport, bench_command, first_request_error, parse_bench_result

    model_root = _served_root(endpoint)
    command = bench_command(
        endpoint.vllm,
        endpoint.target_url,
        endpoint.served_model_name,
        model_root,
        test,
        Path(endpoint.run_dir),
        "serve-test.json",
    )
    progress(f"serve test on the target: {test.num_prompts} requests (vllm bench serve)")
    result = endpoint.run(command, timeout=3600)
    document = json.loads(endpoint.run(["cat", f"{endpoint.run_dir}/serve-test.json"]).stdout)
    figures = parse_bench_result(document)
    report = ServeReport(
        endpoint.target_url,
        endpoint.served_model_name,
        test,
        figures,
        f"{endpoint.run_dir}/serve-test.json",
        tuple(command),
        first_request_error(result.stdout + result.stderr),
    )
    return report.to_json()


def _served_root(endpoint: ServedEngine) -> str:
    with Endpoint(endpoint.url, timeout_seconds=60) as engine:
        models = engine.served_models()
    return (models[0].root if models else None) or endpoint.served_model_name
