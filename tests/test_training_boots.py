"""The plan against real measured vLLM boots (tests/fixtures/boots-training.json).

Targets (issue 4): weights within 1%, available KV within 0.25 GiB, activation peak within
0.15 GiB, KV tokens within 2% where measured. Boots that miss a target today are listed in
KNOWN_MISSES with the error they have now; the test fails if any error grows past its bound, so the
table is a regression guard as well as a report. The table also shows the two terms between
weights and the KV budget that vLLM does not log directly - memory outside the weights that stays
(non-torch) and its CUDA-graph estimate - so a KV error can be read term by term (docs/memory.md).
"""

from __future__ import annotations

import json

import pytest

from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import FIXTURES, snapshot_path

GIB = 2**30
BOOTS = [
    b for b in json.loads((FIXTURES / "boots-training.json").read_text())["boots"] if b["boot_outcome"] == "healthy"
]
# The fixture's dtype_note: one mamba-2.8b boot ran float32; its serve flags do not record it.
FLOAT32_BOOTS = {("state-spaces/mamba-2.8b-hf", 11070278205)}
TARGETS = {"weights": 0.01, "available_kv": 0.25 * GIB, "activation": 0.15 * GIB, "kv_tokens": 0.02}
# Each term against the log's own split (issue 20): memory outside torch and vLLM's graph estimate.
TERM_TARGETS = {"non_torch": 0.1 * GIB, "cudagraphs": 0.25 * GIB}
# vLLM prints every figure through format_gib (two decimals of a GiB): a measured value is known to this.
LOG_RESOLUTION = 0.005 * GIB
# (model, measured weights) -> {quantity: bound on |error| today}; see the closing notes of issue 4.
KNOWN_MISSES = {
    # gpt-oss-20b: 0.12 GiB of 4.33 high, through non-torch (-0.08) and the MXFP4 weights (-0.23%).
    ("openai/gpt-oss-20b", 14817637171): {"kv_tokens": 0.03},
    # gpt-oss-120b on the H100: its graph estimate reads 0.19 GiB below the Hopper prediction (the
    # monolithic MoE's launches), so the tokens are 2.5% low (0.14 GiB of 5.7), on the safe side.
    ("openai/gpt-oss-120b", 65959960248): {"kv_tokens": 0.026},
}


def plan_for(boot: dict):
    flags, measured = boot["serve_flags"], boot["measured"]
    dtype = "float32" if (boot["model_id"], measured["weights_bytes_per_gpu"]) in FLOAT32_BOOTS else "auto"
    user = UserSettings(
        max_model_len=flags.get("max_model_len"),
        gpu_memory_utilization=flags.get("gpu_memory_utilization"),
        dtype=dtype,
    )
    checkpoint = load_checkpoint(str(snapshot_path(boot["model_id"])))
    return plan_checkpoint(checkpoint, resolve_gpu(boot["gpu"]), user, engine_version=boot["vllm_version"].lstrip("v"))


def kept_before_peak(plan) -> int:
    """The run's persistent allocations made after the peak moment (the MoE and cuBLAS workspaces
    after the compile transient): vLLM's transient excludes them, the fixture's peak (torch's peak
    increase over the run) includes them, and its non-torch (the closing term) lacks them."""
    activation = plan.details["activation"]
    return activation["peak_live_bytes"] - plan.quantities["activation_peak_bytes"].value


def errors(boot: dict) -> dict[str, float]:
    plan = plan_for(boot)
    q = {k: v.value for k, v in plan.quantities.items()}
    m = boot["measured"]
    out = {
        "weights": q["weights_bytes_per_gpu"] / m["weights_bytes_per_gpu"] - 1,
        "available_kv": q["available_kv_bytes"] - m["available_kv_cache_bytes"],
        "activation": q["activation_peak_bytes"] + kept_before_peak(plan) - m["startup_activation_peak_bytes"],
    }
    if m.get("kv_cache_tokens"):
        out["kv_tokens"] = q["kv_tokens"] / m["kv_cache_tokens"] - 1
    return out


def term_errors(boot: dict) -> dict[str, float]:
    """The two unlogged terms: available = requested - weights - non-torch - peak - graph estimate, so
    the fixture's non-torch is exactly what closes vLLM's own equation."""
    plan = plan_for(boot)
    q = {k: v.value for k, v in plan.quantities.items()}
    m = boot["measured"]
    out = {}
    if m.get("non_torch_increase_bytes") is not None:
        out["non_torch"] = q["non_torch_bytes"] - kept_before_peak(plan) - m["non_torch_increase_bytes"]
    if m.get("cuda_graph_vllm_estimate_bytes") is not None:
        out["cudagraphs"] = q["cudagraph_bytes"] - m["cuda_graph_vllm_estimate_bytes"]
    return out


def _cell(name: str, value: float | None) -> str:
    if value is None:
        return "       -"
    return f"{value:+8.2%}" if name in ("weights", "kv_tokens") else f"{value / GIB:+8.2f}"


