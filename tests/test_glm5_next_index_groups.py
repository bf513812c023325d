"""GLM-5.3-Flash's sparse MLA index groups: one per MLA layer, made at construction and counted with
the weights (plan/kv/families/glm5_next.py index_group_buffers).

GLM-5.3-Flash passes no index_group_builder to its MLA layers, so each layer's SparseMLACommonImpl
builds its own over the model's top-k buffer [T, 2176] int32 and gets a group of [T + 1, 2176]
physical top-k indices and [T + 1] valid counts (0.30 also arange(T) request ids): 11 MLA layers,
T = max_num_batched_tokens (8,192 by default on an H200, 16,384 on a B200, engine/arg_utils.py
0.30.0:2730-2749). The byte counts below are worked by hand from those shapes and the caching
allocator's rules (a request of 20 MiB or more keeps its whole 2 MiB-rounded segment; the small pool
rounds to 512 B)."""

from __future__ import annotations

import json
import subprocess

import pytest

from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot
from engine_env import vllm_python

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


@pytest.mark.parametrize("release", ["0.32.0", "0.30.0"])
def test_vllm_builder_makes_these_tensors(release, apron_home_with_facts):
    """vLLM's own SparseMLAIndexGroupBuilder (the CPU build of RELEASE), one per layer as
    SparseMLACommonImpl makes it, over a [T, width] top-k buffer: the tensors it allocates are the
    plan's buffers, shape for shape."""
    from apron.engine.facts import load_facts
    from apron.plan.kv.families.base import FamilyContext
    from apron.plan.kv.families.glm5_next import index_group_buffers
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import resolve_settings

    tokens, layers = 256, MLA_LAYERS
    script = (
        "import json, sys, torch\n"
        "from vllm.v1.attention.backends.mla.index_group import SparseMLAIndexGroupBuilder\n"
        f"logical = torch.empty({tokens}, {WIDTH}, dtype=torch.int32)\n"
        "made = []\n"
        f"for _ in range({layers}):\n"
        "    group, _ = SparseMLAIndexGroupBuilder(logical).register_layer(True, None)\n"
        "    made += [[n, list(v.shape), v.element_size()] for n, v in sorted(vars(group).items())\n"
        "             if isinstance(v, torch.Tensor) and v is not logical]\n"
        "print(json.dumps(made))\n"
    )
    out = subprocess.run([vllm_python(release), "-c", script], capture_output=True, text=True, timeout=600, check=True)
    made = json.loads(out.stdout.strip().splitlines()[-1])
    checkpoint = loaded_snapshot(GLM_FLASH)
    config, facts = ModelConfig.from_config(checkpoint.config), load_facts(release)
    user = UserSettings(tensor_parallel_size=4, language_model_only=True, max_num_batched_tokens=tokens)
    settings = resolve_settings(checkpoint, config, resolve_gpu("H200"), facts, user)
    ctx = FamilyContext(checkpoint.architecture, config, settings, facts)
    planned = sorted((list(b.shape), b.dtype_bytes) for b in index_group_buffers(ctx, WIDTH) for _ in range(b.count))
    assert sorted((shape, size) for _, shape, size in made) == planned
