"""The hybrid refusal at the defaults: vLLM's config/compilation.py refuses FULL CUDA-graph capture
when a model with state layers has fewer KV cache blocks than max_num_seqs ("max_num_seqs (N) exceeds
available Mamba cache blocks (M)", 0.29.0-0.32.0). Every hybrid family, on every release that
registers it, at the user's settings (here the defaults: 1,024 sequences on a datacenter GPU): the
plan predicts the block count and, where it falls short, emits --max-num-seqs at or below the block
count at the low end of the KV budget."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apron.engine.facts import load_facts
from apron.hardware import resolve_gpu
from apron.plan.kv.planning import num_blocks_for
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot

# (model, tensor parallel size where the weights fit an H200)
HYBRIDS = (
    ("zai-org/GLM-5.3-Flash", 4),
    ("Qwen/Qwen3.8-Flash-Next", 4),
    ("Qwen/Qwen3.8-27B", 1),
    ("Qwen/Qwen3.6-35B-A3B-FP8", 1),
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 1),
    ("state-spaces/mamba-2.8b-hf", 1),
)
RELEASES = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")


def cases():
    for model, tp in HYBRIDS:
        arch = loaded_snapshot(model).architecture
        for release in RELEASES:
            if load_facts(release).architecture(arch) is not None:
                yield pytest.param(model, tp, release, id=f"{model.split('/')[1]}-{release}")


@pytest.mark.parametrize("model,tp,release", list(cases()))
def test_every_hybrid_gets_its_block_count_and_a_flag_below_it(model, tp, release, apron_home_with_facts):
    plan = plan_checkpoint(
        loaded_snapshot(model),
        resolve_gpu("H200"),
        UserSettings(tensor_parallel_size=tp, language_model_only=True, max_model_len=32768),
        release,
    )
    assert not plan.unknowns, plan.unknowns
    blocks = plan.quantities["num_kv_blocks"]
    assert blocks.label == "predicted" and blocks.value is not None
    if plan.verdict not in ("fits", "tight"):
        return
    seqs = plan.settings.max_num_seqs
    low = plan.quantities["available_kv_bytes"].low
    low_blocks = num_blocks_for(plan.quantities["kv_block_bytes"].value, low)
    assert low_blocks == blocks.low  # the block planner's own count at the low end of the budget
    flags = [f for f in plan.flags if f.startswith("--max-num-seqs")]
    if seqs > min(blocks.value, low_blocks):
        (flag,) = flags
        assert int(flag.split()[1]) <= min(blocks.value, low_blocks)
        assert flag in plan.command
    else:
        assert not flags


def test_the_flag_follows_the_low_end_of_the_budget(apron_home_with_facts):
    """Enough blocks at the central estimate, too few at the low end: the limit is the low end's, and
    the problem says which end falls short."""
    checkpoint, gpu = loaded_snapshot("Qwen/Qwen3.8-27B"), resolve_gpu("H200")
    for step in range(40):
        util = round(0.70 + step * 0.005, 3)
        user = UserSettings(language_model_only=True, gpu_memory_utilization=util, max_model_len=32768)
        plan = plan_checkpoint(checkpoint, gpu, user, "0.32.0")
        blocks = plan.quantities["num_kv_blocks"]
        if blocks.low < plan.settings.max_num_seqs <= blocks.value:
            break
    else:
        pytest.fail("no utilization puts 1,024 sequences between the two ends of the block count")
    assert f"--max-num-seqs {blocks.low}" in plan.flags
    (problem,) = [p for p in plan.problems if p.kind == "max_num_seqs_exceeds_state_blocks"]
    assert f"above the {blocks.low} at its low end" in problem.message
    eager = plan_checkpoint(checkpoint, gpu, replace(user, enforce_eager=True), "0.32.0")
    assert not [f for f in eager.flags if f.startswith("--max-num-seqs")]  # no FULL graphs, no refusal
