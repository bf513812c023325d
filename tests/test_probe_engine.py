"""`apron probe` on the real vLLM CPU engine (one boot): the tiny Gemma2 planned for an L4 on 0.32.0,
booted with the allocator hook, and its probe record read back through `apron records show`.

The CPU engine makes a profiling pass only when it compiles (its worker's warm-up run,
v1/worker/cpu_worker.py determine_available_memory -> cpu_model_runner.py warming_up_model ->
profile_run), so the plan is made without --enforce-eager. The boot runs torch.compile with dynamo's
eager backend (`--compilation-config {"mode": 2, "backend": "eager"}`, what vLLM's own CPU CI uses):
the same profile_run and the same operators, without inductor's C++ build (about a minute on two
cores). The record must name the embedding, the MLP and the attention buffers with their shapes, and
its peak must be the profiler's own count.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from apron.records.documents import BootRecord, ProbeRecord
from apron.records.store import RecordStore

# The tiny Gemma2 (scripts/make_tiny_model.py --arch gemma2) at the L4 plan's batch: T tokens, R rows.
T, H, INTER, R = 2048, 128, 256, 128
QKV = (2 + 1 + 1) * 64  # 2 query heads, 1 KV head, head size 64
COMPILE_WITH_DYNAMO_EAGER = "--compilation-config " + shlex.quote('{"mode": 2, "backend": "eager"}')


def run_cli(*args: str, home: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "APRON_HOME": str(home)}  # never the user's cache or records
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def probed(tiny_models, tmp_path_factory, boot_pool) -> tuple[dict, Path, subprocess.CompletedProcess, Path]:
    from engine_env import engine_lock, shared_vllm_cache, vllm_venv

    model = tiny_models("tiny-gemma2", "--arch", "gemma2")
    tmp = tmp_path_factory.mktemp("probe")
    plan_args = ("--gpu", "L4", "--engine", "vllm==0.32.0", "--max-model-len", "512", "--dtype", "bfloat16")
    planned = run_cli("plan", str(model), *plan_args, "--max-num-seqs", str(R), "--json", home=tmp / "home")
    assert planned.returncode == 0, planned.stderr
    (tmp / "plan.json").write_text(planned.stdout)
    records = tmp / "records"
    with engine_lock():
        result = run_cli(
            "probe",
            str(tmp / "plan.json"),
            "--on",
            "local",
            "--venv",
            str(vllm_venv()),
            "--weights",
            str(model),
            "--profile",
            "cpu",
            "--extra-args",
            COMPILE_WITH_DYNAMO_EAGER,
            "--env",
            f"VLLM_CACHE_ROOT={shared_vllm_cache()}",
            "--suite",
            "none",
            "--no-serve-test",
            "--records",
            str(records),
            "--json",
            home=tmp / "home",
        )
    boot_pool.add(RecordStore(records))  # the report tests list it
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout), records, result, tmp / "home"


@pytest.mark.engine
def test_probe_names_the_buffers_of_the_real_profiling_run(probed, tiny_models):
    document, records, result, _ = probed
    store = RecordStore(records)
    probe = store.get_as(document["id"], ProbeRecord).document
    boot = store.get_as(probe.boot_id, BootRecord).document
    assert boot.outcome == "healthy" and probe.plan_id == boot.plan_id
    assert probe.status == "recorded" and probe.platform == "cpu", probe.error
    assert probe.function == "vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_run"  # from the facts
    # The record's peak is what the profiler counted, to the byte, and it is the largest part's peak.
    assert probe.peak_bytes == probe.allocator_peak_bytes and probe.peak_bytes
    assert probe.peak_bytes == max(p.peak_bytes for p in probe.phases)
    phases = {p.name: p for p in probe.phases}
    assert {"_dummy_run", "_dummy_sampler_run"} <= set(phases)
    forward = phases["_dummy_run"]
    assert forward.moment == "forward pass"
    named = {b.buffer: b.shape for b in forward.blocks if b.buffer}
    # the MLP: the plan's buffers, right, with the shapes the profiler saw
    assert named["MLP gate_up output"] == (T, 2 * INTER) and named["MLP activation output"] == (T, INTER)
    assert {b.name: b.status for b in forward.predicted}["MLP gate_up output"] == "right"
    made = forward.allocated
    # the embedding: made by aten::embedding, [T, H]
    assert any(b.op == "aten::embedding" and b.shape == (T, H) for b in made)
    # attention: the QKV projection split into heads, and the output the attention op writes
    assert any(b.shape == (T, QKV) and "aten::split_with_sizes" in b.used_by for b in made)
    assert any(b.shape == (T, 2 * 64) and "vllm::unified_attention_with_output" in b.used_by for b in made)
    # the sampler part: the plan's held buffers are there; the CPU sampler's sort is what it adds
    sampler = phases["_dummy_sampler_run"]
    statuses = {b.name: b.status for b in sampler.predicted}
    assert statuses["hidden states of the dummy forward"] == "right"
    assert statuses["sampled rows' hidden states"] == "right"
    vocab = json.loads((tiny_models("tiny-gemma2") / "config.json").read_text())[
        "vocab_size"
    ]  # the tiny tokenizer's size
    assert any(b.buffer is None and b.op == "aten::sort" and b.shape == (R, vocab) for b in sampler.blocks)
    # the hook rode in the engine's environment, as the boot record shows
    assert boot.command is not None and "/probe" in boot.command["env"]["PYTHONPATH"]
    assert "probe" in result.stderr and boot.outcome in result.stderr


@pytest.mark.engine
def test_records_show_renders_the_probe_table(probed):
    document, records, _, home = probed
    shown = run_cli("records", "show", document["id"][:12], "--records", str(records), home=home)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "_dummy_sampler_run: the peak of the run" in text and "_dummy_run: the peak of this part" in text
    assert "MLP gate_up output" in text and "unmatched" in text and "the profiler's own counter" in text
    from test_probe import first_table_sizes

    sizes = first_table_sizes(text)
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == document["peak_bytes"]
    listed = run_cli("records", "list", "--kind", "probe", "--records", str(records), "--json", home=home)
    assert [r["id"] for r in json.loads(listed.stdout)] == [document["id"]]
