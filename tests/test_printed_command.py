"""Issue 22 section 3: the command a plan prints is the user's command. A plan that does not fit prints
the command as given and, beside it, the command with the first fix of its problems that fits, each
saying which it is (`fixed_command` in the JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from apron.checkpoint import load_checkpoint
from apron.checkpoint.example import TinySpec, write_tiny_model
from apron.hardware import resolve_gpu
from apron.hardware.gpus import cpu_device
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from apron.report.card import render_card
from conftest import snapshot_path


def apron(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=120)


def test_a_plan_that_does_not_fit_prints_both_commands(tmp_path: Path, apron_home_with_facts):
    """4 MiB of KV cache holds 1,920 tokens of the tiny Llama: the fix line names --max-model-len 1920."""
    folder = write_tiny_model(tmp_path / "llama", TinySpec(family="llama")).folder
    user = UserSettings(kv_cache_memory_bytes=4 * 2**20, enforce_eager=True)
    gpu = cpu_device(20 * 2**30, flags=frozenset())
    plan = plan_checkpoint(load_checkpoint(str(folder)), gpu, user, "0.32.0")
    assert plan.verdict == "does_not_fit" and plan.fixed is not None
    assert plan.fixed.flags == ("--max-model-len 1920",)
    assert plan.command == f"vllm serve {folder} --kv-cache-memory-bytes 4194304 --enforce-eager"
    assert (
        plan.fixed.command
        == f"vllm serve {folder} --max-model-len 1920 --kv-cache-memory-bytes 4194304 --enforce-eager"
    )
    card = render_card(plan)
    assert card.endswith(
        "command as given (does not fit):\n"
        f"  {plan.command}\n"
        "fixed command (with --max-model-len 1920, the fix above, which fits):\n"
        f"  {plan.fixed.command}"
    )
    fixed = plan_checkpoint(load_checkpoint(str(folder)), gpu, UserSettings(**{**vars(user), "max_model_len": 1920}))
    assert fixed.verdict == "fits" and fixed.command == plan.fixed.command


def test_the_json_carries_the_fixed_command(apron_home_with_facts):
    done = apron("plan", "Qwen/Qwen3-32B", "--gpu", "4090", "--json")
    document = json.loads(done.stdout)
    assert done.returncode == 1 and document["verdict"] == "does_not_fit"
    assert document["fixed_command"]["flags"] == ["--tp 4"]
    assert "--tensor-parallel-size 4" in document["fixed_command"]["command"]
    assert "--tensor-parallel-size" not in document["command"]  # the command as given stays as given


def test_a_plan_that_fits_or_has_no_fitting_fix_prints_one_command(apron_home_with_facts):
    fits = plan_checkpoint(load_checkpoint("Qwen/Qwen3-8B"), resolve_gpu("H100"), UserSettings())
    assert fits.verdict == "fits" and fits.fixed is None and fits.to_json()["fixed_command"] is None
    assert render_card(fits).endswith(f"command:\n  {fits.command}")
    # GLM-5.3's weights exceed 8 x 24 GiB: no fix line, so no fixed command, and the one command
    glm = load_checkpoint(str(snapshot_path("zai-org/GLM-5.3")))
    huge = plan_checkpoint(glm, resolve_gpu("4090"), UserSettings())
    assert huge.verdict == "does_not_fit" and not huge.has_problem("fix") and huge.fixed is None
    assert render_card(huge).endswith(f"command:\n  {huge.command}")
