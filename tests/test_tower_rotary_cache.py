"""The vision tower's own rotary cos/sin cache (plan/towers.py rotary_cache_shape): a get_rope buffer
made at construction, on every GPU, counted with the tower's weights when the tower is built.

GLM-5.3-Flash's tower (hidden 1,024, 16 heads: head 64, half rotated: 32 wide) builds it over 8,192
positions on 0.30 and 0.31 and over the text's max_position_embeddings (1,048,576) from 0.32: in
bf16, 8,192 x 32 x 2 = 524,288 B against 1,048,576 x 32 x 2 = 67,108,864 B (64 MiB). Qwen3.8-Flash-Next's
Qwen3-VL tower (hidden 1,152, 16 heads: head 72, 36 wide) over 8,192 on every release: 589,824 B. The
shapes are checked against the towers vLLM builds itself (tests/engine/vllm_construction_side.py)."""

from __future__ import annotations

import json

import pytest

from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot
from engine_env import built_non_parameters

GLM_FLASH = "zai-org/GLM-5.3-Flash"
QWEN_NEXT = "Qwen/Qwen3.8-Flash-Next"


def tower_bytes(name: str, engine: str, tp: int = 4, **user) -> int:
    plan = plan_checkpoint(
        loaded_snapshot(name), resolve_gpu("H200"), UserSettings(tensor_parallel_size=tp, **user), engine
    )
    groups = {g["group"]: g for g in plan.details["weights"]["groups"]}
    return groups["vision/audio tower"]["bytes_per_gpu"] if "vision/audio tower" in groups else 0


def test_glm5_flash_tower_cache_grows_to_the_text_positions_on_032(apron_home_with_facts):
    grown = tower_bytes(GLM_FLASH, "0.32.0") - tower_bytes(GLM_FLASH, "0.31.0")
    assert grown == 67_108_864 - 524_288
    assert tower_bytes(GLM_FLASH, "0.33.0") == tower_bytes(GLM_FLASH, "0.32.0")
    assert tower_bytes(GLM_FLASH, "0.30.0") == tower_bytes(GLM_FLASH, "0.31.0")


def test_the_cache_is_whole_on_every_gpu(apron_home_with_facts):
    """The tower's weights split under TP; the cache does not: what 0.32 adds is the same at TP 2,
    4 and 8."""
    plan = plan_checkpoint(
        loaded_snapshot(GLM_FLASH), resolve_gpu("H200"), UserSettings(tensor_parallel_size=4), "0.32.0"
    )
    assert "rotary cos/sin cache [1048576, 32], whole on every GPU" in plan.quantities["weights_bytes_per_gpu"].basis
    for tp in (2, 4, 8):
        grown = tower_bytes(GLM_FLASH, "0.32.0", tp=tp) - tower_bytes(GLM_FLASH, "0.31.0", tp=tp)
        assert grown == 67_108_864 - 524_288, tp


def test_without_the_tower_there_is_no_cache(apron_home_with_facts):
    assert tower_bytes(GLM_FLASH, "0.32.0", language_model_only=True) == 0


def test_qwen3_vl_tower_keeps_8192_positions(apron_home_with_facts):
    with_tower = tower_bytes(QWEN_NEXT, "0.32.0")
    plan = plan_checkpoint(
        loaded_snapshot(QWEN_NEXT), resolve_gpu("H200"), UserSettings(tensor_parallel_size=4), "0.32.0"
    )
    assert "rotary cos/sin cache [8192, 36]" in plan.quantities["weights_bytes_per_gpu"].basis
    assert with_tower == tower_bytes(QWEN_NEXT, "0.30.0")  # the same tower and cache on 0.30


CASES = [  # (model, release, CUDA model class, backend)
    (
        GLM_FLASH,
        "0.30.0",
        "vllm.models.glm5next.nvidia.model.Glm5NextForConditionalGeneration",
        "FLASHINFER_MLA_SPARSE_SM90",
    ),
    (
        GLM_FLASH,
        "0.32.0",
        "vllm.models.glm5next.common.model.Glm5NextForConditionalGeneration",
        "FLASHINFER_MLA_SPARSE_SM90",
    ),
    (QWEN_NEXT, "0.32.0", "vllm.models.qwen4_exp.nvidia.model.Qwen4ExpForConditionalGeneration", "FLASH_ATTN"),
]


@pytest.mark.parametrize("name,release,model_class,backend", CASES, ids=["glm5-flash-030", "glm5-flash-032", "qwen3.8"])
def test_vllm_built_tower_holds_exactly_this_cache_besides_its_parameters(
    name, release, model_class, backend, apron_home_with_facts
):
    """vLLM builds the model with its tower (its CPU build of RELEASE, the CUDA class, on the meta
    device): the tower's only tensor that is not a parameter is the rotary cache the plan counts."""
    from apron.engine.facts import load_facts
    from apron.plan.model_config import ModelConfig
    from apron.plan.towers import rotary_cache_shape, tower_family

    checkpoint = loaded_snapshot(name)
    config = ModelConfig.from_config(checkpoint.config)
    shape = rotary_cache_shape(tower_family(checkpoint.architecture), config, load_facts(release).version)
    case = {
        "config": json.loads(json.dumps(checkpoint.config)),
        "model_class": model_class,
        "tp": 4,
        "capability": [9, 0],
        "kv_cache_dtype": "auto",
        "dtype": "bfloat16",
        "language_model_only": False,
        "max_model_len": 65536,
        "max_num_batched_tokens": 2048,
        "backends": {kind: backend for kind in ("dense", "mla", "sparse")},
    }
    held = built_non_parameters(release, case)
    # Tensors first reached through the tower's modules, not through the forward context they share.
    tower = [[n, s, e] for n, s, e in held if n.startswith("model.visual.") and "static_forward_context" not in n]
    assert tower == [["model.visual.rotary_pos_emb.cos_sin_cache", list(shape), 2]]
