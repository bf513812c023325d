"""Every correction rule's match and correction, on real error text.

Template texts are rendered from the template each named family keeps (the engine's own text as of
vLLM 0.29-0.33, copied from the engine facts), so these tests run without the facts files.
"""

from __future__ import annotations

import logging
import types
from dataclasses import replace
from pathlib import Path

import pytest

from apron.measure.logparse import parse_log
from apron.plan.result import Plan
from apron.plan.settings import UserSettings
from apron.rules import all_rules, diagnose, families, fingerprint, match_rules, settings_from_args
from apron.rules.registry import RuleFailed, rule_from_module, run_rules
from apron.rules.status import StatusStore
from plan_helpers import a_plan
from rules_text import log_text, render, training_failures
from test_rules_fingerprint import GRAPH_CAPTURE, NCCL, OOM_IN_PROFILING


def rendered(family: str, values: dict, index: int = 0) -> str:
    """`Exception: message` of a named family's template, as the engine core's logger prints it."""
    exception, template = next(f for f in families.NAMED if f.name == family).fallback_templates[index]
    return f"(EngineCore_DP0 pid=9) ERROR 12-01 10:00:00 [core.py:1] {exception}: {render(template, values)}\n"


def only(text: str, rule_id: str, plan: Plan | None = None) -> dict | None:
    """The fields `rule_id` matches with on this text (and checks the fingerprint found a family)."""
    found = fingerprint(text)
    assert found is not None
    matches = {m.rule_id: m for m in match_rules(found, text, plan)}
    return matches[rule_id].fields if rule_id in matches else None


def corrected(text: str, rule_id: str, settings: UserSettings, plan: Plan | None = None) -> UserSettings:
    found = fingerprint(text)
    match = next(m for m in match_rules(found, text, plan) if m.rule_id == rule_id)
    return match.correction(settings)


def ran_with(name: str) -> UserSettings:
    return settings_from_args(parse_log(log_text(name)).settings)


# ------------------------------------------------------------------ memory


def test_kv_cache_max_model_len_takes_the_engines_estimate():
    text = log_text("d_kv_too_small_deep_33554432")
    assert only(text, "kv_cache_max_model_len") == {"max_model_len": 16256, "previous_max_model_len": 32768}
    assert corrected(text, "kv_cache_max_model_len", ran_with("d_kv_too_small_deep_33554432")).max_model_len == 16256


def test_kv_cache_max_model_len_needs_an_estimate():
    text = rendered(
        "kv_cache_too_small",
        {
            "max_model_len": 8192,
            "format_gib(needed_memory)": 1.0,
            "format_gib(available_memory)": 0.0,
            "estimated_msg": "",
        },
    )
    assert only(text, "kv_cache_max_model_len") is None


def test_raise_gpu_memory_utilization_reproduces_the_lab_fix():
    """The CPU engine refused at 0.04 (negative KV share); the rule asks for 0.05, and the lab's boot
    at 0.05 with otherwise the same flags was healthy."""
    failed = log_text("c_auto_kv_util_004_refused")
    assert only(failed, "raise_gpu_memory_utilization") == {
        "gpu_memory_utilization": 0.05,
        "previous_gpu_memory_utilization": 0.04,
    }
    fixed = corrected(failed, "raise_gpu_memory_utilization", ran_with("c_auto_kv_util_004_refused"))
    assert fixed == ran_with("c_auto_kv_util_005")


def test_raise_gpu_memory_utilization_covers_a_logged_deficit():
    text = "(Worker pid=3) INFO 12-01 10:00:00 [gpu_worker.py:1] Available KV cache memory: -1.5 GiB\n" + rendered(
        "no_kv_cache_memory", {}
    )
    plan = a_plan(total_bytes_per_gpu=80 * 2**30, settings={"gpu_memory_utilization": 0.9})
    # 0.9 + 1.5/80 + 0.01 = 0.92875 -> 0.93
    assert only(text, "raise_gpu_memory_utilization", plan)["gpu_memory_utilization"] == 0.93
    assert (
        only(
            rendered("no_kv_cache_memory", {}),
            "raise_gpu_memory_utilization",
            a_plan(settings={"gpu_memory_utilization": 0.9}),
        )["gpu_memory_utilization"]
        == 0.95
    )
    assert (
        only(
            rendered("no_kv_cache_memory", {}),
            "raise_gpu_memory_utilization",
            a_plan(settings={"gpu_memory_utilization": 0.95}),
        )
        is None
    )  # 1.00 is above the 0.98 cap
    assert only(rendered("no_kv_cache_memory", {}), "raise_gpu_memory_utilization") is None  # current unknown


