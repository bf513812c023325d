"""DeepSeek sparse attention's index groups (GLM-5.3 non-Flash, DeepSeek-V3.2): made at construction
by the model's one shared SparseMLAIndexGroupBuilder and counted with the weights
(plan/kv/families/dsa.py index_group_buffers).

The builder rows are min(max_num_batched_tokens, max_num_seqs x 1) (no speculative decoding), the
width is index_topk (2,048), and a group is made on each layer with its own indexer: GLM-5.3 has 78
layers, index_topk_freq 4 and index_skip_topk_offset 3, so layers 0, 1, 2 and 6, 10, ..., 74 (21).
Each group holds [rows + 1, 2048] int32 physical top-k indices and [rows + 1] int32 valid counts, and
on 0.30 also arange(rows) int32 request ids. The byte counts below are worked by hand from those
shapes and the caching allocator's rules (requests of 1-10 MiB are split off 20 MiB segments and keep
their 512 B-rounded size; the small pool rounds to 512 B; 20 MiB or more keeps a 2 MiB-rounded
segment). The shapes are checked against the model vLLM builds itself
(tests/engine/vllm_construction_side.py)."""

from __future__ import annotations

import json
import math

import pytest

from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot
from engine_env import built_non_parameters, persistent_buffers

GLM = "zai-org/GLM-5.3"
MIB = 2**20
INDEXER_LAYERS = 21
LAYERS = 78
CU_SEQLENS_8192 = 33_280  # FLASH_ATTN_MLA_SPARSE's arange(8,193) int32, 32,772 B, 512 B-rounded
TOPK_BUFFER_8192 = 8192 * 2048 * 4  # the [T, index_topk] top-k buffer at T 8,192: 64 MiB exactly


def construction_bytes(engine: str, gpu: str = "H200", tp: int = 8, **user) -> int:
    plan = plan_checkpoint(
        loaded_snapshot(GLM), resolve_gpu(gpu), UserSettings(tensor_parallel_size=tp, **user), engine
    )
    groups = {g["group"]: g["bytes_per_gpu"] for g in plan.details["weights"]["groups"]}
    return groups["buffers made at construction"]


def test_h200_defaults_hold_a_group_per_indexer_layer_of_max_num_seqs_rows(apron_home_with_facts):
    """H200 defaults: T 8,192 and max_num_seqs 1,024, so 1,024 rows. Physical indices 1,025 x 2,048
    x 4 = 8,396,800 B (a multiple of 512, under 10 MiB: split off a 20 MiB segment at that size);
    valid counts 4,100 B -> 4,608 B; request ids (0.30) 4,096 B. From 0.31 the H200's bf16 backend,
    FLASH_ATTN_MLA_SPARSE, also keeps arange(T + 1) int32 per layer: 32,772 B -> 33,280 B x 78."""
    assert construction_bytes("0.30.0") == TOPK_BUFFER_8192 + INDEXER_LAYERS * (8_396_800 + 4_608 + 4_096)
    on_031 = construction_bytes("0.31.0")
    assert on_031 == TOPK_BUFFER_8192 + INDEXER_LAYERS * (8_396_800 + 4_608) + LAYERS * CU_SEQLENS_8192
    assert construction_bytes("0.33.0") == on_031 == 246_134_272


def test_029_has_no_index_groups(apron_home_with_facts):
    assert construction_bytes("0.29.0") == TOPK_BUFFER_8192


def test_the_rows_follow_max_num_seqs_until_max_num_batched_tokens(apron_home_with_facts):
    """128 sequences: 129 x 8,192 B = 1,056,768 B (over 1 MiB: large pool, its own 512 B-rounded
    size), counts 516 -> 1,024 B. T 512 caps the rows at 512: 513 x 8,192 B = 4,202,496 B, counts
    2,052 -> 2,560 B, the top-k buffer 512 x 2,048 x 4 = 4 MiB and cu_seqlens 2,052 -> 2,560 B."""
    groups_128 = INDEXER_LAYERS * (1_056_768 + 1_024)
    assert construction_bytes("0.31.0", max_num_seqs=128) == TOPK_BUFFER_8192 + groups_128 + LAYERS * CU_SEQLENS_8192
    small = construction_bytes("0.31.0", max_num_batched_tokens=512, max_num_seqs=512)
    assert small == 4 * MIB + INDEXER_LAYERS * (4_202_496 + 2_560) + LAYERS * 2_560


def test_the_groups_do_not_split_with_tensor_parallelism(apron_home_with_facts):
    assert construction_bytes("0.32.0", gpu="B200", tp=8) == construction_bytes("0.32.0", gpu="B200", tp=4)


MODEL_CLASS = "vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM"  # both architectures on CUDA


@pytest.mark.parametrize("release,gpu", [("0.30.0", "H200"), ("0.32.0", "H200"), ("0.32.0", "B200")])
def test_vllm_built_model_holds_exactly_these_tensors_besides_its_parameters(release, gpu, apron_home_with_facts):
    """vLLM builds GLM-5.3 itself (its CPU build of RELEASE, the CUDA model class, the sparse MLA
    backend the plan picks for the GPU, on the meta device) and lists every tensor the model holds
    that is not a parameter: they are the plan's construction buffers, shape for shape, besides the
    text rotary cache (the MoE experts are stand-ins there). 128 sequences, so the group rows (128)
    differ from T (2,048): a plan that sized the groups by T would fail here."""
    from apron.engine.facts import load_facts
    from apron.plan.kv.layouts import build_layout
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import resolve_settings
    from apron.plan.weights import rotary_cache_bytes

    checkpoint = loaded_snapshot(GLM)
    config, facts = ModelConfig.from_config(checkpoint.config), load_facts(release)
    user = UserSettings(tensor_parallel_size=8, max_model_len=65536, max_num_batched_tokens=2048, max_num_seqs=128)
    capability = resolve_gpu(gpu).compute_capability
    settings = resolve_settings(checkpoint, config, resolve_gpu(gpu), facts, user)
    layout = build_layout(
        checkpoint.architecture, config, settings, facts, capability=capability, is_attention_free=False
    )
    planned = persistent_buffers(layout)
    case = {
        "config": json.loads(json.dumps(checkpoint.config)),
        "model_class": MODEL_CLASS,
        "tp": 8,
        "capability": list(capability),
        "kv_cache_dtype": "auto",
        "dtype": "bfloat16",
        "max_model_len": settings.max_model_len,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "max_num_seqs": settings.max_num_seqs,
        "backends": {kind: layout.backend.backend.name for kind in ("dense", "mla", "sparse")},
    }
    held = built_non_parameters(release, case)
    groups = [name for name, _, _ in held if "index_group" in name]
    assert len(groups) == (3 if release == "0.30.0" else 2) * INDEXER_LAYERS, groups
    # The text rotary cache is counted with the weights (its own line), not with these buffers.
    is_rope = [name.endswith("rotary_emb.cos_sin_cache") for name, _, _ in held]
    ropes = [math.prod(shape) * size for (_, shape, size), rope in zip(held, is_rope, strict=True) if rope]
    assert ropes == [rotary_cache_bytes(config, "bfloat16")[0]]
    others = [(shape, size) for (_, shape, size), rope in zip(held, is_rope, strict=True) if not rope]
    assert sorted(others) == planned
