"""Logs as people paste them: without vLLM's logger prefix, with only the process tag, with only the
level, or mixed line by line. A line is vLLM's when its message renders one of the release's format
strings (the shipped engine facts); it is read as the engine printed it, and the JSON says which
lines were recognised by their message alone. The fixtures are the CPU engine's real logs."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apron.cli import cli
from apron.measure.logerrors import EXCEPTION
from apron.measure.logparse import parse_log
from apron.rules.fingerprint import fingerprint
from apron.rules.formats import FORMATS
from log_variants import FORMS, LOGGER, TAG, mixed, stripped
from rules_text import LOGS

ALL_LOGS = sorted(LOGS.glob("*.log")) + sorted((LOGS / "example-tiny").glob("*.log"))
ALL_LOGS += sorted((LOGS / "checkpoint_files").glob("*.log"))
NAMES = [str(p.relative_to(LOGS)) for p in ALL_LOGS]
# What the prefix decides and a paste cannot keep: which process printed a line (and so how many
# copies are one error), and which lines were recognised by their message.
PREFIX_KEYS = ("per_rank", "sources", "processes", "template_lines")


@cache
def text_of(name: str) -> str:
    return (LOGS / name).read_text()


@cache
def reading(text: str) -> tuple[dict, tuple | None]:
    parsed = parse_log(text, FORMATS)
    accounting = {k: v for k, v in parsed.to_json().items() if k not in PREFIX_KEYS}
    found = fingerprint(parsed)
    decision = None
    if found is not None:
        decision = (found.family, found.blame, found.exception, found.message, json.dumps(found.fields, sort_keys=True))
    return accounting, decision


# A few seconds on CI: the same 60 mixes on every run.
@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NAMES), st.lists(st.sampled_from(FORMS), min_size=1, max_size=7))
def test_a_paste_stripped_anywhere_reads_as_the_prefixed_log(name, forms):
    pasted = mixed(text_of(name), forms)
    assert reading(pasted) == reading(text_of(name))


@pytest.mark.parametrize("name", NAMES)
def test_a_stripped_log_names_the_lines_it_recognised(name):
    """Every line the engine printed through its logger with a message the facts list is recognised
    without its prefix; the prefixed log recognises only what the engine printed bare (stderr)."""
    original = text_of(name)
    prefixed = parse_log(original, FORMATS)
    bare = parse_log(stripped(original), FORMATS)
    logged = [line for line in prefixed.lines if line.prefix == "vllm" and line.message.strip()]
    assert bare.has_vllm_lines and not {line.number for line in logged} & set(prefixed.template_lines)
    for line in logged:
        if line.number not in bare.template_lines:
            # What renders no format string of the facts: the banner's art, a multi-line message's
            # later lines, a traceback logged line by line, and exceptions built outside a `raise`.
            text = line.message
            assert "█" in text or "▀" in text or text[:1].isspace() or line.is_frame or EXCEPTION.match(text), text
    for number in bare.template_lines:
        line = bare.lines[number - 1]
        assert line.prefix is None and line.message.strip()


def test_the_lines_of_the_issue_thread():
    """The shapes people paste (vLLM 0.10-0.11 GPU boots): bare messages, the tag and level only."""
    text = "\n".join(
        [
            "Model loading took 8.02 GiB memory and 88.98 seconds",
            "(EngineCore_DP0 pid=258) INFO Available KV cache memory: 9.25 GiB",
            "(EngineCore_DP0 pid=258) GPU KV cache size: 101,024 tokens",
            "INFO [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 12.33x",
            "[gpu_model_runner.py:2708] Graph capturing finished in 13 secs, took 0.55 GiB",
            "some text of the person pasting it",
        ]
    )
    parsed = parse_log(text, FORMATS)
    assert parsed.weights_bytes == round(8.02 * 2**30) and parsed.model_load_seconds == 88.98
    assert parsed.available_kv_bytes == round(9.25 * 2**30) and parsed.kv_tokens == 101_024
    assert parsed.max_concurrency == 12.33 and parsed.cudagraph_bytes == round(0.55 * 2**30)
    assert parsed.template_lines == (1, 2, 3, 4, 5)
    assert parsed.lines[1].level == "INFO" and parsed.lines[1].process == "EngineCore_DP0"
    assert parsed.lines[0].level == "INFO"  # from the format string, which the release logs at INFO


def test_a_warning_pasted_bare_stays_a_warning():
    """config/parallel.py logs "Address already in use. Retrying with a new port." as a warning; a
    paste that lost the level must not make it the boot's decisive error."""
    cause = (LOGS / "d_kv_too_small_fast_1048575.log").read_text()
    (line,) = [x for x in cause.splitlines() if "To serve at least one request" in x and "ValueError" in x][:1]
    warning = "Address already in use. Retrying with a new port."
    for text in (stripped(f"{warning}\n{line}"), f"(APIServer pid=1) {warning}\n{line}"):
        found = fingerprint(text)
        assert found is not None and found.family == "kv_cache_too_small", text
    assert parse_log(warning, FORMATS).lines[0].level == "WARNING"
    assert fingerprint(warning) is None  # without the format, a bare line naming a port in use would be one