def test_raise_gpu_memory_utilization_from_the_releases_default():
    """No flag, no plan: the fraction the boot ran with is the release's default (engine facts)."""
    banner = "(APIServer pid=1) INFO 12-01 10:00:00 [api_utils.py:1]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0\n"
    assert only(banner + rendered("no_kv_cache_memory", {}), "raise_gpu_memory_utilization") == {
        "gpu_memory_utilization": 0.97,
        "previous_gpu_memory_utilization": 0.92,
    }


def test_raise_gpu_memory_utilization_for_a_kv_refusal_without_estimate():
    text = rendered(
        "kv_cache_too_small",
        {
            "max_model_len": 8192,
            "format_gib(needed_memory)": 1.0,
            "format_gib(available_memory)": 0.2,
            "estimated_msg": "",
        },
    )
    plan = a_plan(total_bytes_per_gpu=24 * 2**30, settings={"gpu_memory_utilization": 0.9})
    assert only(text, "raise_gpu_memory_utilization", plan)["gpu_memory_utilization"] == 0.95  # 0.9+0.8/24+0.01
    with_estimate = log_text("d_kv_too_small_deep_33554432")
    assert only(with_estimate, "raise_gpu_memory_utilization") is None  # lowering max_model_len answers it


def test_lower_gpu_memory_utilization_to_what_is_free():
    text = log_text("h_default_kv_no_setting")  # 9.49 of 10.96 GiB free, 0.92 asked
    assert only(text, "lower_gpu_memory_utilization") == {
        "gpu_memory_utilization": 0.85,
        "previous_gpu_memory_utilization": 0.92,
    }
    gpu = rendered(
        "gpu_startup_free_memory",
        {
            "init_snapshot.device_": "cuda:0",
            "format_gib(init_snapshot.free_memory)": 60.12,
            "format_gib(init_snapshot.total_memory)": 79.19,
            "cache_config.gpu_memory_utilization": 0.92,
            "format_gib(requested_memory)": 72.85,
        },
    )
    assert only(gpu, "lower_gpu_memory_utilization")["gpu_memory_utilization"] == 0.74
    fixed = corrected(gpu, "lower_gpu_memory_utilization", UserSettings())
    assert fixed.gpu_memory_utilization == 0.74


def test_mamba_max_num_seqs_to_the_block_count():
    text = rendered("mamba_blocks_below_max_num_seqs", {"max_num_reqs": 1024, "kv_cache_config.num_blocks": 418})
    assert only(text, "mamba_max_num_seqs") == {"max_num_seqs": 418, "previous_max_num_seqs": 1024}
    assert corrected(text, "mamba_max_num_seqs", UserSettings()).max_num_seqs == 418
    none_fit = rendered("mamba_blocks_below_max_num_seqs", {"max_num_reqs": 256, "kv_cache_config.num_blocks": 0})
    assert only(none_fit, "mamba_max_num_seqs") is None


def test_raise_tensor_parallel_for_oom_while_loading_weights():
    text = next(b["failure"]["last_error"] for b in training_failures() if "CUDA OOM" in b["failure"]["last_error"])
    plan = a_plan(model_shape={"num_attention_heads": 40}, settings={"tensor_parallel_size": 1})
    assert only(text, "raise_tensor_parallel", plan) == {
        "tensor_parallel_size": 2,
        "previous_tensor_parallel_size": 1,
        "num_attention_heads": 40,
    }
    assert corrected(text, "raise_tensor_parallel", UserSettings(), plan).tensor_parallel_size == 2
    plan_tp8 = a_plan(model_shape={"num_attention_heads": 40}, settings={"tensor_parallel_size": 8})
    assert only(text, "raise_tensor_parallel", plan_tp8) is None  # 16, 32, 64 do not divide 40
    assert only(text, "raise_tensor_parallel") is None  # no plan, no heads: no guess
    assert only(OOM_IN_PROFILING, "raise_tensor_parallel", plan) is None  # not while loading weights