def test_fixture_terms_close_vllms_equation():
    """requested - weights - non-torch - peak - graph estimate = available, in every H100 row: the
    fixture's terms are vLLM's own, so the per-term table compares like with like."""
    for boot in BOOTS[-2:]:
        m = boot["measured"]
        rest = (
            m["requested_memory_bytes"]
            - m["weights_bytes_per_gpu"]
            - m["non_torch_increase_bytes"]
            - m["startup_activation_peak_bytes"]
            - m["cuda_graph_vllm_estimate_bytes"]
        )
        assert abs(rest - m["available_kv_cache_bytes"]) < 2**20, boot["model_id"]


def test_plan_against_measured_boots(capsys):
    rows, failures = [], []
    for boot in BOOTS:
        key = (boot["model_id"], boot["measured"]["weights_bytes_per_gpu"])
        errs = errors(boot)
        terms = term_errors(boot)
        gpu = boot["gpu"].replace("NVIDIA ", "").replace("GeForce ", "").replace(" 80GB HBM3", "")
        rows.append(
            f"{boot['model_id'][:34]:<34} {gpu:>9} {boot['vllm_version']:>7} "
            + " ".join(_cell(n, errs.get(n)) for n in ("weights", "activation"))
            + " ".join(_cell(n, terms.get(n)) for n in ("non_torch", "cudagraphs"))
            + " ".join(_cell(n, errs.get(n)) for n in ("available_kv", "kv_tokens"))
        )
        for name, error in errs.items():
            bound = KNOWN_MISSES.get(key, {}).get(name, TARGETS[name])
            if abs(error) > bound:
                failures.append(f"{key} {name}: {_cell(name, error)} beyond {_cell(name, bound)}")
        for name, error in terms.items():
            bound = KNOWN_MISSES.get(key, {}).get(name, TERM_TARGETS[name])
            if abs(error) > bound:
                failures.append(f"{key} {name}: {_cell(name, error)} beyond {_cell(name, bound)}")
    header = f"{'model':<34} {'gpu':>9} {'vllm':>7}  weights peak GiB  non-torch graphs  KV GiB   tokens"
    with capsys.disabled():
        print("\npredicted - measured\n" + header + "\n" + "\n".join(rows))
    assert not failures, "\n".join(failures)


def test_measured_budget_lies_in_the_stated_range():
    """Every training boot's KV budget inside the plan's range (to the log's resolution), and the low
    end never more than 0.25 GiB above what vLLM gave: `fits` is never optimistic on them."""
    outside, optimistic = [], []
    for boot in BOOTS:
        q = plan_for(boot).quantities["available_kv_bytes"]
        measured = boot["measured"]["available_kv_cache_bytes"]
        if not q.low - LOG_RESOLUTION <= measured <= q.high + LOG_RESOLUTION:
            outside.append(
                f"{boot['model_id']} on {boot['gpu']}: {measured / GIB:.2f} not in {q.low / GIB:.2f}-{q.high / GIB:.2f}"
            )
        if q.low - measured > TARGETS["available_kv"]:
            optimistic.append(boot["model_id"])
    assert not outside, "\n".join(outside)
    assert not optimistic


def test_range_stays_useful():
    """At most 1 GiB wide at the median of the training boots (issue 20)."""
    widths = sorted((q.high - q.low) for q in (plan_for(b).quantities["available_kv_bytes"] for b in BOOTS))
    assert widths[len(widths) // 2] <= GIB, [round(w / GIB, 2) for w in widths]


@pytest.mark.parametrize(
    "boot", [b for b in BOOTS if b["measured"].get("kv_cache_tokens")], ids=lambda b: b["model_id"]
)
def test_engine_formula_reproduces_logged_tokens_from_logged_budget(boot):
    """With the measured budget in place of the predicted one, the block planner must give the
    engine's logged token count and concurrency (the budget is only known to 0.005 GiB)."""

    from apron.engine.facts import load_facts
    from apron.plan.kv.layouts import build_layout
    from apron.plan.kv.planning import plan_kv
    from apron.plan.kv.specs import SchedulingContext
    from apron.plan.memory import model_traits
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import resolve_settings

    checkpoint = load_checkpoint(str(snapshot_path(boot["model_id"])))
    config = ModelConfig.from_config(checkpoint.config)
    facts = load_facts(boot["vllm_version"].lstrip("v"))
    gpu = resolve_gpu(boot["gpu"])
    settings = resolve_settings(
        checkpoint, config, gpu, facts, UserSettings(max_model_len=boot["serve_flags"]["max_model_len"])
    )
    traits = model_traits(checkpoint, config, facts)
    layout = build_layout(
        checkpoint.architecture,
        config,
        settings,
        facts,
        capability=gpu.compute_capability,
        is_attention_free=traits.is_attention_free,
    )
    ctx = SchedulingContext(
        settings.max_model_len, settings.max_num_batched_tokens, mamba_cache_mode=layout.mamba_cache_mode
    )
    measured = boot["measured"]
    logged = measured["kv_cache_tokens"]
    budgets = [int(measured["available_kv_cache_bytes"] + d * GIB) for d in (-0.005, 0, 0.005)]
    results = {plan_kv(dict(layout.specs), b, ctx).kv_tokens for b in budgets}
    assert min(results) <= logged <= max(results), (results, logged)
