"""A plan lists refusals in the order the release raises them (apron.plan.refusals): the first is
what `vllm serve` prints; the others come only after fixing it, and say so."""

from __future__ import annotations

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.hardware.gpus import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.quantity import Problem
from apron.plan.refusals import AFTER_FIRST, in_start_up_order
from apron.plan.settings import UserSettings
from conftest import snapshot_path


def _plan(name: str, gpu: str, **settings):
    return plan_checkpoint(load_snapshot(snapshot_path(name)), resolve_gpu(gpu), UserSettings(**settings))


def test_a_max_model_len_above_the_model_s_comes_before_the_kv_check(apron_home_with_facts):
    """config/model.py get_and_verify_max_len refuses before any memory is touched: the KV check that
    would follow is listed only as what comes after fixing it."""
    plan = _plan("Qwen/Qwen3-32B", "H100", max_model_len=1_000_000)
    kinds = [p.kind for p in plan.problems]
    assert kinds[:3] == ["max_model_len", "kv_cache_too_small", "fix"]
    first, kv, fix = plan.problems[:3]
    assert first.message.startswith("User-specified max_model_len (1000000) is greater than the derived")
    assert kv.message.startswith(f"{AFTER_FIRST} (max_model_len): To serve at least one request")
    assert not fix.message.startswith(AFTER_FIRST) and plan.verdict == "does_not_fit"


def test_the_config_s_refusals_come_before_the_quantization_s_and_the_worker_s(apron_home_with_facts):
    """ModelConfig (max_model_len) before VllmConfig (the quantization's capability) before the
    worker's init_device (bfloat16 below compute capability 8.0) before the KV check."""
    plan = _plan("Qwen/Qwen3-0.6B-FP8", "V100", max_model_len=1_000_000, dtype="bfloat16")
    refusals = [p for p in plan.problems if p.kind != "fix"]
    assert [p.kind for p in refusals] == ["max_model_len", "quantization_capability", "dtype", "kv_cache_too_small"]
    assert all(p.message.startswith(f"{AFTER_FIRST} (max_model_len): ") for p in refusals[1:])
    assert plan.verdict == "unsupported"  # the order changes what is said first, not the verdict


def test_one_refusal_is_said_as_the_engine_says_it(apron_home_with_facts):
    alone = _plan("Qwen/Qwen3-32B", "H100", gpu_memory_utilization=0.3)
    assert alone.verdict == "does_not_fit" and alone.problems
    assert not any(p.message.startswith(AFTER_FIRST) for p in alone.problems)


def p(kind: str, message: str = "m") -> Problem:
    return Problem(kind, message, "proven_constraint")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "given, expected",
    [
        # the quantization's capability (VllmConfig) is checked after the max length (ModelConfig)
        (["quantization_capability", "max_model_len"], ["max_model_len", "quantization_capability"]),
        # a model type refusing float16 is ModelConfig's dtype check, before the max length
        (["max_model_len", "dtype:The model type 'gemma2' does not support float16."], ["dtype", "max_model_len"]),
        # bfloat16 below cc 8.0 is the worker's, after VllmConfig's checks
        (["dtype:Bfloat16 is only supported on GPUs", "scheduler"], ["scheduler", "dtype"]),
        (
            ["kv_cache_too_small", "fix", "tensor_parallel_heads"],
            ["tensor_parallel_heads", "kv_cache_too_small", "fix"],
        ),
        # notes before any refusal stay first, the others last; one stage keeps the plan's order
        (
            ["engine_changed", "block_size", "tool_parser_missing", "kv_cache_dtype", "architecture_not_supported"],
            ["engine_changed", "architecture_not_supported", "block_size", "kv_cache_dtype", "tool_parser_missing"],
        ),
    ],
)
def test_start_up_order(given, expected):
    problems = [p(*item.split(":", 1)) for item in given]
    ordered = in_start_up_order(problems)
    assert [x.kind for x in ordered] == [e.split(":")[0] for e in expected]
    refusals = [x for x in ordered if x.kind not in ("fix", "engine_changed", "tool_parser_missing")]
    assert not refusals[0].message.startswith(AFTER_FIRST)
    assert all(x.message.startswith(f"{AFTER_FIRST} ({refusals[0].kind}): ") for x in refusals[1:])


def test_a_plan_with_one_refusal_is_unchanged():
    problems = [p("engine_changed"), p("kv_cache_too_small"), p("fix"), p("tight")]
    assert in_start_up_order(problems) == problems