def test_raise_tensor_parallel_skips_sizes_the_layout_checks_refuse():
    # phi-4: 40 heads divide by 4 and 8, but its 10 KV heads do not (plan/parallel.py): only 1 and 2 pass.
    text = next(b["failure"]["last_error"] for b in training_failures() if "CUDA OOM" in b["failure"]["last_error"])
    at1 = a_plan(model_shape={"num_attention_heads": 40}, settings={"tensor_parallel_size": 1})
    at1 = replace(at1, details={**at1.details, "parallel": {"passing_tensor_parallel_sizes": [1, 2]}})
    assert only(text, "raise_tensor_parallel", at1)["tensor_parallel_size"] == 2
    at2 = replace(at1, settings=replace(at1.settings, tensor_parallel_size=2))
    assert only(text, "raise_tensor_parallel", at2) is None


def test_tp_divides_heads():
    text = rendered("tp_heads_indivisible", {"total_num_attention_heads": 40, "tensor_parallel_size": 16})
    assert only(text, "tp_divides_heads")["tensor_parallel_size"] == 8
    assert corrected(text, "tp_divides_heads", UserSettings(tensor_parallel_size=16)).tensor_parallel_size == 8
    odd = rendered("tp_heads_indivisible", {"total_num_attention_heads": 14, "tensor_parallel_size": 4})
    assert only(odd, "tp_divides_heads")["tensor_parallel_size"] == 2


def test_lower_batched_tokens_for_oom_while_profiling():
    plan = a_plan(settings={"max_num_batched_tokens": 8192, "max_num_seqs": 1024, "max_model_len": 40960})
    assert only(OOM_IN_PROFILING, "lower_batched_tokens", plan) == {
        "max_num_batched_tokens": 4096,
        "previous_max_num_batched_tokens": 8192,
    }
    small = a_plan(settings={"max_num_batched_tokens": 512, "max_num_seqs": 256, "max_model_len": 40960})
    assert only(OOM_IN_PROFILING, "lower_batched_tokens", small) == {
        "max_model_len": 20480,
        "previous_max_model_len": 40960,
    }
    crowded = a_plan(settings={"max_num_batched_tokens": 2048, "max_num_seqs": 2048})
    fixed = corrected(OOM_IN_PROFILING, "lower_batched_tokens", UserSettings(max_num_seqs=2048), crowded)
    assert (fixed.max_num_batched_tokens, fixed.max_num_seqs) == (1024, 1024)
    assert only(GRAPH_CAPTURE, "lower_batched_tokens", plan) is None


def test_sampler_max_num_seqs():
    text = rendered("sampler_warmup_oom", {"num_reqs": 1024})
    assert only(text, "sampler_max_num_seqs") == {"max_num_seqs": 512, "previous_max_num_seqs": 1024}
    assert corrected(text, "sampler_max_num_seqs", UserSettings()).max_num_seqs == 512


# ------------------------------------------------------------------ scheduler and lengths


def test_max_model_len_to_derived_on_the_lab_log_and_the_training_boot():
    assert only(log_text("e_max_model_len_gt_derived"), "max_model_len_to_derived")["max_model_len"] == 2048
    mistral = next(
        b["failure"]["last_error"] for b in training_failures() if "User-specified" in b["failure"]["last_error"]
    )
    assert only(mistral, "max_model_len_to_derived") == {"max_model_len": 32768, "previous_max_model_len": 999999}
    assert corrected(mistral, "max_model_len_to_derived", UserSettings(max_model_len=999999)).max_model_len == 32768


def test_batched_tokens_to_max_model_len():
    text = rendered("batched_tokens_below_max_model_len", {"self.max_num_batched_tokens": 2048, "max_model_len": 8192})
    assert only(text, "batched_tokens_to_max_model_len")["max_num_batched_tokens"] == 8192
    assert corrected(text, "batched_tokens_to_max_model_len", UserSettings()).max_num_batched_tokens == 8192


