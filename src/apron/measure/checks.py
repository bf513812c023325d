"""Will it answer: deployment checks against any OpenAI-compatible endpoint.

A model that boots is not a model that answers: it can reply in the wrong channel, lose a needle in
a long context or crash on its first tool call. Each check sends what a user would send, then scores
the raw response body (score_* functions, pure, tested on recorded real bodies).

Suites: `short` - three questions with exact answers; `deploy` - a needle in a ~32k-token haystack,
a tool call, JSON output against a schema, an image (multimodal models only) and reasoning returned
in its own channel.
"""

from __future__ import annotations

import json
import random
import re
import secrets
from collections.abc import Callable
from typing import Any

from apron.errors import BadInput
from apron.frozen import field, frozen, replace
from apron.measure.endpoint import Endpoint, Reply, ServedModel
from apron.measure.haystack import build_haystack
from apron.measure.png import COLOURS, data_url, solid_png
from apron.measure.replies import (
    ChatAnswer,
    clip,
    excerpt,
    read_answer,
    reasoning_marker_in,
    shown,
    tool_call_marker_in,
)

SUITES: dict[str, tuple[str, ...]] = {
    "short": ("arithmetic", "capital", "reversal"),
    "deploy": ("needle", "tool_call", "json_schema", "image", "reasoning"),
}
TOOL_CHOICES = ("auto", "required", "named")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Room a thinking model needs before its answer; short answers alone fit the answer budget.
REASONING_ALLOWANCE_TOKENS = 1024
# A prompt's share of the context that the budget must leave free (the short prompts are < 200 tokens).
PROMPT_ROOM_TOKENS = 256


@frozen
class Question:
    """A prompt with one exact, checkable answer."""

    name: str
    prompt: str
    expected: str
    kind: str  # "number": the last number is it; "word": it appears as a word; "text": it appears

    def matches(self, text: str) -> bool:
        if self.kind == "number":
            numbers = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
            return bool(numbers) and float(numbers[-1]) == float(self.expected)
        if self.kind == "word":
            return re.search(rf"\b{re.escape(self.expected)}\b", text, re.IGNORECASE) is not None
        return self.expected.casefold() in text.casefold()


SHORT_QUESTIONS = (
    Question("arithmetic", "What is 17 + 25? Reply with the number only.", "42", "number"),
    Question("capital", "What is the capital of France? Reply with one word.", "Paris", "word"),
    Question(
        "reversal",
        "Write the word 'stressed' backwards, letter by letter reversed. Reply with the reversed word only.",
        "desserts",
        "word",
    ),
)
REASONING_QUESTION = Question(
    "reasoning",
    "A train leaves at 14:20 and the journey takes 95 minutes. At what time does it arrive? "
    "Think it through, then reply with the arrival time only, as HH:MM.",
    "15:55",
    "text",
)

WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": WEATHER_PARAMETERS,
    },
}
TOOL_PROMPT = "What is the weather in Paris right now, in celsius? Use the get_weather tool."
EXPECTED_TOOL_ARGUMENTS = {"city": "Paris", "unit": "celsius"}  # compared case-insensitively

# Enums and a bounded integer keep a right answer short and leave nothing for free text to wander.
CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Berlin", "Madrid"]},
        "is_capital": {"type": "boolean"},
        "population_millions": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["city", "is_capital", "population_millions"],
    "additionalProperties": False,
}
JSON_PROMPT = (
    "Describe Rome as a JSON object: the city's name, whether it is its country's capital, and "
    "its population in millions as a whole number."
)


