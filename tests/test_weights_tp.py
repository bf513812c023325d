"""Weights per GPU under tensor parallelism and quantized layouts, from real headers."""

from __future__ import annotations

import re

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.plan.model_config import ModelConfig
from apron.plan.weights import WeightSettings, estimate_weights, marlin_padded_nk, mxfp4_backend
from conftest import snapshot_path


def weights(name, tp=1, dtype="bfloat16", capability=(9, 0), **kw):
    ckpt = load_snapshot(snapshot_path(name))
    return estimate_weights(ckpt, ModelConfig.from_config(ckpt.config), WeightSettings(tp, dtype, capability, **kw))


@pytest.mark.parametrize("name", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B"])
def test_tp_splits_almost_everything(name):
    one = weights(name).bytes_per_gpu
    for tp in (2, 4, 8):
        per_gpu = weights(name, tp).bytes_per_gpu
        assert one / tp < per_gpu < one / tp * 1.1  # norms and the rotary cache stay whole


def test_kv_projections_replicate_when_tp_exceeds_kv_heads():
    # Qwen3-8B: 8 KV heads. At TP 8 each rank holds 1 KV head; at TP 16 still 1 (replicated), so the
    # k/v bytes per GPU stop shrinking while q/o keep halving.
    ckpt = load_snapshot(snapshot_path("Qwen/Qwen3-8B"))
    config = ModelConfig.from_config(ckpt.config)
    kv = sum(t.num_bytes for t in ckpt.tensors if ".k_proj." in t.name or ".v_proj." in t.name)
    at8 = estimate_weights(ckpt, config, WeightSettings(8, "bfloat16", (9, 0)))
    assert any(line.group == "attention" for line in at8.lines)
    attention = {
        tp: next(
            line.bytes_per_gpu
            for line in estimate_weights(ckpt, config, WeightSettings(tp, "bfloat16", (9, 0))).lines
            if line.group == "attention"
        )
        for tp in (8, 16)
    }
    q_o = sum(line.checkpoint_bytes for line in at8.lines if line.group == "attention") - kv
    assert attention[16] == pytest.approx(q_o / 16 + kv / 8, rel=1e-3)


def test_tied_lm_head_is_not_loaded():
    est = weights("Qwen/Qwen3-0.6B")  # ships lm_head.weight although tie_word_embeddings is true
    assert dict(est.skipped)["lm_head (tied to the embedding)"] == 151936 * 1024 * 2


def test_vocab_padded_to_64_then_split():
    est = weights("state-spaces/mamba-2.8b-hf", tp=2)  # vocab 50280 -> 50304 rows, 25152 per rank
    embedding = next(line for line in est.lines if line.group == "embedding")
    assert embedding.bytes_per_gpu == 25152 * 2560 * 2


def test_fp32_checkpoint_in_bf16_halves_except_ssm_a():
    bf16 = weights("state-spaces/mamba-2.8b-hf").bytes_per_gpu
    fp32 = weights("state-spaces/mamba-2.8b-hf", dtype="float32").bytes_per_gpu
    assert 0.5 < bf16 / fp32 < 0.51


def test_mxfp4_marlin_padding_below_hopper():
    assert mxfp4_backend((8, 9))[0] == "MARLIN" and mxfp4_backend((9, 0))[0] == "TRITON"
    ada = weights("openai/gpt-oss-20b", capability=(8, 9))
    hopper = weights("openai/gpt-oss-20b", capability=(9, 0))
    assert any("2880 -> 2944" in n and "2880 -> 3072" in n for n in ada.notes)
    assert ada.bytes_per_gpu > hopper.bytes_per_gpu * 1.05


def test_marlin_padded_nk():
    assert marlin_padded_nk(4096, 4096, 128) == (4096, 4096)
    assert marlin_padded_nk(1000, 4096, 128) == (1024, 4096)
    assert marlin_padded_nk(4096, 1000, 128) == (4096, 1024)


@pytest.mark.parametrize("name", ["Qwen/Qwen3-8B-AWQ", "JunHowie/Qwen3-8B-GPTQ-Int4", "Qwen/Qwen3-0.6B-FP8"])
def test_quantized_checkpoints_sum_close_to_their_headers(name):
    ckpt = load_snapshot(snapshot_path(name))
    est = weights(name, capability=(8, 9))
    loaded = ckpt.total_tensor_bytes - sum(n for _, n in est.skipped)
    # the tensors themselves: the allocator's blocks and the rotary cache are not in the headers (a
    # small model's share of them is large: Qwen3-0.6B-FP8's measured 0.74 GiB is 5.7% over them)
    made = sum(line.bytes_per_gpu for line in est.lines if line.group in ("allocator rounding", "rotary cos/sin cache"))
    assert 0.95 < (est.bytes_per_gpu - made) / loaded < 1.05


def test_language_model_only_drops_the_vision_tower():
    full = weights("google/gemma-4-31B-it")
    text = weights("google/gemma-4-31B-it", language_model_only=True)
    assert text.bytes_per_gpu < full.bytes_per_gpu
    assert any("tower" in reason for reason, _ in text.skipped)


def test_mtp_layers_are_skipped():
    est = weights("zai-org/GLM-4.7-Flash")
    assert dict(est.skipped)["MTP/next-token layers vLLM loads only for speculative decoding"] > 2_000_000_000


MIB = 2**20


def test_parameters_over_the_split_limit_keep_their_whole_segment():
    """Weights load under max_split_size_mb:20: mamba's out_proj [2560, 5120] in bf16 is 25 MiB and is
    never split off its 26 MiB segment, so memory_allocated() counts 26 MiB (in float32 it is 50 MiB
    exactly, nothing added); the padded embedding rounds up to its 2 MiB segment too."""
    bf16 = next(line for line in weights("state-spaces/mamba-2.8b-hf").lines if line.group == "allocator rounding")
    out_proj = 64 * (26 * MIB - 2560 * 5120 * 2)
    embedding = 246 * MIB - 50304 * 2560 * 2
    assert bf16.bytes_per_gpu == out_proj + embedding
    fp32 = {line.group: line.bytes_per_gpu for line in weights("state-spaces/mamba-2.8b-hf", dtype="float32").lines}
    assert fp32["allocator rounding"] == 492 * MIB - 50304 * 2560 * 4  # the embedding only
    # Qwen3-8B's layers are whole 2 MiB multiples: only the two vocabulary tables (1187 MiB each, in
    # 1188 MiB segments) and the 256-byte q/k norms (512-byte blocks) add anything
    qwen = {line.group: line.bytes_per_gpu for line in weights("Qwen/Qwen3-8B").lines}
    assert qwen["allocator rounding"] == 2 * MIB + 2 * 36 * 256


def test_mxfp4_triton_relayout_on_hopper():
    """OAI Triton kernels on Hopper: fp32 biases, scale groups padded 90 -> 92 and rows to 256
    (HopperMXScaleLayout), values unpadded for 2880-wide experts; then each stacked tensor keeps its
    2 MiB-rounded segment."""
    est = weights("openai/gpt-oss-120b", capability=(9, 0))
    experts = next(line for line in est.lines if line.group == "experts")
    e, i, h = 128, 2880, 2880
    values = e * (2 * i * h // 2 + h * i // 2)
    scales = e * (5888 * 92 + 3072 * 92)  # 5760 -> 5888 and 2880 -> 3072 rows (multiples of 256)
    biases = e * 4 * (2 * i + h)
    sizes = (e * 2 * i * h // 2, e * h * i // 2, e * 5888 * 92, e * 3072 * 92, e * 4 * 2 * i, e * 4 * h)
    segments = sum(-(-n // (2 * MIB)) * 2 * MIB if n >= 20 * MIB else n for n in sizes)
    assert experts.bytes_per_gpu == 36 * (values + scales + biases + segments - sum(sizes))


def test_vision_towers_split_as_their_linear_classes():
    """MiniMax-M3's tower (minimax_m3/common/vision_tower.py): QKVParallelLinear with 16 KV heads,
    column fc1 / projector linear_1, row out_proj / fc2 / linear_2 (biases whole), a Conv3d patch
    embedding with no TP class. Norms are their own line."""
    ckpt = load_snapshot(snapshot_path("MiniMaxAI/MiniMax-M3"))
    tower = [
        t
        for t in ckpt.tensors
        if t.name.startswith(("vision_tower.", "multi_modal_projector.", "patch_merge_mlp.")) and "norm" not in t.name
    ]
    whole = re.compile(r"patch_embedding|(out_proj|fc2|linear_2)\.bias$")
    replicated = sum(t.num_elements * 2 for t in tower if whole.search(t.name))
    split = sum(t.num_elements * 2 for t in tower if not whole.search(t.name))
    at8 = estimate_weights(ckpt, ModelConfig.from_config(ckpt.config), WeightSettings(8, "bfloat16", (9, 0)))
    assert not at8.unknown_layout_tensors
    assert next(line.bytes_per_gpu for line in at8.lines if line.group == "vision/audio tower") == (
        split // 8 + replicated
    )
    # Qwen-VL-style qkv / proj / patch_embed / pos_embed (GLM-5.3-Flash's are in the contract corpus)
    assert not weights("Qwen/Qwen3.8-Flash-Next", 8).unknown_layout_tensors


def expert_bytes(estimate) -> int:
    return next(line.bytes_per_gpu for line in estimate.lines if line.group == "experts")


@pytest.mark.parametrize(
    "capability,release,inter",
    [((9, 0), "0.30.0", 640), ((10, 0), "0.30.0", 640), ((10, 0), "0.32.0", 640), ((9, 0), "0.32.0", 640)],
)
def test_deepseek_v41_fp4_experts_pad_to_the_moe_backend(capability, release, inter):
    """select_deepseek_v4_mxfp4_moe_backend: Marlin (Hopper, 0.30/0.31) and TRTLLM MXFP8 (SM100) round
    the per-rank intermediate 2304 / 4 = 576 up to 640; Humming, first on SM90 from 0.32, rounds it to 64
    (none) but then pads w13's N 1152 to 1280 and w2's K 576 to 640 (test_weights_dsv4.py): the same bytes."""
    name = "deepseek-ai/DeepSeek-V4.1-Flash"
    estimate = weights(name, 4, capability=capability, release=release, has_caching_allocator=False)
    layers, experts, hidden = 40, 384, 5120
    per_expert = 2 * inter * hidden // 2 + 2 * inter * hidden // 32 + hidden * inter // 2 + hidden * inter // 32
    assert expert_bytes(estimate) == layers * experts * per_expert
    ckpt = load_snapshot(snapshot_path(name))
    split = sum(t.num_bytes for t in ckpt.tensors if re.match(r"layers\.\d+\.ffn\.experts\.", t.name)) // 4
    assert expert_bytes(estimate) == split * inter // 576  # the checkpoint's split, padded
    at2 = weights(name, 2, capability=capability, release=release, has_caching_allocator=False)
    assert expert_bytes(at2) == 2 * split  # 1152 per rank is already a multiple of 128


def test_deepseek_v4_fp4_experts_need_no_padding_at_tp4():
    name = "deepseek-ai/DeepSeek-V4-Flash-0731"
    ckpt = load_snapshot(snapshot_path(name))
    split = sum(t.num_bytes for t in ckpt.tensors if re.match(r"layers\.\d+\.ffn\.experts\.", t.name)) // 4
    assert expert_bytes(weights(name, 4, has_caching_allocator=False, release="0.30.0")) == split  # 512 per rank


def test_awq_zero_points_on_machete_become_activation_dtype():
    """Hopper's Machete keeps AWQ's packed weight and scales and turns each int32 of 8 packed zero
    points into 8 bf16 values (-scale x zero): 16 B where the checkpoint holds 4."""
    name = "Qwen/Qwen3-8B-AWQ"
    ckpt = load_snapshot(snapshot_path(name))
    zeros = sum(t.num_bytes for t in ckpt.tensors if t.name.endswith(".qzeros"))
    hopper = weights(name, 1, capability=(9, 0), has_caching_allocator=False).bytes_per_gpu
    assert hopper - weights(name, 1, capability=(10, 0), has_caching_allocator=False).bytes_per_gpu == 3 * zeros


def test_block_fp8_scales_expand_for_marlin_below_hopper():
    """prepare_fp8_layer_for_marlin: each 128x128 block scale becomes 128 bf16 per-group scales."""
    name = "Qwen/Qwen3-0.6B-FP8"
    ckpt = load_snapshot(snapshot_path(name))
    ada, hopper = (weights(name, 1, capability=c, has_caching_allocator=False) for c in ((8, 9), (9, 0)))
    expanded = 0
    for t in ckpt.tensors:
        if t.name.endswith(".weight_scale_inv"):
            n, k = ckpt.tensors_by_name[t.name.removesuffix("_scale_inv")].shape
            expanded += k // 128 * n * 2 - t.num_elements * 4
    assert ada.bytes_per_gpu - hopper.bytes_per_gpu == expanded > 6 * 2**20
    assert any("Marlin" in note for note in ada.notes)


GLM53 = "zai-org/GLM-5.3-Flash"
GLM53_MLA_LAYERS = 11  # layer_types "deepseek_sparse_attention" 3, 7, ..., 43; layer 45 is MTP (skipped)
GLM53_KDA_LAYERS = 34


def glm53_part(pattern: str, tp: int, capability: tuple[int, int]) -> int:
    """Apron's bytes per GPU for the fixture's tensors whose names match PATTERN, alone."""
    from dataclasses import replace

    ckpt = load_snapshot(snapshot_path(GLM53))
    part = replace(ckpt, tensors=tuple(t for t in ckpt.tensors if re.search(pattern, t.name)), extra={})
    settings = WeightSettings(tp, "bfloat16", capability, release="0.30.0", has_caching_allocator=False)
    return estimate_weights(part, ModelConfig.from_config(ckpt.config), settings).bytes_per_gpu


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("capability", [(9, 0), (10, 0)])
def test_glm53_mla_projections_are_dequantized_to_bf16(tp, capability):
    """models/glm5next model.py 0.30.0:330 builds the MLA with quant_config=None; load_weights'
    _try_load_fp8_attn_proj (0.30.0:1236-1299) dequantizes the FP8 q_a / kv_a / q_b / o_proj into
    BF16 parameters and keeps no scale: fused_qkv_a_proj [1536 + 512, 4096] whole on every rank
    (disable_tp), q_b_proj [64 x 256 / tp, 1536] and o_proj [4096, 64 x 256 / tp]."""
    hidden, q_lora, kv_lora, heads, head = 4096, 1536, 512, 64, 256
    per_layer = (q_lora + kv_lora) * hidden * 2 + heads * head // tp * q_lora * 2 + hidden * heads * head // tp * 2
    pattern = r"^model\.language_model\.layers\.\d+\.self_attn\.(q_a_proj|kv_a_proj_with_mqa|q_b_proj|o_proj)\."
    mla = glm53_part(pattern + r"weight(_scale_inv)?$", tp, capability)
    kda_o_proj = GLM53_KDA_LAYERS * hidden * heads * 128 // tp * 2  # BF16 in the checkpoint already
    assert mla == GLM53_MLA_LAYERS * per_layer + kda_o_proj
    assert glm53_part(pattern + r"weight_scale_inv$", tp, capability) == 0


@pytest.mark.parametrize("tp", [2, 4])
def test_glm53_float32_parameters(tp):
    """Parameters the model declares float32 whatever the checkpoint holds: hc_{attn,ffn}_fn
    [(2 + 4) x 4, 4 x 4096], _base [24] and _scale [3] on every decoder layer (model.py
    0.30.0:389-401, replicated), the router's e_score_correction_bias [288] (0.30.0:188), KDA's
    q/k/v_conv1d [64 x 128 / tp, 1, 4] (kda.py 0.30.0:247-268) and dt_bias [64 x 128 / tp]
    (kda.py 0.30.0:241), the indexer's index_kpool_compress_ape [4, 128] (attention.py 0.30.0:240)."""
    layers, moe_layers, proj = 45, 42, 64 * 128
    hc = layers * 2 * (24 * 4 * 4096 + 24 + 3) * 4
    kda = GLM53_KDA_LAYERS * (3 * proj // tp * 4 + proj // tp) * 4
    expected = hc + moe_layers * 288 * 4 + kda + GLM53_MLA_LAYERS * 4 * 128 * 4
    pattern = (
        r"^model\.language_model\.layers\.\d+\.(hc_(attn|ffn)_(fn|base|scale)|mlp\.gate\.e_score_correction_bias"
        r"|self_attn\.([qkv]_conv1d\.weight|dt_bias|indexer\.index_kpool_compress_ape))$"
    )
    assert glm53_part(pattern, tp, (9, 0)) == expected


def test_glm53_basis_names_what_it_adds_and_what_is_unexplained():
    est = weights(GLM53, 4, release="0.30.0", has_caching_allocator=False)
    note = next(n for n in est.notes if n.startswith("GLM-5.3-Flash"))
    assert "dequantized" in note and "not explained" in note
