"""GLM-5.3-Flash's sparse MLA index groups: one per MLA layer, made at construction and counted with
the weights (plan/kv/families/glm5_next.py index_group_buffers).

GLM-5.3-Flash passes no index_group_builder to its MLA layers, so each layer's SparseMLACommonImpl
builds its own over the model's top-k buffer [T, 2176] int32 and gets a group of [T + 1, 2176]
physical top-k indices and [T + 1] valid counts (0.30 also arange(T) request ids): 11 MLA layers,
T = max_num_batched_tokens (8,192 by default on an H200, 16,384 on a B200, engine/arg_utils.py
0.30.0:2730-2749). The byte counts below are worked by hand from those shapes and the caching
allocator's rules (a request of 20 MiB or more keeps its whole 2 MiB-rounded segment; the small pool
rounds to 512 B). The shapes are checked against the model vLLM builds itself: every tensor it holds
that is not a parameter (tests/engine/vllm_construction_side.py) is one of the plan's construction
buffers, and none is missing."""

from __future__ import annotations

import json

import pytest

from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot
from engine_env import built_non_parameters, persistent_buffers

GLM_FLASH = "zai-org/GLM-5.3-Flash"
MIB = 2**20
# The top-k buffer's width: round_up(index_topk 2048 + index_kpool 4 - 1, 128) (nvidia/model.py 0.30.0:636-650).
WIDTH = 2176
MLA_LAYERS = 11


def construction(engine: str, gpu: str, tp: int = 4, **user) -> dict[str, int]:
    settings = UserSettings(tensor_parallel_size=tp, language_model_only=True, **user)
    plan = plan_checkpoint(loaded_snapshot(GLM_FLASH), resolve_gpu(gpu), settings, engine)
    groups = {g["group"]: g["bytes_per_gpu"] for g in plan.details["weights"]["groups"]}
    return {"bytes": groups["buffers made at construction"], "basis": plan.quantities["weights_bytes_per_gpu"].basis}


def test_h200_defaults_on_030_hold_one_group_per_mla_layer(apron_home_with_facts):
    """T 8,192: the top-k buffer 8,192 x 2,176 x 4 = 71,303,168 B (34 segments exactly); each layer's
    physical indices 8,193 x 2,176 x 4 = 71,311,872 B, just over 34 segments, so 35 x 2 MiB =
    73,400,320 B; its valid counts 32,772 B -> 33,280 B and request ids 32,768 B."""
    got = construction("0.30.0", "H200")
    per_layer = 73_400_320 + 33_280 + 32_768
    assert got["bytes"] == 71_303_168 + MLA_LAYERS * per_layer == 879_433_216
    assert "sparse MLA index group: physical top-k indices" in got["basis"]


def test_b200_defaults_double_them_and_031_drops_the_request_ids(apron_home_with_facts):
    """B200: T 16,384 (>= 160 GiB), so physical indices 16,385 x 2,176 x 4 = 142,615,040 B -> 69 x 2
    MiB = 144,703,488 B a layer, valid counts 65,540 -> 66,048 B, request ids 65,536 B; the top-k
    buffer 142,606,336 B (68 segments exactly); and the 128 MiB CUTLASS-MLA module global of SM100."""
    on_030 = construction("0.30.0", "B200")["bytes"]
    assert on_030 == 142_606_336 + MLA_LAYERS * (144_703_488 + 66_048 + 65_536) + 128 * MIB
    assert on_030 - construction("0.31.0", "B200")["bytes"] == MLA_LAYERS * 65_536
    # at the H200's T the B200 holds the H200's groups: the term follows T, not the capability
    assert construction("0.30.0", "B200", max_num_batched_tokens=8192)["bytes"] == 879_433_216 + 128 * MIB


def test_the_groups_do_not_split_with_tensor_parallelism(apron_home_with_facts):
    assert construction("0.30.0", "B200", tp=2)["bytes"] == construction("0.30.0", "B200", tp=4)["bytes"]


# The CUDA model class (0.30 keeps it in nvidia/, 0.31+ in common/) and the sparse MLA backend per GPU.
MODEL_CLASS = "vllm.models.glm5next.{}.model.Glm5NextForConditionalGeneration"
BACKENDS = {(9, 0): "FLASHINFER_MLA_SPARSE_SM90", (10, 0): "FLASHINFER_MLA_SPARSE"}


@pytest.mark.parametrize("release,capability", [("0.30.0", (9, 0)), ("0.32.0", (10, 0))])
def test_vllm_built_model_holds_exactly_these_tensors_besides_its_parameters(
    release, capability, apron_home_with_facts
):
    """vLLM builds GLM-5.3-Flash itself (its CPU build of RELEASE, the CUDA model class, the sparse
    MLA backend of the GPU, on the meta device: tests/engine/vllm_build.py) and lists every tensor the
    model holds that is not a parameter; they are the plan's construction buffers, shape for shape
    (the MoE experts are not built there: their kernels' tensors are outside this check)."""
    from apron.engine.facts import load_facts
    from apron.plan.kv.layouts import build_layout
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import resolve_settings

    checkpoint = loaded_snapshot(GLM_FLASH)
    config, facts = ModelConfig.from_config(checkpoint.config), load_facts(release)
    user = UserSettings(tensor_parallel_size=4, language_model_only=True, max_model_len=65536)
    settings = resolve_settings(checkpoint, config, resolve_gpu("H200"), facts, user)
    layout = build_layout(
        checkpoint.architecture, config, settings, facts, capability=capability, is_attention_free=False
    )
    planned = persistent_buffers(layout)
    case = {
        "config": json.loads(json.dumps(checkpoint.config)),
        "model_class": MODEL_CLASS.format("common" if facts.at_least("0.31.0") else "nvidia"),
        "tp": 4,
        "capability": list(capability),
        "kv_cache_dtype": "auto",
        "dtype": "bfloat16",
        "language_model_only": True,
        "max_model_len": settings.max_model_len,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "backends": {kind: BACKENDS[capability] for kind in ("dense", "mla", "sparse")},
    }
    held = built_non_parameters(release, case)
    assert sum("index_group" in name for name, _, _ in held) == (3 if release == "0.30.0" else 2) * MLA_LAYERS
    assert sorted((shape, size) for _, shape, size in held) == planned