@frozen
class CheckOptions:
    """How to ask: what the caller knows about the model and its server."""

    multimodal: bool = False
    reasoning_effort: str | None = None  # sent only where the chat template reads it
    reasoning: bool | None = None  # the model reasons; None: judge from its replies
    reasoning_parser: str | None = None  # named in the fix when reasoning lands in the wrong channel
    tool_parser: str | None = None  # named in the fix when tool calls are not parsed
    tool_choice: str = "auto"  # auto (the server's tool parser) | required | named
    answer_budget_tokens: int = 64

    def budget_tokens(self, answer_tokens: int | None = None, *, expect_thinking: bool = False) -> int:
        """max_tokens for one request: the answer, plus room to think where the model thinks."""
        thinks = expect_thinking or bool(self.reasoning or self.reasoning_effort)
        return (answer_tokens or self.answer_budget_tokens) + (REASONING_ALLOWANCE_TOKENS if thinks else 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "multimodal": self.multimodal,
            "reasoning_effort": self.reasoning_effort,
            "reasoning": self.reasoning,
            "reasoning_parser": self.reasoning_parser,
            "tool_parser": self.tool_parser,
            "tool_choice": self.tool_choice,
            "answer_budget_tokens": self.answer_budget_tokens,
        }


@frozen
class Outcome:
    """What scoring a reply decides."""

    status: str  # "pass" | "fail" | "skip"
    reason: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _pass(reason: str, **details: Any) -> Outcome:
    return Outcome("pass", reason, None, details)


def _fail(reason: str, fix: str | None = None, **details: Any) -> Outcome:
    return Outcome("fail", reason, fix, details)


@frozen
class CheckResult:
    name: str
    status: str
    reason: str
    fix: str | None
    latency_seconds: float | None
    excerpt: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "latency_seconds": None if self.latency_seconds is None else round(self.latency_seconds, 4),
            "excerpt": self.excerpt,
            "details": self.details,
        }


@frozen
class CheckReport:
    url: str
    model: str
    suite: str
    served: ServedModel
    options: CheckOptions
    seed: int
    results: tuple[CheckResult, ...]

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def verdict(self) -> str:
        """answered: every check that ran passed. A skipped check (no image input on a text model)
        neither passes nor fails."""
        return "answered" if self.count("fail") == 0 and self.count("pass") > 0 else "not_answered"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "apron.check/1",
            "url": self.url,
            "model": self.model,
            "suite": self.suite,
            "verdict": self.verdict,
            "served": {"root": self.served.root, "max_model_len_tokens": self.served.max_model_len_tokens},
            "options": self.options.to_json(),
            "seed": self.seed,
            "num_passed": self.count("pass"),
            "num_failed": self.count("fail"),
            "num_skipped": self.count("skip"),
            "checks": [r.to_json() for r in self.results],
        }


# ---- fixes named in failure reasons -------------------------------------------------------------


def reasoning_fix(options: CheckOptions) -> str:
    parser = options.reasoning_parser or "NAME (the model family's, e.g. qwen3)"
    return f"serve with the model's reasoning parser: --reasoning-parser {parser}"


def tool_fix(options: CheckOptions) -> str:
    parser = options.tool_parser or "NAME (the model family's, e.g. hermes)"
    return f"serve with --enable-auto-tool-choice --tool-call-parser {parser}"


def budget_fix(options: CheckOptions) -> str:
    if options.reasoning_effort:
        return "raise the answer budget (--answer-budget-tokens) or lower --reasoning-effort"
    return (
        "send --reasoning-effort low where the chat template reads reasoning_effort, or pass --reasoning "
        f"to allow {REASONING_ALLOWANCE_TOKENS} tokens of thinking"
    )


# ---- scoring (pure: a reply in, an outcome out) -------------------------------------------------


def _http_failure(reply: Reply) -> Outcome:
    if reply.status_code == 0:
        return _fail(f"no answer: {reply.error}")
    return _fail(
        f"the server refused the request: HTTP {reply.status_code}: {reply.error}", http_status=reply.status_code
    )


def _answer_or_failure(reply: Reply) -> ChatAnswer | Outcome:
    if not reply.is_ok:
        return _http_failure(reply)
    answer = read_answer(reply.body)
    return answer if answer is not None else _fail("the reply holds no choices: not a chat completion")