def test_max_num_seqs_to_batched_tokens():
    text = rendered("batched_tokens_below_max_num_seqs", {"self.max_num_batched_tokens": 128, "self.max_num_seqs": 256})
    assert only(text, "max_num_seqs_to_batched_tokens")["max_num_seqs"] == 128
    assert corrected(text, "max_num_seqs_to_batched_tokens", UserSettings(max_num_seqs=256)).max_num_seqs == 128


def test_mm_item_batched_tokens():
    text = rendered(
        "mm_item_over_batched_tokens",
        {"max_tokens_per_mm_item": 16384, "scheduler_config.max_num_batched_tokens": 8192},
    )
    assert only(text, "mm_item_batched_tokens")["max_num_batched_tokens"] == 16384


# ------------------------------------------------------------------ dtype, graphs, tokenizer, parsers, NCCL


def test_dtype_bfloat16_reproduces_the_lab_fix():
    """gemma2 refused float16; the lab's bfloat16 boot with otherwise the same flags was healthy."""
    failed = log_text("g_gemma2_float16")
    assert only(failed, "dtype_bfloat16")["dtype"] == "bfloat16"
    healthy = ran_with("g_gemma2_bfloat16_healthy")
    # the lab booted the healthy one with the one-process executor too: the runner's choice, not the fix
    assert "--distributed-executor-backend uni" in healthy.extra_flags
    healthy = replace(healthy, extra_flags=tuple(f for f in healthy.extra_flags if "executor" not in f))
    assert corrected(failed, "dtype_bfloat16", ran_with("g_gemma2_float16")) == healthy


def test_dtype_bfloat16_is_float32_below_ampere():
    text = log_text("g_gemma2_float16")
    assert only(text, "dtype_bfloat16", a_plan(gpu_name="Tesla T4"))["dtype"] == "float32"
    assert only(text, "dtype_bfloat16", a_plan(gpu_name="NVIDIA H100 80GB HBM3"))["dtype"] == "bfloat16"


def test_dtype_half_below_compute_capability_8():
    text = rendered("bfloat16_unsupported", {"gpu_name": "Tesla T4", "compute_str": "has compute capability 7.5"})
    assert only(text, "dtype_half") == {"dtype": "half", "compute_capability": "7.5"}
    assert corrected(text, "dtype_half", UserSettings(dtype="bfloat16")).dtype == "half"


def test_enforce_eager_for_graph_capture_failures():
    assert only(GRAPH_CAPTURE, "enforce_eager") == {"enforce_eager": True, "phase": "graph_capture"}
    assert corrected(GRAPH_CAPTURE, "enforce_eager", UserSettings()).enforce_eager is True
    oom_capturing = GRAPH_CAPTURE.replace(
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    )
    assert only(oom_capturing, "enforce_eager") is not None
    eager = (
        "(APIServer pid=1) INFO 12-01 10:00:00 [utils.py:1] non-default args: {'enforce_eager': True}\n" + GRAPH_CAPTURE
    )
    assert only(eager, "enforce_eager") is None
    assert only(OOM_IN_PROFILING, "enforce_eager") is None


def test_tokenizer_mode_mistral():
    text = rendered("tokenizer_mode_mistral_required", {})
    assert only(text, "tokenizer_mode_mistral") == {"tokenizer_mode": "mistral"}
    fixed = corrected(text, "tokenizer_mode_mistral", UserSettings(extra_flags=("--tokenizer-mode hf",)))
    assert fixed.extra_flags == ("--tokenizer-mode mistral",)


