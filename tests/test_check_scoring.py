"""Each check's scoring on real response bodies recorded from the vLLM CPU engine
(tests/fixtures/responses/; `.edited` files are minimal edits of a captured body, see its README)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from apron.measure import checks
from apron.measure.checks import (
    CITY_SCHEMA,
    REASONING_QUESTION,
    CheckOptions,
    Question,
    score_answer,
    score_json,
    score_reasoning,
    score_tool_call,
)
from apron.measure.endpoint import reply_from_record
from apron.measure.haystack import build_haystack, target_tokens
from apron.measure.png import COLOURS, solid_png
from apron.measure.replies import EXCERPT_CHARS, excerpt

RESPONSES = Path(__file__).parent / "fixtures" / "responses"
OPTIONS = CheckOptions()
QUESTIONS = {q.name: q for q in checks.SHORT_QUESTIONS}


def record(name: str) -> dict:
    return json.loads((RESPONSES / f"{name}.json").read_text())


def reply(name: str):
    r = record(name)
    return reply_from_record(r["status_code"], r["body"], r.get("latency_seconds") or 0.0)


def edited_tool_arguments(arguments: str):
    """The real tool_choice=named reply with its arguments string replaced (an edit made here)."""
    r = copy.deepcopy(record("tool_call_named"))
    r["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return reply_from_record(200, r["body"])


# ---- exact answers ------------------------------------------------------------------------------


def test_right_answer_passes():
    outcome = score_answer(reply("arithmetic_right.edited"), QUESTIONS["arithmetic"], OPTIONS, 64)
    assert outcome.status == "pass" and outcome.reason == "right answer: 42"


@pytest.mark.parametrize("name", ["arithmetic", "capital", "reversal"])
def test_random_weights_answer_wrong(name):
    outcome = score_answer(reply(f"{name}_wrong"), QUESTIONS[name], OPTIONS, 64)
    assert outcome.status == "fail"
    # Random weights emit newlines until the budget ends: a wrong answer, not a budget problem.
    assert outcome.reason == (
        f"wrong answer: expected {QUESTIONS[name].expected!r}, got only whitespace "
        '"\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n\\n…" (cut off at the token budget)'
    )


@pytest.mark.parametrize(
    "question, text, expected",
    [
        (QUESTIONS["arithmetic"], "17 + 25 = 42.", True),
        (QUESTIONS["arithmetic"], "42 is not 17 + 26 = 43", False),
        (QUESTIONS["capital"], "The capital of France is Paris.", True),
        (QUESTIONS["capital"], "Parisian", False),
        (QUESTIONS["reversal"], "Desserts", True),
        (QUESTIONS["reversal"], "dessert", False),
    ],
)
def test_question_matching(question, text, expected):
    assert question.matches(text) is expected


def test_answer_inside_reasoning_is_a_wrong_channel():
    options = CheckOptions(reasoning_parser="qwen3")
    outcome = score_answer(reply("arithmetic_in_reasoning.edited"), QUESTIONS["arithmetic"], options, 64)
    assert outcome.status == "fail"
    assert outcome.reason.startswith("wrong channel: the answer is inside the reasoning text")
    assert outcome.fix == "serve with the model's reasoning parser: --reasoning-parser qwen3"


def test_reasoning_and_answer_in_one_string_is_a_wrong_channel():
    outcome = score_answer(reply("reasoning_tag_in_content"), REASONING_QUESTION, OPTIONS, 64)
    assert outcome.status == "fail"
    assert outcome.reason == (
        "wrong channel: reasoning and answer came back in one string (the answer holds '</think>')"
    )
    assert "--reasoning-parser NAME" in outcome.fix


def test_budget_spent_on_reasoning_says_so():
    outcome = score_answer(reply("arithmetic_all_reasoning"), QUESTIONS["arithmetic"], OPTIONS, 64)
    assert outcome.status == "fail"
    assert outcome.reason == "no answer: ran out of the 64-token budget while still reasoning (finish_reason length)"
    assert "--reasoning-effort low" in outcome.fix


def test_http_error_is_recorded():
    outcome = score_answer(reply("image_text_only_model"), Question("image", "", "red", "word"), OPTIONS, 64)
    assert outcome.status == "fail"
    assert outcome.reason == "the server refused the request: HTTP 400: tiny is not a multimodal model"


# ---- needle -------------------------------------------------------------------------------------


def _needle_code(name: str) -> str:
    prompt = record(name)["request"]["messages"][0]["content"]
    return prompt.split("The secret code is ")[1][:8]


def test_needle_right_code_passes_and_wrong_fails():
    code = _needle_code("needle_right.edited")
    question = Question("needle", "", code, "text")
    assert score_answer(reply("needle_right.edited"), question, OPTIONS, 64).status == "pass"
    assert score_answer(reply("needle_wrong"), question, OPTIONS, 64).status == "fail"


def test_haystack_respects_max_model_len_and_says_so():
    counted = []

    def count(messages):  # ~3 characters per token, like a small BPE
        counted.append(len(messages[0]["content"]) // 3 + 20)
        return counted[-1]

    haystack = build_haystack(count, max_model_len_tokens=4096, answer_budget_tokens=64, rng=random.Random(3))
    assert haystack.prompt_tokens <= 4096 - 64 and haystack.prompt_tokens > 0.9 * (4096 - 64)
    assert f"The secret code is {haystack.code}." in haystack.messages[0]["content"]
    assert haystack.note.startswith("haystack scaled down to 4032 tokens: the served max_model_len is 4096")
    assert len(counted) <= 6
    assert target_tokens(131072, 64) == (32768, "full 32k haystack")


def test_haystack_without_tokenize_is_an_estimate():
    haystack = build_haystack(
        lambda messages: None, max_model_len_tokens=None, answer_budget_tokens=64, rng=random.Random(3)
    )
    assert haystack.is_estimate and "estimate" in haystack.note
    assert 30000 < haystack.prompt_tokens <= 32768


# ---- reasoning ----------------------------------------------------------------------------------


def test_reasoning_in_its_own_channel_passes():
    outcome = score_reasoning(reply("reasoning_right.edited"), REASONING_QUESTION, OPTIONS, 1088)
    assert outcome.status == "pass"
    assert outcome.reason.startswith("reasoning in its own channel (")


def test_right_answer_without_reasoning_is_skipped_or_failed():
    no_reasoning = reply("reasoning_right_no_reasoning.edited")
    assert score_reasoning(no_reasoning, REASONING_QUESTION, OPTIONS, 1088).status == "skip"
    outcome = score_reasoning(no_reasoning, REASONING_QUESTION, CheckOptions(reasoning=True), 1088)
    assert outcome.status == "fail" and outcome.reason.startswith("no reasoning came back")


def test_reasoning_question_wrong_answer_fails():
    outcome = score_reasoning(reply("reasoning_no_channel"), REASONING_QUESTION, OPTIONS, 256)
    assert outcome.status == "fail" and outcome.reason.startswith("wrong answer: expected '15:55'")


# ---- tool call ----------------------------------------------------------------------------------


def test_tool_call_right_passes():
    outcome = score_tool_call(reply("tool_call_right.edited"), OPTIONS, 128)
    assert outcome.status == "pass"
    assert outcome.reason == 'called get_weather({"city": "Paris", "unit": "celsius"})'


def test_tool_call_wrong_arguments_fail():
    outcome = score_tool_call(reply("tool_call_wrong_arguments.edited"), OPTIONS, 128)
    assert outcome.status == "fail" and outcome.reason == "wrong arguments: city='London' (expected 'Paris')"


def test_tool_call_with_null_arguments_is_malformed():
    # Real: tool_choice named without `strict` lets vLLM accept any JSON value as arguments.
    outcome = score_tool_call(reply("tool_call_named"), OPTIONS, 128)
    assert outcome.status == "fail"
    assert outcome.reason == "malformed tool call: the arguments are null, not an object"


@pytest.mark.parametrize(
    "arguments, reason",
    [
        ('{"city": "Par', "malformed tool call: the arguments are not JSON: "),
        (
            '{"city": "Paris"}',
            "malformed tool call: the arguments break the function's schema: 'unit' is a required property",
        ),
        (
            '{"city": "Paris", "unit": "kelvin"}',
            "malformed tool call: the arguments break the function's schema: unit: ",
        ),
    ],
)
def test_tool_call_malformed_arguments(arguments, reason):
    outcome = score_tool_call(edited_tool_arguments(arguments), OPTIONS, 128)
    assert outcome.status == "fail" and outcome.reason.startswith(reason)


def test_tool_call_cut_off_at_the_budget():
    outcome = score_tool_call(reply("tool_call_required"), OPTIONS, 128)
    assert outcome.status == "fail"
    assert outcome.reason == (
        "no tool call: a call ('<tool_call>') was cut off at the 128-token budget and came back as text"
    )


def test_unparsed_tool_call_names_the_parser_fix():
    outcome = score_tool_call(reply("tool_call_unparsed.edited"), CheckOptions(tool_parser="hermes"), 128)
    assert outcome.status == "fail"
    assert outcome.reason.startswith("the tool call came back as text in the answer ('<tool_call>')")
    assert outcome.fix == "serve with --enable-auto-tool-choice --tool-call-parser hermes"


def test_text_instead_of_a_tool_call_fails():
    outcome = score_tool_call(reply("tool_call_auto"), OPTIONS, 128)
    assert outcome.status == "fail"
    assert outcome.reason.startswith('no tool call: the model answered in text: only whitespace "\\n\\n')


def test_server_without_tool_parser():
    outcome = score_tool_call(reply("tool_call_auto_no_parser"), OPTIONS, 128)
    assert outcome.status == "fail"
    assert outcome.reason.startswith('the server cannot parse tool calls: "auto" tool choice requires')
    assert outcome.fix.startswith("serve with --enable-auto-tool-choice --tool-call-parser NAME")


# ---- JSON schema --------------------------------------------------------------------------------


def test_structured_output_json_passes():
    outcome = score_json(reply("json_schema_valid"), CITY_SCHEMA, OPTIONS, 128)
    assert outcome.status == "pass" and outcome.details["document"]["city"] in ("Paris", "Rome", "Berlin", "Madrid")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("json_schema_invalid.edited", "invalid JSON (Unterminated string starting at: "),
        ("json_schema_cut_off", "invalid JSON: cut off at the 128-token budget: "),
        ("json_schema_fenced.edited", "invalid JSON: wrapped in a markdown code fence"),
        (
            "json_schema_breaks_schema.edited",
            "the JSON breaks the schema: population_millions: 2870 is greater than the maximum of 100",
        ),
        ("json_schema_reasoning_parser", "no answer: ran out of the 128-token budget while still reasoning"),
    ],
)
def test_bad_json_fails_with_its_reason(name, reason):
    outcome = score_json(reply(name), CITY_SCHEMA, OPTIONS, 128)
    assert outcome.status == "fail" and outcome.reason.startswith(reason)


# ---- pieces -------------------------------------------------------------------------------------


def test_excerpt_is_short_and_shows_the_channels():
    text = excerpt(record("reasoning_right.edited")["body"])
    assert json.loads(text) == {
        "content": "15:55",
        "reasoning": "14:20 plus 95 minutes: 15:20 plus 35 is 15:55.",
        "finish_reason": "stop",
    }
    assert all(len(excerpt(json.loads(p.read_text())["body"])) <= EXCERPT_CHARS for p in RESPONSES.glob("*.json"))
    assert "not a multimodal model" in excerpt(record("image_text_only_model")["body"])


def test_png_is_a_valid_image_of_its_colour():
    import struct
    import zlib

    png = solid_png(COLOURS["blue"], 8)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    idat_length = struct.unpack(">I", png[33:37])[0]
    pixels = zlib.decompress(png[41 : 41 + idat_length])
    assert (width, height) == (8, 8) and pixels[:4] == b"\x00" + bytes(COLOURS["blue"])


def test_png_opens_in_pillow_from_the_engine_venv(tmp_path):
    """An independent reader: the Pillow that vLLM itself uses to load images."""
    import subprocess

    from engine_env import vllm_python

    path = tmp_path / "red.png"
    path.write_bytes(solid_png(COLOURS["red"]))
    script = f"from PIL import Image; im = Image.open({str(path)!r}); print(im.size, im.mode, im.getpixel((100, 100)))"
    out = subprocess.run([vllm_python(), "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(224, 224) RGB (220, 20, 20)"


def test_template_reads_reasoning_effort():
    assert checks.template_reads_reasoning_effort("{% if reasoning_effort %}...{% endif %}")
    assert not checks.template_reads_reasoning_effort("{{ messages }}")
    assert not checks.template_reads_reasoning_effort(None)