def _channel_failure(answer: ChatAnswer, options: CheckOptions) -> Outcome | None:
    """Reasoning text in the answer channel: both came back in one string."""
    marker = reasoning_marker_in(answer.content)
    if marker is None:
        return None
    return _fail(
        f"wrong channel: reasoning and answer came back in one string (the answer holds {marker!r})",
        reasoning_fix(options),
        marker=marker,
    )


def _empty_answer(answer: ChatAnswer, question: Question | None, options: CheckOptions, budget_tokens: int) -> Outcome:
    """The answer channel is empty: say whether the answer is in the reasoning, cut off, or absent."""
    in_reasoning = question is not None and bool(answer.reasoning) and question.matches(answer.reasoning)
    if in_reasoning and answer.finish_reason != "length":
        return _fail(
            "wrong channel: the answer is inside the reasoning text and the answer channel is empty; "
            "the reasoning parser does not match the model",
            reasoning_fix(options),
            answer_in_reasoning=True,
        )
    if answer.finish_reason == "length":
        where = " while still reasoning" if answer.reasoning else ""
        return _fail(
            f"no answer: ran out of the {budget_tokens}-token budget{where} (finish_reason length)",
            budget_fix(options) if answer.reasoning else None,
            budget_tokens=budget_tokens,
        )
    if answer.tool_calls:
        return _fail("no answer: the model called a tool instead of answering")
    return _fail(f"empty answer (finish_reason {answer.finish_reason})")


def _answer_in_its_channel(reply: Reply, options: CheckOptions) -> ChatAnswer | Outcome:
    """The reply's answer, or the failure that stops scoring (an HTTP error, a wrong channel)."""
    answer = _answer_or_failure(reply)
    if isinstance(answer, Outcome):
        return answer
    return _channel_failure(answer, options) or answer


def score_answer(reply: Reply, question: Question, options: CheckOptions, budget_tokens: int) -> Outcome:
    """An exact answer in the answer channel."""
    answer = _answer_in_its_channel(reply, options)
    if isinstance(answer, Outcome):
        return answer
    if not answer.content:
        return _empty_answer(answer, question, options, budget_tokens)
    details = {"expected": question.expected, "finish_reason": answer.finish_reason}
    if question.matches(answer.content):
        return _pass(f"right answer: {question.expected}", **details)
    cut = " (cut off at the token budget)" if answer.finish_reason == "length" else ""
    return _fail(f"wrong answer: expected {question.expected!r}, got {shown(answer.content)}{cut}", **details)


def score_reasoning(reply: Reply, question: Question, options: CheckOptions, budget_tokens: int) -> Outcome:
    """The right answer in the answer channel and the reasoning in its own."""
    outcome = score_answer(reply, question, options, budget_tokens)
    if outcome.status != "pass":
        return outcome
    answer = read_answer(reply.body)
    if answer is not None and answer.reasoning.strip():
        return _pass(
            f"reasoning in its own channel ({len(answer.reasoning)} characters) and the right answer "
            f"{question.expected}",
            reasoning_chars=len(answer.reasoning),
            **outcome.details,
        )
    if options.reasoning:
        return _fail(
            "no reasoning came back: the answer is right but the reasoning channel is empty",
            reasoning_fix(options) + ", and check that the chat template turns thinking on",
            **outcome.details,
        )
    return Outcome(
        "skip",
        "no reasoning channel in the reply and none expected (a model that does not "
        "reason, or reasoning off); the answer is right",
        None,
        outcome.details,
    )


