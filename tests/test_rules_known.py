"""Could it have been known? The plan's preflight against the engine's refusal."""

from __future__ import annotations

from apron.plan.result import Plan
from apron.rules import could_have_known, diagnose, fingerprint, settings_from_plan
from apron.rules.status import StatusStore
from plan_helpers import a_plan
from rules_text import log_text, training_failures

KV_TEXT = next(b["failure"]["last_error"] for b in training_failures() if "To serve" in b["failure"]["last_error"])


def plan(verdict="fits", problems=(), max_model_len=40960, flags=("--max-model-len 40960",)) -> Plan:
    return a_plan(
        verdict=verdict,
        problems=tuple(problems),
        settings={"max_model_len": max_model_len},
        quantities={"available_kv_bytes": int(5.9 * 2**30)},
        flags=tuple(flags),
    )


def test_a_miss_says_by_how_much():
    report = could_have_known(plan(), fingerprint(KV_TEXT))
    assert report.flagged is False and report.basis == "miss"
    assert report.line == (
        "plan said fits; engine refused: KV cache too small by 1.14 GiB (needs 5.62 GiB for 40960 "
        "tokens, engine had 4.48 GiB; plan predicted 5.90 GiB available) — calculator miss"
    )


def test_a_predicted_does_not_fit_was_known():
    problem = ("kv_cache_too_small", "To serve at least one request ...", "predicted")
    report = could_have_known(plan("does_not_fit", [problem]), fingerprint(KV_TEXT))
    assert (report.flagged, report.basis) == (True, "does_not_fit")


def test_a_proven_constraint_was_known():
    problem = ("dtype", "The model type 'gemma2' does not support float16.", "proven_constraint")
    report = could_have_known(plan("does_not_fit", [problem]), fingerprint(log_text("g_gemma2_float16")))
    assert (report.flagged, report.basis) == (True, "proven_constraint")
    assert report.line.startswith("plan flagged it: proven constraint (dtype)")


def test_a_constraint_the_plan_missed_is_a_preflight_miss():
    report = could_have_known(plan(), fingerprint(log_text("g_gemma2_float16")))
    assert report.flagged is False and report.line.endswith("preflight miss")


def test_the_boot_ran_other_settings():
    report = could_have_known(plan(max_model_len=32768), fingerprint(KV_TEXT))
    assert report.line.endswith("(the boot ran max_model_len 40960, the plan 32768)")


def test_host_and_harness_faults_are_no_plans_question():
    for name in ("g_truncated_safetensors", "h_default_kv_no_setting"):
        report = could_have_known(plan(), fingerprint(log_text(name)))
        assert report.flagged is None and report.basis == "not_a_plan_question"
    assert could_have_known(None, fingerprint(KV_TEXT)).basis == "no_plan"


def test_an_advisory_flag_the_boot_skipped():
    problem = ("max_num_seqs_exceeds_state_blocks", "...", "predicted")
    text = (
        "(EngineCore pid=1) ERROR 12-01 10:00:00 [core.py:1] ValueError: max_num_seqs (1024) exceeds available "
        "Mamba cache blocks (418). Each decode sequence requires one Mamba cache block, so CUDA graph capture "
        "cannot proceed. Please lower max_num_seqs to at most 418 or increase gpu_memory_utilization."
    )
    skipped = could_have_known(plan(problems=[problem], flags=["--max-num-seqs 400"]), fingerprint(text))
    assert (skipped.flagged, skipped.basis) == (True, "advisory")
    ran_it = could_have_known(plan(problems=[problem], flags=["--max-num-seqs 1024"]), fingerprint(text))
    assert ran_it.basis == "miss" and "exceeds 418 state blocks" in ran_it.line


def test_with_a_real_plan(apron_home_with_facts):
    """Qwen3-8B at 40960 tokens on an RTX 4090 (vLLM 0.29.0): the training boot refused, and the
    plan had predicted does_not_fit."""
    from apron.checkpoint.snapshot import load_snapshot
    from apron.hardware import resolve_gpu
    from apron.plan.planner import plan_checkpoint
    from apron.plan.settings import UserSettings
    from conftest import snapshot_path

    checkpoint, gpu = load_snapshot(snapshot_path("Qwen/Qwen3-8B")), resolve_gpu("4090")
    failed_plan = plan_checkpoint(checkpoint, gpu, UserSettings(max_model_len=40960), "0.29.0")
    diagnosis = diagnose(KV_TEXT, plan=failed_plan, store=StatusStore(apron_home_with_facts / "rules"))
    assert diagnosis.known.flagged is True
    assert settings_from_plan(failed_plan) == UserSettings(max_model_len=40960)
    assert diagnosis.applicable[0].corrected == UserSettings(max_model_len=32640)


def test_the_training_boots_hold_the_corrected_boot():
    """The rule's correction of the refused Qwen3-8B boot (40960 -> 32640 tokens) is the flag of a
    healthy boot of the same model, GPU and release in the training records: the proof pair."""
    failed = next(b for b in training_failures() if "To serve" in b["failure"]["last_error"])
    diagnosis = diagnose(KV_TEXT, store=StatusStore("/nonexistent"))
    assert diagnosis.applicable[0].match.fields["max_model_len"] == 32640
    import json

    from rules_text import TRAINING

    healthy = [
        b
        for b in json.loads(TRAINING.read_text())["boots"]
        if b["boot_outcome"] == "healthy"
        and (b["model_id"], b["gpu"], b["vllm_version"]) == (failed["model_id"], failed["gpu"], failed["vllm_version"])
        and b["serve_flags"].get("max_model_len") == 32640
    ]
    assert healthy and healthy[0]["measured"]["available_kv_cache_gib"] == 4.48
