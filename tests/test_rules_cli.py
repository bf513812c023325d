"""`apron diagnose` and `apron rules`: data on stdout, --json, bad input exits 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apron.records.documents import PlanRecord
from apron.records.store import RecordStore
from apron.rules import StatusStore
from plan_helpers import a_plan
from rules_text import LOGS


def run(*args: str, home=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if home is not None:
        env["APRON_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, env=env)


def test_diagnose_picks_the_decisive_error_not_the_last_line(apron_home):
    log = LOGS / "d_kv_too_small_mp_1048575.log"
    assert "Engine core initialization failed" in [line for line in log.read_text().splitlines() if "Error" in line][-1]
    result = run("diagnose", str(log), home=apron_home)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    first = result.stdout.splitlines()[0]
    assert first.startswith("decisive error   line 73 (EngineCore, printed 2x): ValueError: To serve at least one")
    assert "kv_cache_too_small" in result.stdout
    assert "Engine core initialization failed" not in result.stdout
    assert "--max-model-len 1792 (was 2048)" in result.stdout
    assert "untested on vllm 0.32.0" in result.stdout


def test_diagnose_json(apron_home):
    result = run("diagnose", str(LOGS / "c_auto_kv_util_004_refused.log"), "--json", home=apron_home)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "apron.diagnosis/1"
    assert document["fingerprint"]["family"] == "cpu_kv_allocation"
    assert document["fingerprint"]["fields"]["kv_gib"] == -0.1
    rule = document["rules"][0]
    assert rule["rule"] == "raise_gpu_memory_utilization"
    assert rule["changes"] == ["--gpu-memory-utilization 0.05 (was 0.04)"]
    assert rule["corrected_flags"] == [  # every setting the log printed, the corrected one changed
        "--max-model-len 512",
        "--gpu-memory-utilization 0.05",
        "--dtype bfloat16",
        "--enforce-eager",
        "--served-model-name tiny",
        "--distributed-executor-backend uni",
    ]
    assert rule["status"]["status"] == "untested"
    assert document["could_have_known"]["basis"] == "no_plan"
    assert document["log_id"].startswith("sha256:")


def test_diagnose_a_healthy_log(apron_home):
    result = run("diagnose", str(LOGS / "d_kv_exact_fit_deep_67371008.log"), home=apron_home)
    assert result.returncode == 0
    assert result.stdout.startswith("no decisive error")
    as_json = json.loads(run("diagnose", str(LOGS / "a_healthy_fast_uni.log"), "--json", home=apron_home).stdout)
    assert as_json["fingerprint"] is None and as_json["rules"] == []


def test_diagnose_with_a_plan_file_and_a_record_id(apron_home, tmp_path):
    # the plan of the settings the boot ran (--kv-cache-memory-bytes as the log's non-default args say)
    plan = a_plan(
        settings={"max_model_len": 32768, "kv_cache_memory_bytes": 33554432},
        flags=("--max-model-len 32768", "--kv-cache-memory-bytes 33554432"),
        quantities={"available_kv_bytes": 2**30},
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan.to_json()))
    log = str(LOGS / "d_kv_too_small_deep_33554432.log")
    result = run("diagnose", log, "--plan", str(plan_file), home=apron_home)
    assert result.returncode == 0, result.stderr
    assert "could have known plan said fits; engine refused: KV cache too small by 0.03 GiB" in result.stdout
    assert "calculator miss" in result.stdout
    plan_id = RecordStore(apron_home / "data" / "records").put(PlanRecord(plan))
    by_id = run("diagnose", log, "--plan", plan_id[:4], "--json", home=apron_home)  # 4 characters, as records show
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["could_have_known"]["basis"] == "miss"


def test_diagnose_knows_when_the_boot_overrode_the_plan(apron_home, tmp_path):
    """The boot added --kv-cache-memory-bytes the plan never had (--extra-args): the engine's refusal is
    the override's doing, not the calculator's."""
    plan = a_plan(settings={"max_model_len": 32768}, flags=("--max-model-len 32768",))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan.to_json()))
    result = run("diagnose", str(LOGS / "d_kv_too_small_deep_33554432.log"), "--plan", str(plan_file), home=apron_home)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("could have known"))
    assert line.endswith(
        "the boot's settings differed from the plan: --kv-cache-memory-bytes 33554432 (the plan: none) "
        "- not a calculator miss"
    )
    other_engine = a_plan(settings={"max_model_len": 32768}, flags=("--max-model-len 32768",), engine_version="0.33.0")
    plan_file.write_text(json.dumps(other_engine.to_json()))
    result = run(
        "diagnose", str(LOGS / "d_kv_too_small_deep_33554432.log"), "--plan", str(plan_file), "--json", home=apron_home
    )
    known = json.loads(result.stdout)["could_have_known"]
    assert known["basis"] == "settings_differ" and "vLLM 0.32.0 (the plan: 0.33.0)" in known["line"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["diagnose", "/no/such.log"], "log file /no/such.log does not exist"),
        (["diagnose", str(LOGS / "g_gemma2_float16.log"), "--plan", "abc"], "nor the id of one (4+ hex"),
        (["diagnose", str(LOGS / "g_gemma2_float16.log"), "--plan", "abcdef0123"], "no record abcdef0123"),
        (["diagnose", str(LOGS / "g_gemma2_float16.log"), "--engine", "trt==1"], "must look like vllm==0.33.0"),
        (["diagnose", str(LOGS / "g_gemma2_float16.log"), "--plan", str(LOGS / "index.json")], "apron.plan/1"),
        (["rules", "show", "no_such_rule"], "no rule 'no_such_rule'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(apron_home, args, message):
    result = run(*args, home=apron_home)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr


def test_rules_list_and_show(apron_home):
    StatusStore(apron_home / "data" / "records" / "rules").promote("dtype_bfloat16", "0.32.0", "rec-a", "rec-b")
    listing = run("rules", "list", home=apron_home)
    assert listing.returncode == 0, listing.stderr
    assert any(line.startswith("dtype_bfloat16") and "proven on 0.32.0" in line for line in listing.stdout.splitlines())
    on_other = run("rules", "list", "--engine", "vllm==0.33.0", home=apron_home).stdout
    assert any(line.startswith("dtype_bfloat16") and "untested on 0.33.0" in line for line in on_other.splitlines())
    rows = json.loads(run("rules", "list", "--json", home=apron_home).stdout)
    assert {r["rule"] for r in rows} >= {"kv_cache_max_model_len", "enforce_eager", "nccl_disable_nvls"}
    show = run("rules", "show", "dtype_bfloat16", home=apron_home)
    assert any(
        line.startswith("vllm 0.32.0") and line.endswith("proven: failed rec-a -> healthy rec-b")
        for line in show.stdout.splitlines()
    )
    shown = json.loads(run("rules", "show", "dtype_bfloat16", "--json", home=apron_home).stdout)
    assert shown["statuses"]["0.32.0"]["proofs"][0]["healthy_id"] == "rec-b"
    assert shown["families"] == ["float16_unsupported"]


def test_diagnose_shows_a_proven_status(apron_home):
    StatusStore(apron_home / "data" / "records" / "rules").promote("dtype_bfloat16", "0.32.0", "rec-a", "rec-b")
    result = run("diagnose", str(LOGS / "g_gemma2_float16.log"), home=apron_home)
    assert "proven on vllm 0.32.0: failed rec-a -> healthy rec-b" in result.stdout


def test_diagnose_carries_every_setting_the_log_printed(apron_home):
    """The log's non-default args hold --kv-cache-memory-bytes 1048575: `log parse` reads it, and so do
    "ran with" and the corrected flags (a user who copies them keeps the KV size they chose)."""
    log = LOGS / "d_kv_too_small_fast_1048575.log"
    parsed = json.loads(run("log", "parse", str(log), "--json", home=apron_home).stdout)
    assert parsed["settings"]["kv_cache_memory_bytes"] == 1048575
    document = json.loads(run("diagnose", str(log), "--json", home=apron_home).stdout)
    assert "--kv-cache-memory-bytes 1048575" in document["settings"]["flags"]
    for rule in document["rules"]:
        if rule["corrected_flags"] is not None:
            assert "--kv-cache-memory-bytes 1048575" in rule["corrected_flags"] or any(
                "--kv-cache-memory-bytes" in change for change in rule["changes"]
            ), rule
    text = run("diagnose", str(log), home=apron_home).stdout
    ran = next(line for line in text.splitlines() if line.strip().startswith("ran with"))
    assert "--kv-cache-memory-bytes 1048575" in ran and "--served-model-name tiny" in ran