def _schema_error(instance: Any, schema: dict[str, Any]) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def score_json(reply: Reply, schema: dict[str, Any], options: CheckOptions, budget_tokens: int) -> Outcome:
    """The answer is a JSON document valid for the schema."""
    answer = _answer_in_its_channel(reply, options)
    if isinstance(answer, Outcome):
        return answer
    text = answer.content.strip()
    if not text:
        return _empty_answer(answer, None, options, budget_tokens)
    try:
        document = json.loads(text)
    except ValueError as exc:
        return _not_json(text, exc, answer, budget_tokens)
    error = _schema_error(document, schema)
    if error is not None:
        return _fail(f"the JSON breaks the schema: {error}", document=document)
    return _pass(f"valid JSON for the schema: {clip(text)}", document=document)


def _not_json(text: str, exc: ValueError, answer: ChatAnswer, budget_tokens: int) -> Outcome:
    if answer.finish_reason == "length":
        return _fail(
            f"invalid JSON: cut off at the {budget_tokens}-token budget: {clip(text)}", budget_tokens=budget_tokens
        )
    if text.startswith("```"):
        return _fail(
            "invalid JSON: wrapped in a markdown code fence, so the server did not apply the schema",
            "use a server with structured output (vLLM applies response_format json_schema)",
        )
    return _fail(f"invalid JSON ({exc}): {clip(text)}")


def score_tool_call(reply: Reply, options: CheckOptions, budget_tokens: int) -> Outcome:
    """One call of get_weather with arguments valid for its schema and the right values."""
    if not reply.is_ok and re.search(r"tool-call-parser|enable-auto-tool-choice", reply.error or ""):
        return _fail(
            f"the server cannot parse tool calls: {reply.error}", tool_fix(options), http_status=reply.status_code
        )
    answer = _answer_or_failure(reply)
    if isinstance(answer, Outcome):
        return answer
    if not answer.tool_calls:
        return _no_tool_call(answer, options, budget_tokens)
    function = answer.tool_calls[0].get("function") or {}
    details: dict[str, Any] = {
        "num_tool_calls": len(answer.tool_calls),
        "name": function.get("name"),
        "arguments": function.get("arguments"),
    }
    if function.get("name") != WEATHER_TOOL["function"]["name"]:
        return _fail(f"called {function.get('name')!r} instead of 'get_weather'", **details)
    return _score_arguments(function.get("arguments"), details)


def _no_tool_call(answer: ChatAnswer, options: CheckOptions, budget_tokens: int) -> Outcome:
    marker = tool_call_marker_in(answer.content) or tool_call_marker_in(answer.reasoning)
    if marker is None:
        return _fail(f"no tool call: the model answered in text: {shown(answer.content or answer.reasoning)}")
    if answer.finish_reason == "length":
        return _fail(
            f"no tool call: a call ({marker!r}) was cut off at the {budget_tokens}-token budget and came back as text",
            marker=marker,
        )
    where = "the answer" if marker in answer.content else "the reasoning text"
    return _fail(
        f"the tool call came back as text in {where} ({marker!r}): the server did not parse it",
        tool_fix(options),
        marker=marker,
    )


def _score_arguments(raw: Any, details: dict[str, Any]) -> Outcome:
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return _fail(f"malformed tool call: the arguments are not JSON: {clip(str(raw))}", **details)
    if not isinstance(arguments, dict):
        return _fail(f"malformed tool call: the arguments are {json.dumps(arguments)}, not an object", **details)
    error = _schema_error(arguments, WEATHER_PARAMETERS)
    if error is not None:
        return _fail(f"malformed tool call: the arguments break the function's schema: {error}", **details)
    wrong = [
        f"{key}={arguments.get(key)!r} (expected {value!r})"
        for key, value in EXPECTED_TOOL_ARGUMENTS.items()
        if str(arguments.get(key, "")).strip().casefold() != value.casefold()
    ]
    if wrong:
        return _fail("wrong arguments: " + ", ".join(wrong), **details)
    return _pass(f"called get_weather({json.dumps(arguments, ensure_ascii=False)})", **details)


# ---- running the checks -------------------------------------------------------------------------


