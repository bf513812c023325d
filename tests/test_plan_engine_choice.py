"""The plan names its engine release: the newest that registers the model, or the pinned one with
the engine's own refusal."""

from __future__ import annotations

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import known_versions
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import snapshot_document

# NanbeigeForCausalLM is registered from vLLM 0.30.0 on (a Llama-style decoder).
NEW_ARCH = "NanbeigeForCausalLM"


def llama_as(arch: str):
    doc = snapshot_document("meta-llama/Llama-3.1-8B-Instruct")
    doc["files"]["config.json"]["architectures"] = [arch]
    return load_snapshot("renamed.json", document=doc)


def test_architecture_new_in_030_picks_030_or_newer(apron_home_with_facts):
    plan = plan_checkpoint(llama_as(NEW_ARCH), resolve_gpu("H100"), UserSettings(max_model_len=8192))
    assert tuple(map(int, plan.engine_version.split("."))) >= (0, 30, 0)
    assert plan.verdict == "fits"
    assert any(NEW_ARCH in note and plan.engine_version in note for note in plan.notes)


def test_pinned_to_029_reports_the_engines_refusal(apron_home_with_facts):
    plan = plan_checkpoint(
        llama_as(NEW_ARCH), resolve_gpu("H100"), UserSettings(max_model_len=8192), engine_version="0.29.0"
    )
    assert plan.engine_version == "0.29.0"
    assert plan.verdict == "unsupported"
    problem = next(p for p in plan.problems if p.kind == "architecture_not_supported")
    assert problem.label == "proven_constraint"
    assert problem.message.startswith(f"Model architectures ['{NEW_ARCH}'] are not supported for now.")
    # cut after a whole name, and the release that first registers it
    assert ", ...]) (vLLM 0.30.0 first registers it: plan with --engine vllm==0.30.0)" in problem.message


def test_previously_supported_architecture_quotes_the_last_version(apron_home_with_facts):
    plan = plan_checkpoint(llama_as("MiniMaxText01ForCausalLM"), resolve_gpu("H100"), UserSettings(max_model_len=8192))
    problem = next(p for p in plan.problems if p.kind == "architecture_not_supported")
    assert "was supported in vLLM until v" in problem.message
    assert problem.message.endswith("(vLLM 0.23.0 was the last release to register it)")


def test_quantization_below_minimum_capability_is_refused(apron_home_with_facts):
    # FP8 needs compute capability 7.5 in these releases; a V100 (7.0) is below it.
    plan = plan_checkpoint(
        load_snapshot("q.json", document=snapshot_document("Qwen/Qwen3-0.6B-FP8")),
        resolve_gpu("V100"),
        UserSettings(max_model_len=4096),
    )
    problem = next(p for p in plan.problems if p.kind == "quantization_capability")
    assert "Minimum capability: 75. Current capability: 70." in problem.message
    assert plan.verdict == "unsupported"


def test_every_shipped_release_is_known():
    assert {"0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"} <= set(known_versions())
