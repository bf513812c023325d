"""The observed constants of the KV budget and their stated spreads, recomputed from the training
boots they rest on (tests/fixtures/boots-training.json): a constant in plan/ranges.py, overheads.py
or graphs.py that drifts from its boots fails here. Also the carrying rule and the range's arithmetic."""

from __future__ import annotations

import statistics

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.plan import graphs, overheads, ranges
from apron.plan.model_config import ModelConfig
from apron.plan.weights import WeightSettings, marlin_fp8_repack_blocks
from conftest import snapshot_path
from test_training_boots import BOOTS, kept_before_peak, plan_for

GIB = 2**30
HOPPER = "9.0"


def _residuals() -> dict[str, list[float]]:
    """Per boot: the non-torch base vLLM's numbers leave, the ratio of the measured graph estimate's
    observed part to the predicted one, the compile peak's relative error, the weights' error."""
    keys = ("base", "base_h", "graph", "graph_h", "peak", "weights", "unread", "fp8_read")
    out: dict[str, list[float]] = {k: [] for k in keys}
    for boot in BOOTS:
        plan, measured = plan_for(boot), boot["measured"]
        hopper = plan.compute_capability == HOPPER
        non_torch = {c["name"]: c["num_bytes"] for c in plan.details["non_torch"]}
        base = non_torch["kernels, handles, small buffers"]
        rest = plan.quantities["non_torch_bytes"].value - kept_before_peak(plan) - base
        out["base_h" if hopper else "base"].append(measured["non_torch_increase_bytes"] - rest)
        parts = plan.details["cudagraphs"]
        observed = sum(c["num_bytes"] for c in parts if c["name"].startswith(("piecewise", "FULL graphs")))
        derived = sum(c["num_bytes"] for c in parts) - observed
        out["graph_h" if hopper else "graph"].append((measured["cuda_graph_vllm_estimate_bytes"] - derived) / observed)
        activation = plan.details["activation"]
        if activation["peak"] == "compile transient":
            live = activation["peak_live_bytes"]
            out["peak"].append((measured["startup_activation_peak_bytes"] - live) / live)
        predicted = plan.quantities["weights_bytes_per_gpu"].value
        if boot["model_id"] == "Qwen/Qwen3-0.6B-FP8":
            # the unread-layout rule's observation: its miss before Marlin's repack blocks were read;
            # with them (plan/weights_repack.py) it is a read layout's miss
            blocks = _fp8_repack_blocks(plan.compute_capability)
            out["unread"].append(measured["weights_bytes_per_gpu"] / (predicted - blocks) - 1)
            out["fp8_read"].append(measured["weights_bytes_per_gpu"] - predicted)
        else:
            out["weights"].append(measured["weights_bytes_per_gpu"] - predicted)
    return out


def _fp8_repack_blocks(capability: str) -> int:
    ckpt = load_snapshot(snapshot_path("Qwen/Qwen3-0.6B-FP8"))
    major, minor = (int(x) for x in capability.split("."))
    settings = WeightSettings(1, "bfloat16", (major, minor), release="0.29.0")
    return marlin_fp8_repack_blocks(ckpt, ModelConfig.from_config(ckpt.config), settings)


@pytest.fixture(scope="module")
def residuals():
    return _residuals()


def _leave_one_out(values: list[float]) -> tuple[float, float]:
    """The most a value falls below, and rises above, the median of the others."""
    gaps = [v - statistics.median(values[:i] + values[i + 1 :]) for i, v in enumerate(values)]
    return -min(gaps), max(gaps)


def test_consumer_non_torch_base_is_the_median_and_its_spread(residuals):
    base = residuals["base"]
    assert len(base) == overheads.BASE_NON_TORCH.num_boots
    assert abs(statistics.median(base) - overheads.BASE_NON_TORCH_BYTES) < 0.01 * GIB
    below, above = _leave_one_out(base)
    value = overheads.BASE_NON_TORCH_BYTES
    assert overheads.BASE_NON_TORCH.below_fraction == pytest.approx(below / value, abs=0.05)
    assert overheads.BASE_NON_TORCH.above_fraction == pytest.approx(above / value, abs=0.05)


