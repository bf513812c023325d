"""The allocator blocks that re-laid weights keep (plan/weights_repack.py), against traces worked by
hand from CUDACachingAllocator's rules under vLLM's load-time max_split_size_mb:20:
- a request under 10 MiB gets a 20 MiB segment; one of 20 MiB or more gets its size rounded to 2 MiB;
- best fit: the smallest free block that holds it; a request under 20 MiB may not take a block of
  20 MiB or more, and one of 20 MiB or more only a block smaller than request + 20 MiB (never split);
- a large-pool block is split only when more than 1 MiB would remain."""

from __future__ import annotations

from apron.checkpoint.snapshot import load_snapshot
from apron.plan.allocator import MIB
from apron.plan.model_config import ModelConfig
from apron.plan.weights import WeightSettings, estimate_weights, marlin_fp8_repack_blocks
from apron.plan.weights_observed import HOPPER_BLOCK_FP8_RESIDUAL_BYTES
from apron.plan.weights_repack import (
    MacheteAwqLinear,
    MarlinFp8Linear,
    machete_awq_events,
    marlin_fp8_events,
    repack_block_bytes,
)
from conftest import snapshot_path


def test_marlin_fp8_repack_keeps_a_whole_remainder():
    """Two block-FP8 linears, 3072 x 3072 (9 MiB) and 4096 x 2432 (9.5 MiB), repacked by Marlin
    (scales and their copies are small-pool blocks, apart from the large pool):
    built:  W1 9 in new segment A [W1 9 | 11]; W2 9.5 from A's 11 (1.5 left, split) [W1 | W2 | 1.5].
    W1:     T1 9: nothing free holds it -> new segment B [T1 9 | 11]; R1 9 from B's 11 (2 left, split);
            W1 freed, T1 freed: A [9 | W2 | 1.5], B [9 | R1 | 2].
    W2:     T2 9.5: no free block of 9.5 -> new segment C [T2 9.5 | 10.5]; R2 9.5 from C's 10.5 leaves
            exactly 1 MiB, not more: R2 keeps the whole 10.5 MiB block.
    So memory_allocated holds R1 9 + R2 10.5 MiB where each tensor's own block is 9 and 9.5: 1 MiB more."""
    w1, w2 = (
        MarlinFp8Linear("w1", "s1", 3072, 3072, 3072, 3072, 128, 2),
        MarlinFp8Linear("w2", "s2", 4096, 2432, 4096, 2432, 128, 2),
    )
    construction = [("w1", 3072 * 3072), ("s1", 24 * 24 * 4), ("w2", 4096 * 2432), ("s2", 32 * 19 * 4)]
    process = marlin_fp8_events(w1, 0) + marlin_fp8_events(w2, 1)
    assert repack_block_bytes(construction, process) == 1 * MIB


def test_machete_awq_prepack_takes_a_cached_transient_block_whole():
    """Two AWQ linears on Machete: 4096 x 4096 (qweight 8 MiB, groups of 128) then 4096 x 24576
    (qweight 48 MiB, one group); every zero-point and scale tensor is 1 MiB or less (small pool).
    built:  o 8 in new segment A [8 | 12]; gu 48 in its own 48 MiB segment E.
    o:      the unpack transients are [K, N/8, 8] int32 = 64 MiB each: new segments B and C, each
            reused by the next one; the standard qweight 8 from A's 12 (split); the old qweight
            freed; the transposed copy 8 takes its 8 MiB hole; the prepacked 8 may not take B or C
            (20 MiB or more for a request under 20 MiB) -> new segment D, split [8 | 12].
    gu:     its 384 MiB transients get new segments; the standard qweight 48 takes B (64 < 48 + 20),
            the copy takes E's 48, and the prepacked 48 takes C whole: 64 MiB held for 48.
    So 16 MiB more than each kept tensor's own block."""
    o = MacheteAwqLinear("o.qw", "o.qz", 4096, 4096, 128, 2)
    gu = MacheteAwqLinear("gu.qw", "gu.qz", 4096, 24576, 4096, 2)
    construction = [
        ("o.qw", 4096 * 4096 // 2),
        ("o.qz", 32 * 4096 // 2),
        ("o.s", 32 * 4096 * 2),
        ("gu.qw", 4096 * 24576 // 2),
        ("gu.qz", 24576 // 2),
        ("gu.s", 24576 * 2),
    ]
    process = machete_awq_events(o, 0) + machete_awq_events(gu, 1)
    assert repack_block_bytes(construction, process) == 16 * MIB


def test_awq_events_follow_the_conversions_arithmetic():
    """The sizes the AWQ conversion allocates, from auto_awq.py's shapes: [K, N/8, 8] int32 is 8x the
    qweight; the standard qweight [K/8, N] int32 equals it; Machete's zero points [K/g, N] in fp16."""
    k, n, g = 4096, 4096, 128
    sizes = {
        e.tag.split(":")[1]: e.num_bytes
        for e in machete_awq_events(MacheteAwqLinear("q", "z", k, n, g, 2), 0)
        if e.op == "alloc"
    }
    qweight, zeros = k * n // 8 * 4, k // g * n // 8 * 4
    assert sizes["q1"] == sizes["q3"] == 8 * qweight and sizes["qstd"] == sizes["prepacked"] == qweight
    assert sizes["zT"] == 8 * zeros and sizes["unpacked"] == k // g * n * 4 and sizes["zp"] == k // g * n * 2


def _fp8(capability):
    ckpt = load_snapshot(snapshot_path("Qwen/Qwen3-0.6B-FP8"))
    config = ModelConfig.from_config(ckpt.config)
    return ckpt, config, WeightSettings(1, "bfloat16", capability, release="0.29.0")


def test_block_fp8_repack_only_where_marlin_runs():
    """On cc 8.9 block FP8 takes Marlin and its repack blocks join the weights; on 9.0 DeepGEMM /
    CUTLASS keep the loaded tensors (no re-layout, nothing replayed)."""
    ada = estimate_weights(*_fp8((8, 9)))
    hopper = estimate_weights(*_fp8((9, 0)))
    blocks = marlin_fp8_repack_blocks(*_fp8((8, 9)))
    assert 0 < blocks < 64 * MIB
    assert any("Marlin's repack" in note for note in ada.notes)
    assert not any("repack" in note for note in hopper.notes)
    # Ada - Hopper: the expanded scales, 28 layers of [K/128, N] bf16 (qkv 8 x 4096, o 16 x 1024,
    # gate_up 8 x 6144, down 24 x 1024), less the fp32 block scales they replace, plus the blocks;
    # Hopper's observed load residual (plan/weights_observed.py) is no layout and is taken out.
    expanded = 28 * 2 * (8 * 4096 + 16 * 1024 + 8 * 6144 + 24 * 1024)
    block_scales = 28 * 4 * (32 * 8 + 8 * 16 + 48 * 8 + 8 * 24)
    rounding = 28 * (1024 - 768)  # Hopper's fp32 scales in 512-byte multiples: down's 768 takes 1024
    hopper_layouts = hopper.bytes_per_gpu - hopper.observed_bytes
    assert hopper.observed_bytes == HOPPER_BLOCK_FP8_RESIDUAL_BYTES and ada.observed_bytes == 0
    assert ada.bytes_per_gpu - hopper_layouts == expanded - block_scales - rounding + blocks
