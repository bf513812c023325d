"""What the boot does once /health answers: will the model answer, and how fast does it serve.

A model that boots is not a model that answers. After /health the boot sends one short request
(does the endpoint produce tokens at all), runs the check suite that fits the plan (short on one GPU,
deploy on several, or as asked) and vLLM's own serving benchmark next to the engine, and the boot
record keeps all three with a verdict per part: booted / responded / answered / served.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from apron.boot.session import AfterHealthy, Endpoint

SMOKE_TOKENS = 8


@dataclass(frozen=True)
class AnswerSettings:
    suite: str | None = None  # short | deploy | none; None: short on one GPU, deploy on several
    serve_test: bool = True
    num_prompts: int = 50
    input_len: int = 512
    output_len: int = 128
    concurrency: int = 4
    reasoning_effort: str | None = None


def suite_for(plan: dict, settings: AnswerSettings) -> str | None:
    if settings.suite == "none":
        return None
    if settings.suite:
        return settings.suite
    return "deploy" if int((plan.get("hardware") or {}).get("count") or 1) > 1 else "short"


def after_healthy_hook(plan: dict, settings: AnswerSettings, progress=lambda m: None) -> AfterHealthy:
    def hook(endpoint: Endpoint) -> dict:
        out = {"responded": smoke_answer(endpoint.url, endpoint.served_model_name)}
        progress(f"smoke request: {'answered' if out['responded']['ok'] else out['responded']['error']}")
        suite = suite_for(plan, settings)
        if suite:
            out["answers"] = _checks(endpoint, plan, suite, settings, progress)
        if settings.serve_test:
            out["serving"] = _serving(endpoint, settings, progress)
        out["verdicts"] = verdicts(out)
        return out

    return hook


def verdicts(out: dict) -> dict:
    answers, serving = out.get("answers") or {}, out.get("serving") or {}
    return {
        "booted": True,
        "responded": bool(out["responded"]["ok"]),
        "answered": answers.get("verdict") == "answered" if answers else None,
        "served": serving.get("verdict") == "served" if serving else None,
    }


def smoke_answer(url: str, model: str, timeout_seconds: float = 300) -> dict:
    """One chat request of a few tokens: the endpoint returns tokens (what the text is, the checks judge)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": SMOKE_TOKENS,
        "temperature": 0,
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            reply = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300], "latency_seconds": None}
    tokens = (reply.get("usage") or {}).get("completion_tokens") or 0
    return {
        "ok": tokens > 0,
        "error": None if tokens else "no tokens in the reply",
        "completion_tokens": tokens,
        "latency_seconds": round(time.monotonic() - started, 3),
    }


def _checks(endpoint: Endpoint, plan: dict, suite: str, settings: AnswerSettings, progress) -> dict:
    from apron.measure.checks import run_checks

    flags = " ".join(plan.get("flags") or [])
    try:
        report = run_checks(
            endpoint.url,
            endpoint.served_model_name,
            suite,
            multimodal=_is_multimodal(plan),
            reasoning_effort=settings.reasoning_effort,
            reasoning_parser=_flag_value(flags, "--reasoning-parser"),
            tool_parser=_flag_value(flags, "--tool-call-parser"),
            progress=progress,
        )
    except Exception as exc:  # noqa: BLE001 - a broken check run is recorded, the boot record still lands
        return {"verdict": "not_answered", "error": f"{type(exc).__name__}: {exc}"[:500]}
    return report.to_json()


def _serving(endpoint: Endpoint, settings: AnswerSettings, progress) -> dict:
    """vllm bench serve runs on the target, next to the engine (its tokenizer is there too)."""
    from apron.measure.servetest import ServeReport, ServeTestSettings

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
        return _remote_serving(endpoint, test, ServeReport, progress)
    except Exception as exc:  # noqa: BLE001 - recorded as a failed serving test, not a lost boot
        return {"verdict": "not_served", "error": f"{type(exc).__name__}: {exc}"[:500]}


def _remote_serving(endpoint: Endpoint, test, report_type, progress) -> dict:
    from apron.measure.servetest import bench_command, first_request_error, parse_bench_result

    model_root = _served_root(endpoint)
    command = bench_command(
        endpoint.vllm,
        endpoint.target_url,
        endpoint.served_model_name,
        model_root,
        test,
        endpoint.run_dir,
        "serve-test.json",
    )
    progress(f"serve test on the target: {test.num_prompts} requests (vllm bench serve)")
    result = endpoint.run(command, timeout=3600)
    document = json.loads(endpoint.run(["cat", f"{endpoint.run_dir}/serve-test.json"]).stdout)
    figures = parse_bench_result(document)
    report = report_type(
        endpoint.target_url,
        endpoint.served_model_name,
        test,
        figures,
        f"{endpoint.run_dir}/serve-test.json",
        tuple(command),
        first_request_error(result.stdout + result.stderr),
    )
    return report.to_json()


def _served_root(endpoint: Endpoint) -> str:
    with urllib.request.urlopen(endpoint.url.rstrip("/") + "/v1/models", timeout=60) as response:
        models = json.loads(response.read()).get("data") or [{}]
    return models[0].get("root") or endpoint.served_model_name


def _flag_value(flags: str, name: str) -> str | None:
    words = flags.split()
    return words[words.index(name) + 1] if name in words and words.index(name) + 1 < len(words) else None


def _is_multimodal(plan: dict) -> bool:
    if "--language-model-only" in (plan.get("flags") or []):
        return False
    encoder = (plan.get("details") or {}).get("encoder")
    if encoder is not None:  # plan/memory.py: the encoder the plan modelled (or why it runs none)
        return not encoder.get("skipped")
    unknown = " ".join(plan.get("unknowns") or []) + str(
        (plan.get("quantities") or {}).get("activation_peak_bytes", {}).get("basis", "")
    )
    return "encoder" in unknown
