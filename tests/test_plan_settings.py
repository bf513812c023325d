"""Engine settings resolved as the release does: batch defaults, capture sizes, max_model_len, dtype."""

from __future__ import annotations

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import load_facts
from apron.hardware import resolve_gpu
from apron.plan.model_config import ModelConfig
from apron.plan.settings import UserSettings, capture_sizes, resolve_settings
from conftest import snapshot_document, snapshot_path


def settings_for(name, gpu, version="0.33.0", **user):
    ckpt = load_snapshot(snapshot_path(name))
    return resolve_settings(
        ckpt, ModelConfig.from_config(ckpt.config), resolve_gpu(gpu), load_facts(version), UserSettings(**user)
    )


@pytest.mark.parametrize(
    "gpu,seqs,tokens",
    [
        ("H100", 1024, 8192),  # >= 70 GiB and not an A100
        ("H200", 1024, 8192),  # 139.8 GiB: still below the 160 GiB tier
        ("B200", 1024, 16384),  # >= 160 GiB
        ("A100", 256, 2048),  # >= 70 GiB but the name holds "a100"
        ("4090", 256, 2048),
        ("L4", 256, 2048),
    ],
)
def test_batch_defaults_by_memory_class_and_name(apron_home_with_facts, gpu, seqs, tokens):
    s = settings_for("Qwen/Qwen3-8B", gpu)
    assert (s.max_num_seqs, s.max_num_batched_tokens) == (seqs, tokens)


def test_batch_default_clamped_by_short_max_model_len(apron_home_with_facts):
    s = settings_for("Qwen/Qwen3-8B", "H100", max_model_len=4, max_num_seqs=2)
    assert s.max_num_batched_tokens == 8  # min(max_num_seqs x max_model_len, default)


def test_capture_sizes_follow_set_cudagraph_sizes(apron_home_with_facts):
    facts = load_facts("0.29.0")
    sizes = capture_sizes(resolve_gpu("4090"), facts, 256, 2048)
    assert sizes[:4] == [1, 2, 4, 8] and sizes[-1] == 512 and len(sizes) == 51
    assert len([s for s in sizes if s <= 256]) == 35
    assert capture_sizes(resolve_gpu("B200"), facts, 1024, 16384)[-1] == 1024  # SM100 ceiling
    assert capture_sizes(resolve_gpu("4090"), facts, 256, 100)[-1] == 100  # max_num_batched_tokens caps


def test_gpt_oss_capture_ceiling_hook(apron_home_with_facts):
    s = settings_for("openai/gpt-oss-20b", "4090", version="0.30.0", max_model_len=640)
    assert s.cudagraph_capture_sizes[-1] == 1024 and len(s.cudagraph_capture_sizes) == 83


def test_eager_has_no_capture_sizes(apron_home_with_facts):
    assert settings_for("Qwen/Qwen3-8B", "H100", enforce_eager=True).cudagraph_capture_sizes == ()


@pytest.mark.parametrize(
    "name,expected",
    [
        ("Qwen/Qwen3-8B", 40960),
        ("meta-llama/Llama-3.1-8B-Instruct", 131072),  # llama3 rope: no factor
        ("openai/gpt-oss-20b", 131072),
        ("google/gemma-2-2b-it", 8192),
        ("microsoft/phi-4", 16384),
        ("state-spaces/mamba-2.8b-hf", 2048),  # no length key: vLLM assumes 2048
    ],
)
def test_derived_max_model_len(apron_home_with_facts, name, expected):
    assert settings_for(name, "H100").max_model_len == expected


def test_linear_rope_factor_scales_the_length(apron_home_with_facts):
    doc = snapshot_document("meta-llama/Llama-3.1-8B-Instruct")
    doc["files"]["config.json"]["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
    ckpt = load_snapshot("x.json", document=doc)
    s = resolve_settings(
        ckpt, ModelConfig.from_config(ckpt.config), resolve_gpu("H100"), load_facts("0.33.0"), UserSettings()
    )
    assert s.max_model_len == 262144


def test_too_long_max_model_len_is_the_engines_refusal(apron_home_with_facts):
    s = settings_for("mistralai/Mistral-7B-Instruct-v0.3", "4090", version="0.29.0", max_model_len=999999)
    problem = s.problems[0]
    assert problem.label == "proven_constraint"
    # the exact text of a real failed boot in tests/fixtures/boots-training.json
    assert problem.message.startswith(
        "User-specified max_model_len (999999) is greater than the derived "
        "max_model_len (max_position_embeddings=32768.0 or model_max_length=None "
        "in model's config.json)."
    )


def test_float16_refused_for_gemma2(apron_home_with_facts):
    s = settings_for("google/gemma-2-2b-it", "4090", dtype="float16")
    assert "The model type 'gemma2' does not support float16" in s.problems[0].message


def test_auto_dtype_downcasts_float32_and_bf16_needs_ampere(apron_home_with_facts):
    assert settings_for("state-spaces/mamba-2.8b-hf", "4090").dtype == "bfloat16"
    assert settings_for("state-spaces/mamba-2.8b-hf", "T4").dtype == "float16"
    assert settings_for("Qwen/Qwen3-8B", "T4").dtype == "float16"  # bf16 config, no bf16 below cc 8.0
    refused = settings_for("Qwen/Qwen3-8B", "T4", dtype="bfloat16")
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in refused.problems[0].message