def test_reasoning_parser_takes_the_plans():
    text = rendered(
        "invalid_reasoning_parser",
        {"reasoning_parser": "qwen9", "','.join(valid_reasoning_parsers)": "deepseek_r1,qwen3"},
    )
    plan = a_plan(flags=("--reasoning-parser qwen3", "--enable-auto-tool-choice --tool-call-parser hermes"))
    assert only(text, "reasoning_parser", plan) == {"reasoning_parser": "qwen3", "invalid_reasoning_parser": "qwen9"}
    fixed = corrected(text, "reasoning_parser", UserSettings(extra_flags=("--reasoning-parser qwen9",)), plan)
    assert fixed.extra_flags == ("--reasoning-parser qwen3",)
    dropped = corrected(text, "reasoning_parser", UserSettings(extra_flags=("--reasoning-parser qwen9",)))
    assert dropped.extra_flags == ()
    required = rendered("reasoning_parser_required", {})
    assert only(required, "reasoning_parser") is None  # the plan names no parser: no guess
    assert only(required, "reasoning_parser", plan)["reasoning_parser"] == "qwen3"


def test_nccl_disable_nvls_for_the_host_fault_retry():
    assert only(NCCL, "nccl_disable_nvls")["env"] == {"NCCL_NVLS_ENABLE": "0"}
    fixed = corrected(NCCL, "nccl_disable_nvls", UserSettings(tensor_parallel_size=2))
    assert fixed.env == (("NCCL_NVLS_ENABLE", "0"),) and fixed.tensor_parallel_size == 2
    assert only(NCCL, "nccl_disable_nvls", a_plan(settings={"env": (("NCCL_NVLS_ENABLE", "0"),)})) is None


def test_failures_no_flag_fixes_match_no_rule():
    for name in (
        "f_unsupported_architecture",
        "g_corrupt_config_json",
        "g_missing_model_dir",
        "g_no_weight_files",
        "g_truncated_safetensors",
    ):
        text = log_text(name)
        assert match_rules(fingerprint(text), text, None) == [], name


def test_every_rule_has_a_test_here():
    """Every rule module is exercised by a test above (its id appears in an `only(...)` call)."""
    source = Path(__file__).read_text()
    untested = [r.id for r in all_rules() if f'"{r.id}"' not in source.split("def test_every_rule_has_a_test_here")[0]]
    assert not untested


# ------------------------------------------------------------------ the registry


def test_rule_modules_answer_known_families():
    known = set(families.known_family_names())
    for rule in all_rules():
        assert rule.summary and rule.doc, rule.id
        assert set(rule.families) <= known, (rule.id, set(rule.families) - known)


def _module(name: str, families_: tuple[str, ...], match, correction=None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.FAMILIES, module.SUMMARY, module.match = families_, f"{name} summary", match
    module.correction = correction or (lambda settings, fields: UserSettings(max_model_len=fields["n"]))
    return module


def test_a_raising_rule_does_not_stop_the_others(caplog):
    def explode(fingerprint, log, plan):
        raise KeyError("boom")

    broken = rule_from_module(_module("broken", ("kv_cache_too_small",), explode))
    working = rule_from_module(_module("working", ("kv_cache_too_small",), lambda f, log, p: {"n": 7}))
    text = log_text("d_kv_too_small_deep_33554432")
    with caplog.at_level(logging.WARNING, logger="apron.rules"):
        matches, errors = run_rules(fingerprint(text), text, None, (broken, working))
    assert [m.rule_id for m in matches] == ["working"]
    assert [e.rule_id for e in errors] == ["broken"] and "KeyError" in errors[0].error
    assert "broken" in caplog.text


def test_a_correction_that_raises_or_changes_nothing_is_reported_not_raised(monkeypatch, tmp_path):
    text = log_text("d_kv_too_small_deep_33554432")
    match = match_rules(fingerprint(text), text, None)[0]
    with pytest.raises(RuleFailed, match="changes nothing"):
        match.correction(UserSettings(max_model_len=16256))
    from apron.rules import registry

    rule = registry.get_rule(match.rule_id)
    monkeypatch.setattr(rule.module, "correction", lambda settings, fields: 1 / 0)
    with pytest.raises(RuleFailed, match="ZeroDivisionError"):
        match.correction(UserSettings())
    diagnosis = diagnose(text, store=StatusStore(tmp_path))
    assert diagnosis.candidates and diagnosis.candidates[0].corrected is None
    assert "ZeroDivisionError" in diagnosis.candidates[0].error
    assert diagnosis.applicable == ()