@frozen
class _Context:
    endpoint: Endpoint
    served: ServedModel
    options: CheckOptions
    rng: random.Random

    def budget_tokens(self, answer_tokens: int | None = None, *, expect_thinking: bool = False) -> int:
        """The options' budget, kept inside the served context next to a short prompt."""
        budget = self.options.budget_tokens(answer_tokens, expect_thinking=expect_thinking)
        if self.served.max_model_len_tokens:
            budget = min(budget, max(self.served.max_model_len_tokens - PROMPT_ROOM_TOKENS, 16))
        return budget

    def chat(self, messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> Reply:
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, **extra}
        if self.options.reasoning_effort:
            body["reasoning_effort"] = self.options.reasoning_effort
        return self.endpoint.chat(body)


def _result(name: str, reply: Reply | None, outcome: Outcome, **details: Any) -> CheckResult:
    return CheckResult(
        name,
        outcome.status,
        outcome.reason,
        outcome.fix,
        None if reply is None else reply.latency_seconds,
        "" if reply is None else excerpt(reply.body),
        {**outcome.details, **details},
    )


def _ask(context: _Context, question: Question) -> CheckResult:
    budget = context.budget_tokens()
    reply = context.chat([{"role": "user", "content": question.prompt}], budget)
    return _result(question.name, reply, score_answer(reply, question, context.options, budget))


def _question_check(question: Question) -> Callable[[_Context], CheckResult]:
    return lambda context: _ask(context, question)


def check_needle(context: _Context) -> CheckResult:
    budget = context.budget_tokens()
    haystack = build_haystack(
        context.endpoint.count_tokens,
        rng=context.rng,
        answer_budget_tokens=budget,
        max_model_len_tokens=context.served.max_model_len_tokens,
    )
    reply = context.chat(haystack.messages, budget)
    outcome = score_answer(reply, Question("needle", "", haystack.code, "text"), context.options, budget)
    # The size goes into the reason itself: a pass on a scaled-down haystack must say so.
    outcome = replace(outcome, reason=f"{outcome.reason}; {haystack.note}")
    return _result(
        "needle",
        reply,
        outcome,
        code=haystack.code,
        prompt_tokens=haystack.prompt_tokens,
        prompt_tokens_estimated=haystack.is_estimate,
        depth_fraction=haystack.depth_fraction,
    )


def tool_request(tool_choice: str) -> dict[str, Any]:
    """The tool-call request body beside messages and max_tokens."""
    choice = {"type": "function", "function": {"name": "get_weather"}} if tool_choice == "named" else tool_choice
    return {"tools": [WEATHER_TOOL], "tool_choice": choice}


def check_tool_call(context: _Context) -> CheckResult:
    budget = context.budget_tokens(128)
    messages = [{"role": "user", "content": TOOL_PROMPT}]
    reply = context.chat(messages, budget, **tool_request(context.options.tool_choice))
    return _result(
        "tool_call", reply, score_tool_call(reply, context.options, budget), tool_choice=context.options.tool_choice
    )


def json_request() -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "city", "strict": True, "schema": CITY_SCHEMA},
        }
    }


def check_json_schema(context: _Context) -> CheckResult:
    budget = context.budget_tokens(128)
    reply = context.chat([{"role": "user", "content": JSON_PROMPT}], budget, **json_request())
    return _result("json_schema", reply, score_json(reply, CITY_SCHEMA, context.options, budget))


def image_messages(colour: str) -> list[dict[str, Any]]:
    png = solid_png(COLOURS[colour])
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(png)}},
                {"type": "text", "text": "What colour is this image? Reply with one word."},
            ],
        }
    ]


def check_image(context: _Context) -> CheckResult:
    if not context.options.multimodal:
        return _result(
            "image",
            None,
            Outcome("skip", "text-only model: no image input (pass --multimodal for a model with a vision tower)"),
        )
    colour = context.rng.choice(sorted(COLOURS))
    budget = context.budget_tokens()
    reply = context.chat(image_messages(colour), budget)
    question = Question("image", "", colour, "word")
    return _result("image", reply, score_answer(reply, question, context.options, budget), colour=colour)


