"""The settings a correction rule can set beyond the plan's fields: extra flags and environment."""

from __future__ import annotations

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.errors import BadInput
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings, user_flags
from conftest import snapshot_path


def plan_for(name="Qwen/Qwen3-8B", gpu="H100", version="0.30.0", **user):
    return plan_checkpoint(load_snapshot(snapshot_path(name)), resolve_gpu(gpu), UserSettings(**user), version)


def test_defaults_are_unchanged():
    assert UserSettings().extra_flags == () and UserSettings().env == ()
    assert user_flags(UserSettings()) == []


@pytest.mark.parametrize("kwargs", [{"extra_flags": ("tokenizer-mode mistral",)}, {"env": (("NCCL NVLS", "0"),)}])
def test_bad_extra_flags_and_env_are_bad_input(kwargs):
    with pytest.raises(BadInput):
        UserSettings(**kwargs)


def test_extra_flags_and_env_reach_the_flags_and_the_command(apron_home_with_facts):
    plan = plan_for(extra_flags=("--tokenizer-mode mistral",), env=(("NCCL_NVLS_ENABLE", "0"),))
    assert "--tokenizer-mode mistral" in plan.flags
    assert plan.command.startswith("NCCL_NVLS_ENABLE=0 vllm serve ")
    document = plan.to_json()
    assert document["settings"]["extra_flags"] == ["--tokenizer-mode mistral"]
    assert document["settings"]["env"] == {"NCCL_NVLS_ENABLE": "0"}


def test_a_users_parser_replaces_the_plans(apron_home_with_facts):
    plain = plan_for()
    assert "--reasoning-parser qwen3" in plain.flags
    mine = plan_for(extra_flags=("--reasoning-parser deepseek_r1",))
    assert "--reasoning-parser deepseek_r1" in mine.flags
    assert not any(f == "--reasoning-parser qwen3" for f in mine.flags)
    assert plain.command.startswith("vllm serve ")


def test_plan_details_carry_the_heads_for_tensor_parallel_rules(apron_home_with_facts):
    shape = plan_for().to_json()["details"]["model_shape"]
    assert shape == {"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 151936}
