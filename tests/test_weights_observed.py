"""plan/weights_observed.py: the block-FP8 load residual on cc 9.0, counted from one boot and labelled
observed. Its value is recomputed from the plan and the boots it rests on; where it applies, where it
does not, and the range that lets it be absent."""

from __future__ import annotations

import json
import subprocess

import pytest

from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan import ranges, weights_observed
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import snapshot_path
from engine_env import ROOT, vllm_python
from test_training_boots import BOOTS, plan_for

MIB = 2**20
FP8 = "Qwen/Qwen3-0.6B-FP8"
# Issue 21: the H100 boot of the small block-FP8 model loaded "about 3.9%" more than Apron counted.
ISSUE_MISS = 0.039


def _plan(model: str, gpu: str, release: str = "0.30.0"):
    checkpoint = load_checkpoint(str(snapshot_path(model)))
    return plan_checkpoint(checkpoint, resolve_gpu(gpu), UserSettings(), engine_version=release)


def _line(plan) -> int:
    groups = {g["group"]: g["bytes_per_gpu"] for g in plan.details["weights"]["groups"]}
    return groups.get(weights_observed.LINE, 0)


def _ada_fp8_boot() -> dict:
    (boot,) = [b for b in BOOTS if b["model_id"] == FP8]
    return boot


def test_the_residual_is_the_logged_load_less_the_tensors_as_counted():
    plan = _plan(FP8, "H100")
    weights = plan.quantities["weights_bytes_per_gpu"].value
    tensors = weights - _line(plan)
    logged = _ada_fp8_boot()["measured"]["weights_bytes_per_gpu"]  # 0.74 GiB, which the H100 boot matches
    assert _line(plan) == weights_observed.HOPPER_BLOCK_FP8_RESIDUAL_BYTES == logged - tensors
    # what the issue saw: the boot about 3.9% above the tensors, to the log's 0.01 GiB
    assert logged / tensors - 1 == pytest.approx(ISSUE_MISS, abs=0.0075)


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_counted_for_block_fp8_on_hopper_with_its_label(gpu):
    plan = _plan(FP8, gpu)
    quantity = plan.quantities["weights_bytes_per_gpu"]
    assert _line(plan) == weights_observed.HOPPER_BLOCK_FP8_RESIDUAL_BYTES
    assert "observed, not derived" in quantity.basis and "would settle it" in quantity.basis
    # the range lets it be absent below and as large as the one boot allows above
    assert quantity.low <= quantity.value - _line(plan)
    assert quantity.high >= quantity.value + ranges.RESOLUTION_BYTES


@pytest.mark.parametrize(
    ("model", "gpu", "release"),
    [
        (FP8, "RTX 4090", "0.29.0"),  # Marlin below cc 9.0: derived (plan/weights_repack.py)
        (FP8, "A100", "0.30.0"),
        (FP8, "B200", "0.30.0"),  # no boot read on 10.x
        ("Qwen/Qwen3-0.6B", "H100", "0.30.0"),  # not block FP8
        ("Qwen/Qwen3-8B-AWQ", "H100", "0.30.0"),
    ],
)
def test_not_counted_elsewhere(model, gpu, release):
    plan = _plan(model, gpu, release)
    assert _line(plan) == 0
    assert "observed, not derived" not in plan.quantities["weights_bytes_per_gpu"].basis


def test_not_a_hopper_cost_of_every_model():
    """The module's claim: the bf16 H100 training boot matches its tensors far closer than the residual."""
    (boot,) = [b for b in BOOTS if b["model_id"] == "Qwen/Qwen3-32B" and "H100" in b["gpu"]]
    plan = plan_for(boot)
    miss = boot["measured"]["weights_bytes_per_gpu"] - plan.quantities["weights_bytes_per_gpu"].value
    assert _line(plan) == 0
    assert abs(miss) < weights_observed.HOPPER_BLOCK_FP8_RESIDUAL_BYTES / 4


def test_the_predicate_reads_method_block_and_capability():
    f = weights_observed.hopper_block_fp8_residual
    assert f("fp8", 128, (9, 0)) == weights_observed.HOPPER_BLOCK_FP8_RESIDUAL_BYTES
    assert f("fp8", 0, (9, 0)) == 0  # per-tensor FP8: another kernel path
    assert f("fp8", 128, (8, 9)) == f("fp8", 128, (10, 0)) == f("awq", 128, (9, 0)) == 0


def test_the_load_time_requantisation_keeps_no_tensor():
    """scripts/inductor_keeps.py in vLLM 0.30.0's CPU build: its torch.compile'd per_block_cast_to_fp8,
    run over the model's linear shapes as load_model does on cc 9.0, compiles and leaves nothing alive
    (docs/memory.md section 5: one cause of the residual ruled out)."""
    done = subprocess.run(
        [vllm_python("0.30.0"), str(ROOT / "scripts" / "inductor_keeps.py")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["graphs_compiled"] >= 1 and report["calls"] == 8
    assert report["tensors_alive"] == 0 and report["real_tensor_bytes_grown"] == 0
