"""The decode-speed bound (plan/decode.py) and the catalog figures it rests on (hardware/gpus.json)."""

from __future__ import annotations

import pytest

from apron.checkpoint import load_checkpoint
from apron.hardware import all_gpus, resolve_gpu
from apron.plan.decode import decode_bound, expert_share, kv_bytes_per_request, weights_read_bytes
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings


def _plan(model: str, gpu: str, tp: int = 1, context: int = 8192):
    checkpoint = load_checkpoint(model)
    plan = plan_checkpoint(checkpoint, resolve_gpu(gpu), UserSettings(tensor_parallel_size=tp, max_model_len=context))
    return plan, ModelConfig.from_config(checkpoint.config)


def test_every_catalog_gpu_has_a_sourced_bandwidth_and_interconnect():
    for gpu in all_gpus():
        assert gpu.memory_bandwidth_bytes_per_second and gpu.memory_bandwidth_bytes_per_second >= 100e9, gpu.name
        assert gpu.memory_bandwidth_basis and gpu.interconnect is not None and gpu.interconnect.basis, gpu.name
    assert resolve_gpu("4090").interconnect.kind == "pcie_host"  # consumer cards: no peer-to-peer
    assert resolve_gpu("H100").interconnect.kind == "nvswitch"
    nvl = resolve_gpu("H100 NVL").interconnect
    assert nvl.for_count(2)[0] == "NVLink bridge" and nvl.for_count(4)[0] == "PCIe P2P"


def test_expert_share_of_a_batch():
    assert expert_share(1, 128, 4) == pytest.approx(4 / 128)
    assert expert_share(1000, 128, 4) == pytest.approx(1.0)
    assert expert_share(16, 1, 1) == 1.0
    assert expert_share(8, 64, 6) == pytest.approx(1 - (58 / 64) ** 8)


def test_a_dense_step_reads_the_weights_but_not_the_embedding_gather():
    plan, config = _plan("Qwen/Qwen3-8B", "H100")
    groups = {g["group"]: g["bytes_per_gpu"] for g in plan.details["weights"]["groups"]}
    read = weights_read_bytes(plan, config, 16)
    assert read == sum(groups.values()) - groups["embedding"] - groups.get("allocator rounding", 0) - groups.get(
        "rotary cos/sin cache", 0
    )
    tied, tied_config = _plan("Qwen/Qwen3-0.6B", "H100")  # tied: the embedding table is the LM head
    tied_groups = {g["group"]: g["bytes_per_gpu"] for g in tied.details["weights"]["groups"]}
    assert "lm_head" not in tied_groups
    assert weights_read_bytes(tied, tied_config, 16) >= tied_groups["embedding"]


def test_moe_reads_the_experts_a_batch_touches():
    plan, config = _plan("openai/gpt-oss-120b", "H100")
    experts = next(g["bytes_per_gpu"] for g in plan.details["weights"]["groups"] if g["group"] == "experts")
    one, many = weights_read_bytes(plan, config, 1), weights_read_bytes(plan, config, 512)
    assert many - one == pytest.approx(experts * (expert_share(512, 128, 4) - expert_share(1, 128, 4)), rel=1e-6)


def test_the_bound_adds_memory_and_all_reduce_time():
    plan, config = _plan("Qwen/Qwen3-8B", "4090", tp=4)
    gpu = resolve_gpu("4090")
    bound, note = decode_bound(plan, config, gpu, 16)
    assert note is None and bound.interconnect == "PCIe, no P2P"
    kv = kv_bytes_per_request(plan)
    assert bound.kv_read_bytes == 16 * kv
    assert bound.memory_seconds == pytest.approx((bound.weights_read_bytes + 16 * kv) / 1008e9)
    # 36 layers x 2 all-reduces x 2(4-1)/4 x 16 x 4096 x 2 bytes, over PCIe 4.0's 32 GB/s one way
    assert bound.allreduce_bytes == round(36 * 2 * 1.5 * 16 * 4096 * 2)
    assert bound.allreduce_seconds == pytest.approx(bound.allreduce_bytes / 32e9)
    assert bound.tokens_per_second_per_user == pytest.approx(1 / (bound.memory_seconds + bound.allreduce_seconds))
    single, _ = _plan("Qwen/Qwen3-8B", "H100")
    alone, _ = decode_bound(single, config, resolve_gpu("H100"), 16)
    assert alone.allreduce_bytes == 0 and alone.interconnect == "single GPU"


def test_no_bound_without_a_bandwidth():
    plan, config = _plan("Qwen/Qwen3-8B", "H100")
    custom = resolve_gpu("my-gpu", memory_bytes=80 * 2**30, capability="9.0")
    bound, note = decode_bound(plan, config, custom, 4)
    assert bound is None and "no memory bandwidth" in note
