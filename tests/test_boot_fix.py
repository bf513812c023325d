"""`apron boot --fix` proven end to end on the real vLLM CPU engine.

A plan the engine refuses (a KV cache too small for max_model_len), a real boot that fails with the
engine's own message, the matching rule (max_model_len down to the engine's estimate), a second real
boot that is healthy and answers, and the rule proven on vLLM 0.32.0 with both record ids.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apron.records.documents import BootRecord, FixRecord
from apron.records.store import RecordStore

# On the CPU build the KV cache size is a flag: 32 MiB holds 16,256 tokens of the deep tiny model
# (2,048 bytes a token, 128-token blocks, one kept back), not 32,768 (lab measurement, tests/fixtures/logs).
KV_BYTES = 32 * 2**20
RULE = "kv_cache_max_model_len"


@pytest.mark.engine
def test_boot_fix_proves_a_rule_with_two_real_boots(tiny_models, tmp_path, apron_home, boot_pool):
    from engine_env import engine_lock, shared_vllm_cache, vllm_venv

    model = tiny_models("tiny-deep", "--deep")
    records = tmp_path / "records"
    with engine_lock():
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "apron.cli",
                "boot",
                str(model),
                "--gpu",
                "L4",
                "--engine",
                "vllm==0.32.0",
                "--max-model-len",
                "32768",
                "--on",
                "local",
                "--venv",
                str(vllm_venv()),
                "--profile",
                "cpu",
                "--extra-args",
                f"--kv-cache-memory-bytes {KV_BYTES}",
                "--env",
                f"VLLM_CACHE_ROOT={shared_vllm_cache()}",
                "--suite",
                "none",
                "--no-serve-test",
                "--fix",
                "--records",
                str(records),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
    boot_pool.add(RecordStore(records))  # for the report tests
    assert result.returncode == 0, result.stderr[-4000:]
    healthy = json.loads(result.stdout)
    assert healthy["outcome"] == "healthy" and healthy["after_healthy"]["verdicts"]["responded"]
    assert "--max-model-len 16256" in healthy["command"]["shell"]
    assert f"rule {RULE} proven on vllm 0.32.0" in result.stderr

    store = RecordStore(records)
    fixes = [r.document for r in store.find(FixRecord, status="proven")]
    assert len(fixes) == 1
    fix = fixes[0]
    failed = store.get_as(fix.failed_boot, BootRecord).document
    assert failed.outcome == "failed" and failed.fault is not None and failed.fault.kind == "model"
    assert "To serve at least one request with the model's max seq len (32768)" in failed.fault.evidence
    assert fix.corrected_boot == healthy["id"] and fix.corrected_flags == ("--max-model-len 16256",)
    assert fix.family == "kv_cache_too_small" and fix.could_have_known

    shown = subprocess.run(
        [sys.executable, "-m", "apron.cli", "rules", "show", RULE, "--records", str(records), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    status = json.loads(shown.stdout)
    proven = status["statuses"]["0.32.0"]
    assert proven["status"] == "proven"
    assert proven["proofs"][0] == {**proven["proofs"][0], "failed_id": fix.failed_boot, "healthy_id": healthy["id"]}
