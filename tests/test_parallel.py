"""vLLM's checks on a parallel layout (plan/parallel.py): proven constraints in `plan`, never a row in `fit`.

The walk plans every fixture model and every catalog model at TP 1-8 and checks, for each pair, that
the verdict agrees with the constraints, and against an independent reading of the raw config.json
(the four checks anyone can do by hand: heads, KV heads, padded vocabulary, a dense MLP's width).
tests/test_parallel_engine.py runs vLLM's own code on the same questions.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from apron.checkpoint import load_checkpoint
from apron.checkpoint.catalog import catalog_index
from apron.engine.facts import known_versions
from apron.hardware import resolve_gpu
from apron.hardware.prices import load_prices
from apron.plan import parallel
from apron.plan.fit import FitRequest, fit
from apron.plan.parallel import CHECKS, LINES, SOURCES, Layout, ParallelShape
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot, snapshot_names

H100 = resolve_gpu("H100")
PARALLEL_KINDS = {c.kind for c in CHECKS}


@functools.cache
def _model(name: str):
    if name.startswith("catalog:"):
        return load_checkpoint(name.removeprefix("catalog:"))
    return loaded_snapshot(name)


MODELS = snapshot_names() + [f"catalog:{repo}" for repo in sorted(catalog_index())]


def _plan(name: str, tp: int, **settings):
    user = UserSettings(tensor_parallel_size=tp, max_model_len=4096, **settings)
    return plan_checkpoint(_model(name), H100, user, advise=False)


def _by_hand(config: dict, tp: int) -> str | None:
    """What anyone reading config.json would refuse, without Apron's code."""
    text = config.get("text_config") or config
    heads = text.get("num_attention_heads") or 0
    kv = text.get("num_key_value_heads") or heads
    if heads % tp:
        return "heads"
    if heads and not text.get("kv_lora_rank") and ((tp >= kv and tp % kv) or (tp < kv and kv % tp)):
        return "kv heads"
    vocab = text.get("vocab_size") or config.get("vocab_size") or 0
    if -(-vocab // 64) * 64 % tp:
        return "vocabulary"
    is_moe = any(text.get(k) for k in ("num_local_experts", "n_routed_experts", "num_experts"))
    if not is_moe and (text.get("intermediate_size") or 0) % tp:
        return "intermediate"
    return None


@pytest.mark.parametrize("name", MODELS)
def test_every_model_at_tp_1_to_8_agrees_with_the_constraints(name):
    for tp in range(1, 9):
        plan = _plan(name, tp)
        found = [c for c in plan.details["parallel"]["checks"] if c["failure"]]
        problems = [p for p in plan.problems if p.kind in PARALLEL_KINDS]
        passing = plan.details["parallel"]["passing_tensor_parallel_sizes"]
        assert (tp in passing) == (not found), (name, tp)
        if found:
            assert plan.verdict in ("does_not_fit", "unsupported"), (name, tp, found)
            assert len(problems) == len(found), (name, tp)
            # in the release's start-up order (plan/refusals.py), each naming its own check
            named = sorted(re.search(r"\(check (\w+)\)", p.message).group(1) for p in problems)
            assert named == sorted(c["check"] for c in found), (name, tp)
            for problem in problems:
                assert problem.label == "proven_constraint"
                assert re.search(r"\.py 0\.\d+\.\d+:\d+", problem.message), problem.message
        else:
            assert not problems, (name, tp, problems)
        by_hand = _by_hand(_model(name).config, tp)
        if by_hand is not None:
            assert found, f"{name} at TP {tp}: config.json says {by_hand} does not divide, Apron lets it pass"


def test_phi4_at_tp_4_is_refused_naming_the_kv_head_check():
    plan = plan_checkpoint(
        load_checkpoint("microsoft/phi-4"), resolve_gpu("3090"), UserSettings(tensor_parallel_size=4)
    )
    assert plan.verdict == "does_not_fit"
    problem = next(p for p in plan.problems if p.kind == "tensor_parallel_kv_heads")
    assert "(check kv_heads)" in problem.message
    assert "10 KV heads cannot be split over 4 GPUs" in problem.message
    assert f"model_executor/layers/linear.py {plan.engine_version}:" in problem.message
    # 40 heads and 10 KV heads allow 1, 2, 5 and 10; the padded vocabulary (100,352) rules out 5.
    assert problem.message.endswith("Tensor-parallel sizes that pass every parallel check: 1, 2")
    assert plan.details["parallel"]["passing_tensor_parallel_sizes"] == [1, 2]


def test_fit_never_lists_a_degree_vllm_refuses():
    checkpoint = load_checkpoint("microsoft/phi-4")
    gpus = (resolve_gpu("3090"), resolve_gpu("4090"), resolve_gpu("H100"))
    result = fit(checkpoint, FitRequest(4, 4096, gpus), load_prices())
    by_count = {(r.gpu.name, r.count): r for r in result.rows}
    assert result.feasible
    for row in result.feasible:
        assert row.count in (1, 2), (row.gpu.name, row.count)
    for gpu in gpus:
        for count in (4, 8):
            row = by_count[(gpu.name, count)]
            assert row.status == "infeasible"
            reason = row.outcome.reason
            assert reason.startswith(f"the release refuses TP {count} (check kv_heads: 10 KV heads"), reason
            assert reason.endswith("TP that pass: 1, 2")


def test_the_divisibility_refusals_once_each():
    # Qwen3-8B at TP 3: 32 heads (config validation) and 12,288 MLP width (construction) fail; the
    # checks that used to live in weights.py are the same checks here, one problem each.
    plan = _plan("Qwen/Qwen3-8B", 3)
    kinds = [p.kind for p in plan.problems if p.kind in PARALLEL_KINDS]
    assert kinds.count("tensor_parallel_heads") == 1
    assert any("must be divisible by tensor parallel size (3)" in p.message for p in plan.problems)


def test_block_fp8_shared_expert_refuses_tp_8_where_the_experts_refine():
    # Qwen3.6-35B-A3B-FP8: experts and the shared expert are 512 wide, blocks 128 x 128. At TP 8 each
    # expert shard is 64: refined to 64 x 64 blocks (gcd(128, 128, 64, 2048) = 64 >= 32), so the experts
    # load; the shared expert's down_proj is a RowParallelLinear whose 64-wide input is refused.
    shape = parallel.parallel_shape(
        _model("Qwen--Qwen3.6-35B-A3B-FP8"),
        _config("Qwen--Qwen3.6-35B-A3B-FP8"),
        _facts(),
        tower_family=None,
        is_tower_sharded=False,
    )
    assert shape.fp8_block == (128, 128) and ("shared_expert.down_proj", 512) in shape.fp8_row_inputs
    names = [f.check.name for f in parallel.failures(shape, Layout(8))]
    assert names == ["fp8_block_linear"]
    assert parallel.failures(shape, Layout(4)) == []


def test_block_fp8_expert_shard_refused_when_no_fine_block_divides_it():
    shape = ParallelShape(moe_intermediate=768, hidden_size=2048, fp8_block=(128, 128), is_fp8_moe=True, is_moe=True)
    assert parallel.failures(shape, Layout(4)) == []  # 192: refined to 64 x 64
    odd = ParallelShape(moe_intermediate=1000, hidden_size=2048, fp8_block=(128, 128), is_fp8_moe=True, is_moe=True)
    failure = parallel.failures(odd, Layout(4))  # 250: gcd(128, 128, 250, 2048) = 2
    assert [f.check.name for f in failure] == ["fp8_block_moe"] and "gcd 2" in failure[0].reason


def test_pipeline_and_expert_parallel_checks_apply_only_to_layouts_that_set_them():
    dense = ParallelShape(num_heads=8, supports_pp=False)
    assert parallel.failures(dense, Layout(1)) == []
    assert [f.check.name for f in parallel.failures(dense, Layout(1, pipeline_parallel_size=2))] == ["pipeline"]
    assert [f.check.name for f in parallel.failures(dense, Layout(1, is_expert_parallel=True))] == ["expert_parallel"]
    moe = ParallelShape(num_heads=8, moe_intermediate=100, is_moe=True)
    assert [f.check.name for f in parallel.failures(moe, Layout(8))] == ["moe_intermediate"]
    assert parallel.failures(moe, Layout(8, is_expert_parallel=True)) == []  # experts are not TP-split then


def test_vision_tower_checks_follow_the_encoder_tp_mode():
    name = "Qwen--Qwen3.8-27B"  # vision: 16 heads, MLP 4,304
    weights = _plan(name, 2, mm_encoder_tp_mode="weights").details["parallel"]["checks"]
    assert not next(c for c in weights if c["check"] == "vision_tower")["failure"]
    shape = parallel.parallel_shape(
        _model(name), _config(name), _facts(), tower_family="qwen3_vl", is_tower_sharded=True
    )
    assert shape.vision == (16, 4304, 1152 * 4)
    data = parallel.parallel_shape(
        _model(name), _config(name), _facts(), tower_family="qwen3_vl", is_tower_sharded=False
    )
    assert data.vision is None


def test_every_source_has_a_line_in_every_shipped_release():
    for check in CHECKS:
        for key in check.sources:
            assert key in SOURCES
            for version in known_versions():
                assert LINES[key].get(version), (check.name, key, version)


def test_a_release_outside_the_table_cites_the_nearest_older_one():
    assert parallel.cite("kv_split", "0.33.5") == "model_executor/layers/linear.py 0.33.0:1070"
    assert parallel.cite("kv_split", "0.28.0") == "model_executor/layers/linear.py 0.29.0:1047"


def test_cited_lines_hold_their_code_in_the_installed_engine():
    """The table's 0.32.0 lines against the CPU engine's own files (read, not imported)."""
    from engine_env import vllm_venv

    venv = vllm_venv()
    package = next(Path(venv).glob("lib/python3*/site-packages/vllm"))
    for key, source in SOURCES.items():
        lines = (package / source.file).read_text().splitlines()
        assert source.anchor in lines[LINES[key]["0.32.0"] - 1], (key, source.file)


def _config(name: str):
    from apron.plan.model_config import ModelConfig

    return ModelConfig.from_config(_model(name).config)


def _facts():
    from apron.engine.facts import load_facts

    return load_facts(known_versions()[-1])