def test_hopper_non_torch_base_is_the_mean_of_its_two_boots(residuals):
    pair = residuals["base_h"]
    assert len(pair) == overheads.BASE_NON_TORCH_HOPPER.num_boots == 2
    assert abs(statistics.mean(pair) - overheads.BASE_NON_TORCH_HOPPER_BYTES) < 0.01 * GIB
    spread = abs(pair[0] - pair[1]) / overheads.BASE_NON_TORCH_HOPPER_BYTES
    assert overheads.BASE_NON_TORCH_HOPPER.below_fraction == pytest.approx(spread, abs=0.02)


def test_graph_driver_cost_bounds_every_boot(residuals):
    consumer, hopper = graphs.PER_GRAPH
    ratios = residuals["graph"]
    assert len(ratios) == consumer.num_boots
    assert 1 - consumer.below_fraction <= min(ratios) < 1 - consumer.below_fraction + 0.01
    assert 1 + consumer.above_fraction - 0.01 < max(ratios) <= 1 + consumer.above_fraction
    low, high = sorted(residuals["graph_h"])
    assert hopper.num_boots == 2  # each boot predicted from the other: their whole difference
    assert hopper.below_fraction == pytest.approx((high - low) / high, abs=0.01)
    assert hopper.above_fraction == pytest.approx((high - low) / low, abs=0.01)
    assert 1 - hopper.below_fraction <= low and high <= 1 + hopper.above_fraction


def test_compile_peak_and_weights_spreads_cover_their_boots(residuals):
    assert len(residuals["peak"]) == ranges.COMPILE_OUTPUTS.num_boots
    assert max(abs(e) for e in residuals["peak"]) <= ranges.COMPILE_OUTPUTS.above_fraction
    weights = residuals["weights"]  # measured - predicted, bytes
    assert len(weights) == 18
    assert max(weights) <= ranges.WEIGHTS_ABOVE_BYTES < max(weights) + 2**20
    assert -min(weights) <= ranges.WEIGHTS_BELOW_BYTES < -min(weights) + 2**20
    (unread,) = residuals["unread"]
    assert unread <= ranges.UNREAD_LAYOUT_ABOVE_FRACTION < unread + 0.005
    (read,) = residuals["fp8_read"]  # with the repack read, a read layout's bounds hold for it too
    assert -ranges.WEIGHTS_BELOW_BYTES <= read <= ranges.WEIGHTS_ABOVE_BYTES


def test_the_carrying_rule_widens_a_constant_taken_where_it_was_not_seen():
    obs = overheads.BASE_NON_TORCH
    seen = ranges.observed_range(obs, GIB, (8, 9), frozenset({"attention"}))
    carried = ranges.observed_range(obs, GIB, (10, 0), frozenset({"attention"}))
    unseen_kind = ranges.observed_range(obs, GIB, (8, 9), frozenset({"MLA"}))
    assert seen.low_bytes < GIB < seen.high_bytes
    assert carried.low_bytes <= seen.low_bytes and carried.high_bytes > seen.high_bytes
    assert "never observed on sm100" in carried.note and "never observed with MLA layers" in unseen_kind.note
    assert carried.high_bytes == int(GIB * (1 + 2 * obs.above_fraction + ranges.CARRIED_ABOVE_FRACTION))
    two = overheads.BASE_NON_TORCH_HOPPER
    assert "carried" not in ranges.observed_range(two, GIB, (9, 0), frozenset({"attention"})).note
    one = ranges.Observation("x", frozenset({(9, 0)}), frozenset({"attention"}), 1, 0.1, 0.1, "settle")
    assert "observed on only 1 boots" in ranges.observed_range(one, GIB, (9, 0), frozenset({"attention"})).note