def check_reasoning(context: _Context) -> CheckResult:
    # This check asks the model to think: leave room unless the caller says it does not reason.
    budget = context.budget_tokens(expect_thinking=context.options.reasoning is not False)
    reply = context.chat([{"role": "user", "content": REASONING_QUESTION.prompt}], budget)
    return _result("reasoning", reply, score_reasoning(reply, REASONING_QUESTION, context.options, budget))


CHECKS: dict[str, Callable[[_Context], CheckResult]] = {
    **{q.name: _question_check(q) for q in SHORT_QUESTIONS},
    "needle": check_needle,
    "tool_call": check_tool_call,
    "json_schema": check_json_schema,
    "image": check_image,
    "reasoning": check_reasoning,
}


def template_reads_reasoning_effort(chat_template: str | None) -> bool:
    """Send reasoning_effort only to templates that read it (others ignore it, some servers refuse it)."""
    return chat_template is not None and "reasoning_effort" in chat_template


def run_checks(
    base_url: str,
    model: str,
    suite: str = "short",
    *,
    multimodal: bool,
    reasoning_effort: str | None,
    reasoning: bool | None = None,
    reasoning_parser: str | None = None,
    tool_parser: str | None = None,
    tool_choice: str = "auto",
    answer_budget_tokens: int = 64,
    seed: int | None = None,
    timeout_seconds: float = 600,
    api_key: str | None = None,
    only: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CheckReport:
    """Run a suite against a served model; `only` picks checks by name (any suite's)."""
    names = _check_names(suite, only)
    options = _options(
        multimodal, reasoning_effort, reasoning, reasoning_parser, tool_parser, tool_choice, answer_budget_tokens
    )
    endpoint = Endpoint(base_url, model, api_key=api_key, timeout_seconds=timeout_seconds)
    served = endpoint.served_model()
    seed = secrets.randbits(32) if seed is None else seed
    context = _Context(endpoint, served, options, random.Random(seed))
    results = []
    for name in names:
        result = CHECKS[name](context)
        if progress is not None:
            took = "" if result.latency_seconds is None else f" ({result.latency_seconds:.2f} s)"
            progress(f"check {name}: {result.status}{took}")
        results.append(result)
    return CheckReport(base_url, model, suite, served, options, seed, tuple(results))


def _check_names(suite: str, only: tuple[str, ...] | None) -> tuple[str, ...]:
    if suite not in SUITES:
        raise BadInput(f"unknown suite {suite!r}: use one of {', '.join(SUITES)}")
    if not only:
        return SUITES[suite]
    unknown = [n for n in only if n not in CHECKS]
    if unknown:
        raise BadInput(f"unknown check {unknown[0]!r}: use one of {', '.join(CHECKS)}")
    return tuple(only)


def _options(
    multimodal: bool,
    reasoning_effort: str | None,
    reasoning: bool | None,
    reasoning_parser: str | None,
    tool_parser: str | None,
    tool_choice: str,
    answer_budget_tokens: int,
) -> CheckOptions:
    if tool_choice not in TOOL_CHOICES:
        raise BadInput(f"unknown tool choice {tool_choice!r}: use one of {', '.join(TOOL_CHOICES)}")
    if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
        raise BadInput(f"unknown reasoning effort {reasoning_effort!r}: use one of {', '.join(REASONING_EFFORTS)}")
    if answer_budget_tokens < 1:
        raise BadInput(f"--answer-budget-tokens must be at least 1, not {answer_budget_tokens}")
    return CheckOptions(
        multimodal, reasoning_effort, reasoning, reasoning_parser, tool_parser, tool_choice, answer_budget_tokens
    )