# ------------------------------------------------------------------ through the CLI


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("name", ["d_kv_too_small_fast_1048575.log", "a_healthy_fast_uni.log"])
def test_log_parse_of_a_stripped_log(name, tmp_path, apron_home):
    path = tmp_path / "pasted.log"
    path.write_text(stripped(text_of(name)))
    result = _run("log", "parse", str(path), "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    expected = json.loads(_run("log", "parse", str(LOGS / name), "--json").stdout)
    assert document["template_lines"] and expected["template_lines"] != document["template_lines"]
    for key in ("available_kv_bytes", "kv_tokens", "engine_version", "errors"):
        assert document[key] == expected[key]
    assert (document["decisive_error"] or {}).get("family") == (expected["decisive_error"] or {}).get("family")
    text = _run("log", "parse", str(path)).stdout
    assert f"{len(document['template_lines']):,} lines without vLLM's prefix, read by their message" in text


def test_a_pasted_error_block_parses_and_diagnoses(tmp_path, apron_home):
    """A traceback copied into an issue: no logger line at all, but the error is the release's own."""
    block = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 686, in '
        "_check_enough_kv_cache_memory",
        "    raise ValueError(",
        "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (9.31 GiB). Based on the available memory, "
        "the estimated maximum model length is 76144. Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.",
    ]
    path = tmp_path / "issue.txt"
    path.write_text("\n".join(block) + "\n")
    parsed = json.loads(_run("log", "parse", str(path), "--json").stdout)
    assert parsed["template_lines"] == [4]
    assert parsed["decisive_error"]["family"] == "kv_cache_too_small"
    diagnosis = json.loads(_run("diagnose", str(path), "--json").stdout)
    assert diagnosis["fingerprint"]["family"] == "kv_cache_too_small"
    assert diagnosis["fingerprint"]["fields"]["estimated_max_model_len"] == 76144
    assert diagnosis["fingerprint"]["phase"] == "kv_cache"


def test_a_file_with_no_line_of_vllm_is_still_refused(tmp_path, apron_home):
    path = tmp_path / "notes.txt"
    path.write_text("INFO the build passed\nWARNING a thing\n12:00 lunch\n")
    result = CliRunner().invoke(cli, ["log", "parse", str(path)])
    assert result.exit_code == 1
    assert "has no vLLM log lines" in str(result.exception)


def test_the_fixture_prefixes_are_what_the_variants_take_off():
    """The variants split each fixture line into tag, logger prefix and message: every line that has
    a logger prefix has one of the shape the splitter knows."""
    for path in ALL_LOGS:
        for line in path.read_text().splitlines():
            rest = line[m.end() :] if (m := TAG.match(line)) else line
            if rest[:5] in ("INFO ", "WARNI", "ERROR", "DEBUG"):
                assert LOGGER.match(rest), (path.name, line)


def test_every_fixture_is_listed():
    assert len(ALL_LOGS) >= 20 and all(Path(p).suffix == ".log" for p in ALL_LOGS)


QUOTES = {
    "issue reply": lambda text: "\n".join(f"> {line}" if line else ">" for line in text.split("\n")),
    "markdown block": lambda text: "\n".join(f"    {line}" if line else "" for line in text.split("\n")),
}


@pytest.mark.parametrize("quote", sorted(QUOTES))
@pytest.mark.parametrize("name", ["d_kv_too_small_fast_1048575.log", "b_healthy_mp_eager.log"])
def test_a_paste_quoted_or_indented_as_a_whole_reads_the_same(name, quote):
    for text in (text_of(name), stripped(text_of(name))):
        assert reading(QUOTES[quote](text)) == reading(text_of(name))
