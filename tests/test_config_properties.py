"""No input taken on trust, as a property: real fixture configs and safetensors headers, mutated
(types, zeros, negatives, NaN, huge values, dropped keys, extra keys), always give a plan, a plan whose
numbers are unknown, or one line of bad input (exit 2): never an internal error, never a hang (each
case under 2 s). The fixtures whose real headers take long to plan (DeepSeek-V4/V4.1, GLM-5.3 and
-Flash) are fuzzed through the config check and their KV layout, the part of the planner a config
drives."""

from __future__ import annotations

import copy
import json
import math
import os
import time
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import load_facts
from apron.errors import BadInput
from apron.hardware import resolve_gpu
from apron.plan.kv.layouts import build_layout
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.result import VERDICTS
from apron.plan.settings import EngineSettings, UserSettings
from conftest import snapshot_document

# One fixture per KV family that plans in well under a second, and the multimodal ones.
PLANNED = (
    "Qwen--Qwen3-0.6B",
    "Qwen--Qwen3-8B-AWQ",
    "google--gemma-2-2b-it",
    "mistralai--Mistral-7B-Instruct-v0.3",
    "deepseek-ai--DeepSeek-V2-Lite",
    "openai--gpt-oss-20b",
    "state-spaces--mamba-2.8b-hf",
    "google--gemma-4-31B-it",
    "Qwen--Qwen3.8-27B",
    "Qwen--Qwen3.8-Flash-Next",
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16",
    "meta-models--Muse-Glimmer-30B",
)
LAYOUT_ONLY = (
    "deepseek-ai--DeepSeek-V4-Flash-0731",
    "deepseek-ai--DeepSeek-V4.1-Flash",
    "zai-org--GLM-5.3",
    "zai-org--GLM-5.3-Flash",
    "MiniMaxAI--MiniMax-M3",
)
# What a mutation puts in: each kind of wrong value the issue names, and some right ones.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**31, 2**63, 2**70, 10**30, 7, 64, 4096]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 2.5, -1.0, 1e400, -1e400]),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-2, 70), st.text(max_size=3)), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(-2, 9), max_size=2),
)
# The same 100 cases a test on every run (CI stays reproducible, about 10 s in all); APRON_HYPOTHESIS=deep
# explores 2000 new ones a test, to run by hand after a change to what the planner reads.
settings.register_profile("apron", derandomize=True, max_examples=100)
settings.register_profile("deep", derandomize=False, max_examples=2000)
settings.load_profile(os.environ.get("APRON_HYPOTHESIS", "apron"))
CASE_SECONDS = 2.0
CASE = settings(
    deadline=None,  # timed in no_internal_error, with one retry for a loaded machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def paths(table: dict, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a config, nested tables included."""
    out = []
    for key, value in table.items():
        out.append((*prefix, key))
        if isinstance(value, dict) and len(prefix) < 2:
            out += paths(value, (*prefix, key))
    return out


def mutate(config: dict, data: st.DataObject) -> dict:
    config = copy.deepcopy(config)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        kind = data.draw(st.sampled_from(["replace", "replace", "drop", "extra"]), label="kind")
        path = data.draw(st.sampled_from(paths(config) or [("x",)]), label="path")
        parent = config
        for key in path[:-1]:
            parent = parent[key]
        if kind == "drop":
            parent.pop(path[-1], None)
        elif kind == "extra":
            parent[data.draw(st.sampled_from(["new_cache_ratio", "window_layers", "x"]), label="key")] = data.draw(
                VALUES
            )
        else:
            parent[path[-1]] = data.draw(VALUES, label="value")
    return config


@cache
def document(name: str) -> str:
    return json.dumps(snapshot_document(name))  # copied per case by parsing


@cache
def config_text(name: str) -> str:
    return json.dumps(snapshot_document(name)["files"]["config.json"])


def no_internal_error(run) -> None:
    """A plan (all of whose numbers print as JSON) or one line of bad input, in under 2 s. A case over
    2 s runs again, and must then finish in time: a loaded machine may pause once, a hang does not
    stop (pytest-timeout ends the test)."""
    started = time.monotonic()
    _outcome(run)
    if time.monotonic() - started > CASE_SECONDS:
        started = time.monotonic()
        _outcome(run)
        assert time.monotonic() - started < CASE_SECONDS


def _outcome(run) -> None:
    try:
        plan = run()
    except BadInput as exc:
        assert exc.message and "\n" not in exc.message, exc.message
        return
    if plan is not None:
        assert plan.verdict in VERDICTS
        json.dumps(plan.to_json(), allow_nan=False)


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory):
    """An empty Apron home (the shipped engine facts), and each fixture planned once first: loading
    the facts is no part of any case's 2 s."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("APRON_HOME", str(tmp_path_factory.mktemp("apron-home")))
        for name in PLANNED:
            checkpoint = load_snapshot(f"{name}.json", document=json.loads(document(name)))
            plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings())
        yield


@pytest.mark.timeout(600)
@CASE
@given(st.sampled_from(PLANNED), st.data())
def test_mutated_configs_plan_or_refuse(name, data):
    doc = json.loads(document(name))
    doc["files"]["config.json"] = mutate(doc["files"]["config.json"], data)
    doc.pop("checks", None)
    no_internal_error(
        lambda: plan_checkpoint(load_snapshot(f"{name}.json", document=doc), resolve_gpu("H100"), UserSettings())
    )


@pytest.mark.timeout(600)
@CASE
@given(st.sampled_from(LAYOUT_ONLY), st.data())
def test_mutated_configs_of_the_largest_models_build_a_layout_or_refuse(name, data):
    config = mutate(json.loads(config_text(name)), data)

    def run():
        model = ModelConfig.from_config(config)
        arch = str((config.get("architectures") or ["X"])[0]) if isinstance(config.get("architectures"), list) else "X"
        build_layout(arch, model, ENGINE, load_facts("0.33.0"), capability=(9, 0), is_attention_free=False)

    no_internal_error(run)


ENGINE = EngineSettings(
    tensor_parallel_size=1,
    max_model_len=8192,
    derived_max_model_len=8192,
    gpu_memory_utilization=0.9,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_dtype="auto",
    dtype="bfloat16",
    enforce_eager=False,
    language_model_only=True,
    cudagraph_capture_sizes=(1, 2, 4, 8),
    user=UserSettings(),
)
HEADER_VALUES = st.one_of(
    st.sampled_from(["BF16", "F8_E4M3", "I4", "bogus", "", 7, None]),
    st.lists(st.integers(-3, 2**40), max_size=4),
    st.sampled_from([[0, 8], [8, 0], [-8, 8], [0, 2**70], [0.5, 8], "0-8", None]),
)


@pytest.mark.timeout(600)
@CASE
@given(st.sampled_from(PLANNED[:8]), st.data())
def test_mutated_safetensors_headers_plan_or_refuse(name, data):
    doc = json.loads(document(name))
    doc.pop("checks", None)
    shards = doc["safetensors"]
    shard = data.draw(st.sampled_from(sorted(shards)), label="shard")
    tensor = data.draw(st.sampled_from(sorted(k for k in shards[shard] if k != "__metadata__")), label="tensor")
    kind = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "drop", "extra", "whole"]), label="kind")
    if kind == "drop":
        del shards[shard][tensor]
    elif kind == "extra":
        shards[shard]["model.extra.weight"] = {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}
    elif kind == "whole":
        shards[shard][tensor] = data.draw(VALUES, label="value")
    else:
        shards[shard][tensor][kind] = data.draw(HEADER_VALUES, label="value")
    no_internal_error(
        lambda: plan_checkpoint(load_snapshot(f"{name}.json", document=doc), resolve_gpu("H100"), UserSettings())
    )


def test_nan_and_infinity_never_reach_a_plan():
    assert math.isnan(json.loads("NaN")) and json.loads("1e400") == math.inf  # what a config.json may hold


@pytest.mark.parametrize("key", ["linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim"])
def test_a_list_where_the_parallel_checks_read_a_count_plans_or_refuses(key):
    """Found by the mutation test above on a fresh clone: Qwen3.8-27B's delta-net sizes replaced by
    [0] reached plan/parallel.py's int() (TypeError). The schema records the value; the plan says so."""
    doc = json.loads(document("Qwen--Qwen3.8-27B"))
    doc["files"]["config.json"]["text_config"][key] = [0]
    no_internal_error(
        lambda: plan_checkpoint(
            load_snapshot("Qwen--Qwen3.8-27B.json", document=doc), resolve_gpu("H100"), UserSettings()
        )
    )
