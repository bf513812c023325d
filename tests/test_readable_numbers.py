"""Issue 22 section 5: numbers that read as contradictions. The card says what KV bytes per token "none"
and KV cache size count on sliding/state layouts, names a multimodal model's tower; the boot card
labels host RAM and the CPU worker's NUMA node; records list hides a settled hypothesis and keeps its
columns apart; records show orders timings as the boot ran; log parse prints no Python reprs; the
report's TTFT chart says there is no serving test; catalog ids match without regard to case."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from apron.records.documents import BootRecord, EngineIdentity, FixRecord, HardwareIdentity, LogRef, Measured
from apron.records.report import render_boot, render_list
from apron.records.store import RecordStore
from apron.records.views import list_rows
from apron.report.card import render_card
from conftest import FIXTURES, snapshot_path


def apron(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def _card(name: str, gpu: str = "H100", **user) -> str:
    return render_card(
        plan_checkpoint(load_checkpoint(str(snapshot_path(name))), resolve_gpu(gpu), UserSettings(**user))
    )


def _reading(card: str) -> list[str]:
    block = card.split("\nreading these numbers:\n", 1)[1].split("\n\n", 1)[0]
    return [line.removeprefix("  - ") for line in block.splitlines()]


def test_gemma4_says_what_its_kv_tokens_count(apron_home_with_facts):
    """Some 65,000 tokens beside 'the estimated maximum model length is 9,xxx': the first is max
    concurrency x max_model_len over every layer group, the second the longest one request."""
    plan = plan_checkpoint(
        load_checkpoint(str(snapshot_path("google/gemma-4-31B-it"))), resolve_gpu("H100"), UserSettings()
    )
    card = render_card(plan)
    tokens, concurrency = plan.quantity_value("kv_tokens"), plan.quantity_value("max_concurrency")
    assert tokens > 60_000 and concurrency < 1 and "the estimated maximum model length is 9" in card
    per_token, size, tower = _reading(card)
    assert per_token == (
        "KV bytes per token is none: no single figure on this layout; 50 x sliding-window layers: 16,384 B per "
        "token each (the window's tokens only); 10 x full attention layers: 8,192 B per token each"
    )
    assert size.startswith(
        f"KV cache size is vLLM's max concurrency x max_model_len ({concurrency:,.2f} x 262,144 = {tokens:,} tokens)"
    )
    fix = re.search(r"largest max_model_len that fits: --max-model-len (\d+)", card)
    assert fix and size.endswith(f"; one request fits up to {int(fix.group(1)):,} tokens (the fix below)")
    assert tower.startswith("multimodal model, gemma4 tower: profiled on 3 dummy video item(s) of 2,496 tokens")


def test_state_layouts_give_their_bytes_per_request(apron_home_with_facts):
    (per_token, size) = _reading(_card("state-spaces/mamba-2.8b-hf"))
    assert per_token.endswith("64 x mamba layers: a 194,560 B state per request each")
    assert "how many requests of max_model_len fit at once" in size and "one request fits up to" not in size
    gpt_oss = _reading(_card("openai/gpt-oss-20b"))[0]
    assert "12 x sliding-window layers: 2,048 B per token each" in gpt_oss


def test_a_plain_layout_needs_no_reading_and_a_text_only_plan_says_so(apron_home_with_facts):
    assert "reading these numbers" not in _card("Qwen/Qwen3-8B")
    (text_only,) = _reading(_card("google/gemma-4-31B-it", language_model_only=True)[:])[-1:]
    assert text_only == "multimodal model served text-only (--language-model-only): its tower is not loaded or profiled"


def _cpu_boot(**changes) -> BootRecord:
    fields = {
        "created_at": "2026-01-01T00:00:00Z",
        "plan_id": "p",
        "outcome": "healthy",
        "target": "local",
        "engine": EngineIdentity("0.32.0+cpu"),
        "hardware": HardwareIdentity("cpu", cpu_model="Fake CPU", cpu_cores=2, ram_bytes=round(23.54 * 2**30)),
        "log": LogRef("0" * 64, 0),
        "measured": {
            "total_memory_bytes": Measured(round(8.21 * 2**30), "bytes", "Explicitly set (0.06/8.21)"),
        },
        # stored documents keep their keys sorted: the view must not follow that order
        "timings": {"after_healthy_seconds": 0.2, "cold_start_seconds": 36.0, "engine_start_seconds": 35.0},
    }
    return BootRecord(**{**fields, **changes})


def test_the_boot_card_says_which_memory_is_which():
    text = render_boot("b" * 64, _cpu_boot())
    assert "  hardware  CPU (Fake CPU, 2 cores, 23.54 GiB host RAM)" in text
    assert (
        "    total_memory_bytes           8.21 GiB  "
        "(the NUMA node the CPU worker sizes its memory from, not the host RAM above)" in text
    )
    assert "  timings   engine start 35.00 s, cold start 36.00 s, checks and serving 200 ms" in text


def test_records_list_hides_a_settled_hypothesis_and_keeps_columns_apart(tmp_path):
    store = RecordStore(tmp_path / "records")
    boot_id = store.put(_cpu_boot())
    fix = FixRecord("kv_cache_max_model_len", "0.32.0", boot_id, "kv_cache_too_small", "f" * 16, {},
                    ("--max-model-len 1920",), "vllm serve m", "plan flagged it")  # fmt: skip
    hypothesis = store.put(fix)
    from dataclasses import replace

    proven = store.put(replace(fix, status="proven", corrected_boot="c" * 64, settles=hypothesis))
    listed = apron("records", "list", "--records", str(store.root))
    assert hypothesis[:12] not in listed.stdout and proven[:12] in listed.stdout
    assert "1 hypothesis record(s) a later fix record settled not shown (--all shows them)" in listed.stderr
    assert hypothesis[:12] in apron("records", "list", "--all", "--records", str(store.root)).stdout
    rows = list_rows(store, with_settled=True)
    text = render_list(rows)
    header, _, *lines = text.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    for line in lines:  # every column starts where its heading does, two spaces after the one before
        for start in starts[1:]:
            assert line[start - 2 : start] == "  ", (line, start)
    assert "vllm 0.32.0+cpu" in text


def test_log_parse_prints_settings_as_arguments_not_python(apron_home):
    out = apron("log", "parse", str(FIXTURES / "logs" / "example-tiny" / "llama.log")).stdout
    settings = next(line for line in out.splitlines() if line.startswith("settings "))
    assert settings.split(None, 1)[1] == (
        "/models/example-llama --host 127.0.0.1 --port 52619 --dtype bfloat16 --max-model-len 512 --enforce-eager "
        "--served-model-name tiny --distributed-executor-backend uni --kv-cache-memory-bytes 67108864"
    )
    assert "processes                            APIServer pid=9662, EngineCore pid=10386" in out
    assert "{'" not in out and "['" not in out and "True" not in out


def test_the_ttft_chart_without_a_serving_test_says_so():
    from apron.report.charts import time_to_first_token

    chart = time_to_first_token([])
    assert "no serving test in these records" in chart.svg and "time to first token (s)" not in chart.svg
    assert chart.reading.startswith("No serving test in these records")


def test_catalog_ids_match_without_regard_to_case(apron_home_with_facts):
    done = apron("plan", "Qwen/Qwen3-8b", "--gpu", "H100")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Qwen/Qwen3-8B@")
    assert "Qwen/Qwen3-8b is Qwen/Qwen3-8B there (repo ids match without regard to case, as on the Hub)" in done.stdout
    assert "vllm serve Qwen/Qwen3-8B " in done.stdout  # the command names the id as the Hub spells it
