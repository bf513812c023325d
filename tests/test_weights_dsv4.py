"""DeepSeek-V4 / V4.1 weights per GPU: the rotary caches, the float32 parameters and Humming's expert
layout, each against the arithmetic of vLLM's (and humming-kernels') own code, done by hand here."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.plan.model_config import ModelConfig
from apron.plan.weights import WeightSettings, estimate_weights
from apron.plan.weights_dsv4 import rotary_caches
from conftest import snapshot_path

DSV4, DSV41 = "deepseek-ai/DeepSeek-V4-Flash-0731", "deepseek-ai/DeepSeek-V4.1-Flash"


def _estimate(ckpt, tp=4, capability=(9, 0), release="0.30.0"):
    settings = WeightSettings(tp, "bfloat16", capability, has_caching_allocator=False, release=release)
    return estimate_weights(ckpt, ModelConfig.from_config(ckpt.config), settings)


def _line(estimate, group: str) -> int:
    return next(line.bytes_per_gpu for line in estimate.lines if line.group == group)


@pytest.mark.parametrize("release", ["0.29.0", "0.30.0", "0.33.0"])
def test_two_float32_rotary_caches(release):
    """rope.py: compressed layers take YaRN over original_max_position_embeddings x factor rows
    (65,536 x 16); sliding layers factor 1 over max_position_embeddings (1,048,576) from 0.30, YaRN too
    on 0.29. Two thetas (10,000 and 160,000), so two _ROPE_DICT entries, each float32 [rows, 64]."""
    estimate = _estimate(load_snapshot(snapshot_path(DSV4)), release=release)
    compressed, sliding = 65536 * 16, 1048576 if release >= "0.30.0" else 65536 * 16
    assert _line(estimate, "rotary cos/sin cache") == (compressed + sliding) * 64 * 4  # 512 MiB, not 128
    assert "2 rotary cos/sin caches" in estimate.basis


def test_rotary_caches_of_a_plain_rope_by_release():
    """Without rope_scaling: 0.30+ makes every layer deepseek_yarn with factor 1 (float32); 0.29 keeps
    rope_type default, a plain RotaryEmbedding in the model dtype. Both: one cache per theta."""
    raw = dict(load_snapshot(snapshot_path(DSV4)).config)
    raw.pop("rope_scaling")
    config = ModelConfig.from_config(raw)
    assert rotary_caches(config, "0.30.0", 2) == [(1048576, 64, 4), (1048576, 64, 4)]
    assert rotary_caches(config, "0.29.0", 2) == [(1048576, 64, 2), (1048576, 64, 2)]
    raw["compress_rope_theta"] = raw["rope_theta"]
    assert rotary_caches(ModelConfig.from_config(raw), "0.30.0", 2) == [(1048576, 64, 4)]  # one key


def test_deepseek_v41_builds_the_same_two_caches():
    """deepseek_v41/common/rope.py: ratio 0 layers are "main", every other one compressed."""
    estimate = _estimate(load_snapshot(snapshot_path(DSV41)))
    assert _line(estimate, "rotary cos/sin cache") == (65536 * 16 + 1048576) * 64 * 4


def test_float32_parameters_stay_float32_on_every_rank():
    """hc_attn/hc_ffn fn [(2 + hc_mult) hc_mult, hc_mult H], base [24], scale [3] and hc_head [4, 4H],
    [4], [1]; attn_sink [padded heads = 64 at 16 heads a rank]; compressor ape [ratio, coff x head_dim];
    e_score_correction_bias [256] on the 40 non-hash layers: all float32 parameters, replicated."""
    ckpt = load_snapshot(snapshot_path(DSV4))
    names = re.compile(r"(^|\.)hc_(attn|ffn|head)_|\.attn_sink$|\.compressor\.ape$|\.ffn\.gate\.bias$")
    gone = {t.name for t in ckpt.tensors if names.search(t.name) and not t.name.startswith("mtp.")}
    without = replace(ckpt, tensors=tuple(t for t in ckpt.tensors if t.name not in gone), extra={})
    hidden, hc, layers = 4096, 4, 43
    mix, hc_dim = (2 + hc) * hc, hc * hidden
    hyper = layers * 2 * (mix * hc_dim + mix + 3) + (hc * hc_dim + hc + 1)
    sinks = layers * 64
    ratios = ckpt.config["compress_ratios"][:layers]
    ape = ratios.count(4) * (4 * 2 * 512 + 4 * 2 * 128) + ratios.count(128) * 128 * 512  # + indexer's at 4
    bias = (layers - 3) * 256
    by_hand = 4 * (hyper + sinks + ape + bias)
    assert _estimate(ckpt).bytes_per_gpu - _estimate(without).bytes_per_gpu == by_hand


def _humming(num_experts, inter, hidden, layers, with_scale_2=False):
    """w13 N = 2 I and w2 K = I padded to 256 and 128; weights K/2 bytes a row, e8m0 scales K/32."""
    pad = lambda n, m: -(-n // m) * m  # noqa: E731
    w13_n, w13_k = pad(2 * inter, 256), pad(hidden, 128)
    w2_n, w2_k = pad(hidden, 256), pad(inter, 128)
    per_expert = w13_n * w13_k // 2 + w13_n * w13_k // 32 + w2_n * w2_k // 2 + w2_n * w2_k // 32
    return layers * (num_experts * per_expert + (2 * num_experts * 4 if with_scale_2 else 0))


@pytest.mark.parametrize("tp,inter", [(4, 576), (8, 320)])
def test_humming_pads_deepseek_v41_experts_on_hopper(tp, inter):
    """Humming (first on SM90 from 0.32): maybe_roundup_sizes rounds the per-rank intermediate to 64
    (2304 / 8 = 288 -> 320), then humming/moe.py pads N to 256 and K to 128: at TP 8 w13 640 -> 768 and
    w2's K 320 -> 384; at TP 4 w13 1152 -> 1280 and K 576 -> 640."""
    ckpt = load_snapshot(snapshot_path(DSV41))
    assert _line(_estimate(ckpt, tp, release="0.32.0"), "experts") == _humming(384, inter, 5120, 40)
    with_scale_2 = _humming(384, inter, 5120, 40, with_scale_2=True)
    assert _line(_estimate(ckpt, tp, release="0.33.0"), "experts") == with_scale_2  # fp32 [E] per sublayer


def test_humming_needs_no_padding_for_deepseek_v4_at_tp4():
    ckpt = load_snapshot(snapshot_path(DSV4))
    split = sum(t.num_bytes for t in ckpt.tensors if re.match(r"layers\.\d+\.ffn\.experts\.", t.name)) // 4
    assert _line(_estimate(ckpt, 4, release="0.32.0"), "experts") == split == _humming(256, 512, 4096, 43)
