"""DeepSeek-V4 / V4.1: what their model classes put on the GPU that the checkpoint's split does not show.

- Two rotary caches in float32. Every attention layer builds its rope with build_deepseek_v4_rope
  (models/deepseek_v4/common/rope.py 0.30.0:9-52; 0.31-0.33 name the YaRN type deepseek_llama_scaling
  when attention_factor is 1.0, which get_rope sends to the same class and rows:
  rotary_embedding/__init__.py 0.30.0:280-306, 0.33.0:284-310; deepseek_v41/common/rope.py):
  sliding-window layers and compressed layers get different parameters (rope_theta vs
  compress_rope_theta, plain vs YaRN), so get_rope's _ROPE_DICT holds two caches, and
  DeepseekV4ScalingRotaryEmbedding registers each as float32 whatever the model dtype
  (rotary_embedding/deepseek_scaling_rope.py 0.30.0:224-242, 0.29.0:247-248, 0.31-0.33 as 0.30).
- Parameters created in float32 however the checkpoint stores them: the hyper-connection mixers
  (hc_*_fn/base/scale), the attention sinks, the compressors' ape and the router biases
  (e_score_correction_bias, bias_vl).
- Humming's expert layout (0.32+ on SM90): every expert sublayer padded to N % 256 and K % 128.
"""

from __future__ import annotations

import math
import re

from apron.plan.model_config import ModelConfig

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

DSV4_MODEL_TYPES = ("deepseek_v4", "deepseek_v41", "deepseek_v41_text")

# Parameters the model classes create with dtype=torch.float32 (the default loader copies into them,
# so a float32 checkpoint tensor stays 4 B an element): DeepseekV4DecoderLayer hc_attn/hc_ffn
# fn/base/scale and DeepseekV4Model hc_head_* (nvidia/model.py 0.30.0:1169-1211, 1420-1438; 0.29.0:1103,
# 1305; 0.31.0:1229, 1484; 0.32.0:1099, 1359; 0.33.0:623, 883), attn_sink (attention.py 0.30.0:238-241,
# 0.33.0:250 make_attention_sink(..., torch.float32)), the compressor's ape (compressor.py 0.30.0:260-267,
# state_dtype float32, 0.29-0.33), the router's e_score_correction_bias and bias_vl (nvidia/model.py
# 0.30.0:866-878; V4.1's MoE subclasses it: deepseek_v41/nvidia/model.py 0.30.0:60-61) and V4.1's
# hyper-connections (deepseek_v41/nvidia/model.py 0.30.0:271-310, 0.33.0:442).
# Pattern strings, compiled on their first use (re's cache): a plan of another model compiles none.
_FP32_PARAMS = (
    r"(^|\.)hc_(attn|ffn|head)_(fn|base|scale)$|\.attn\.attn_sink$|\.compressor\.ape$|\.ffn\.gate\.(bias|bias_vl)$"
)


def is_dsv4(config: ModelConfig) -> bool:
    return config.text_model_type in DSV4_MODEL_TYPES


def keeps_fp32(name: str, config: ModelConfig) -> bool:
    """A DeepSeek-V4/V4.1 checkpoint tensor whose vLLM parameter is float32 (not the model dtype)."""
    return is_dsv4(config) and bool(re.search(_FP32_PARAMS, name))


def _layer_kinds(config: ModelConfig) -> set[str]:
    """The layer kinds, "main" (sliding-window) and/or "compress", among the decoder layers, as each
    release's rope builder tells them apart: V4's attention passes max(1, ratio) and compresses above
    1 (attention.py 0.30.0:227-228, rope.py 0.30.0:23-29); V4.1 passes the raw ratio and compresses
    above 0 (deepseek_v41/common/rope.py 0.30.0:23-29)."""
    t = config.text
    raw = t.get("compress_ratios")
    if raw is None and t.get("layer_types") and t.get("compress_rates"):
        raw = [int(t["compress_rates"].get(kind, 0)) for kind in t["layer_types"]]
    ratios = [int(r) for r in (raw or [])[: config.num_layers]] or [0]
    is_v41 = config.text_model_type.startswith("deepseek_v41")
    return {"compress" if (r > 0 if is_v41 else max(1, r) > 1) else "main" for r in ratios}


def _kind_parameters(config: ModelConfig, kind: str) -> dict[str, Any]:
    """rope_parameters for one layer kind: nested {"main", "compress"} dicts in newer configs, else
    the one flat dict (rope.py 0.30.0:17-26)."""
    params = config.rope_parameters
    nested = params.get(kind) if isinstance(params.get("main"), dict) else None
    return dict(nested if isinstance(nested, dict) else params)


def rotary_caches(config: ModelConfig, release: str, runtime_dtype_bytes: int) -> list[tuple[int, int, int]]:
    """(rows, rotary_dim, bytes per element) of each distinct rope cache the decoder layers build.

    0.30-0.33 (rope.py 0.30.0:28-47): compressed layers keep the config's rope type (YaRN becomes
    deepseek_yarn: rows = original_max_position_embeddings x factor, deepseek_scaling_rope.py
    0.30.0:244-255) unless it is "default"; sliding layers (and "default") become deepseek_yarn with
    factor 1 over max_position_embeddings. 0.29 (rope.py 0.29.0:17-35) mutates the one dict in place:
    every layer takes the YaRN rows, and a "default" rope stays a plain RotaryEmbedding cached in the
    model dtype. The two kinds differ at least by theta (rope_theta vs compress_rope_theta), so each
    kind present is its own _ROPE_DICT entry unless every parameter agrees."""
    from apron.engine.facts import version_key

    rotary_dim = config.qk_rope_head_dim
    max_position = config.max_position_embeddings or 0
    if not rotary_dim or not max_position:
        return []
    caches: dict[tuple[Any, ...], tuple[int, int, int]] = {}
    for kind in sorted(_layer_kinds(config)):
        params = _kind_parameters(config, kind)
        rope_type = params.get("rope_type") or params.get("type") or "default"
        theta = config.get("compress_rope_theta") if kind == "compress" else config.rope_theta
        if version_key(release) < version_key("0.30.0"):
            scaled = rope_type != "default"
            factor = float(params.get("factor", 1)) if scaled else 1.0
            original = int(params.get("original_max_position_embeddings") or max_position) if scaled else max_position
            element = 4 if scaled else runtime_dtype_bytes
        elif kind == "compress" and rope_type != "default":
            factor = float(params.get("factor", 1))
            original = int(params.get("original_max_position_embeddings") or max_position)
            element = 4
        else:
            factor, original, element = 1.0, max_position, 4
        rows = math.ceil(original * factor)  # torch.arange(max_position_embeddings * scaling_factor)
        caches.setdefault((theta, rope_type, factor, original), (rows, rotary_dim, element))
    return list(caches.values())


def rotary_cache_bytes(config: ModelConfig, release: str, runtime_dtype_bytes: int) -> tuple[int, str]:
    caches = rotary_caches(config, release, runtime_dtype_bytes)
    if not caches:
        return 0, ""
    total = sum(rows * dim * element for rows, dim, element in caches)
    shapes = ", ".join(
        f"[{rows}, {dim}] {'float32' if element == 4 else 'model dtype'}" for rows, dim, element in caches
    )
    note = (
        f"plus {len(caches)} rotary cos/sin cache{'s' if len(caches) > 1 else ''} {shapes} "
        "(DeepSeek-V4: sliding and compressed layers build their own, kept in float32: "
        "deepseek_scaling_rope.py DeepseekV4ScalingRotaryEmbedding)"
    )
    return total, note


# Humming's MoE weight preparation: vLLM passes pad_n_to_multiple=256, pad_k_to_multiple=128
# (quantization/utils/humming/moe.py 0.32.0:387-424, 0.33.0 the same lines: 411-412) to humming-kernels'
# prepare_and_transform_humming_tensors (humming/transform.py 0.1.17:13-119, unchanged in 0.1.19,
# the releases' pins humming-kernels 0.1.17 / 0.1.19), whose check_and_pad_tensors zero-pads the
# stacked weight [E, N, K/2] and its e8m0 scales [E, N, K/32] to the padded shape
# (HummingWeightSchema.get_tensors_attrs, schema/humming.py 0.1.17:80-120; transform.py 0.1.17:122-210).
HUMMING_PAD_N, HUMMING_PAD_K = 256, 128


def humming_stacked_bytes(num_experts: int, inter: int, hidden: int, release: str) -> tuple[int, ...]:
    """Each stacked tensor Humming leaves per MoE layer (w13 weight, its scales, w2 weight, its scales,
    and from 0.33 each sublayer's fp32 weight_scale_2 [E]), with INTER the per-rank intermediate after
    maybe_roundup_sizes. w13 is N = 2 I (gate and up stacked, padded as one), K = H; w2 is N = H, K = I.
    The repack (humming ops.repack_weight, native) is taken to keep the padded byte count, as
    Marlin's does.

    0.33 passes the checkpoint's MXFP8 activation key (deepseek_v4/quant_config.py 0.33.0:227), which
    _humming_input_schema turns into block FP8 on SM90 (oracle/mxfp4.py 0.33.0:512-535); with fp8
    activations, fp4 weights and e8m0 group scales Humming fuses the scales (config/config.py
    0.1.19:375-398 use_fused_e8m0_scale, weight_scale_2_type TENSOR) and keeps a per-expert float32
    weight_scale_2 (transform.py 0.1.17:242-289 process_fused_e8m0_scale). 0.32 constructs the method without it (quant_config.py 0.32.0:196):
    BF16 activations, no secondary scale."""
    from apron.engine.facts import version_key

    sizes = []
    for n, k in ((2 * inter, hidden), (hidden, inter)):
        pn, pk = -(-n // HUMMING_PAD_N) * HUMMING_PAD_N, -(-k // HUMMING_PAD_K) * HUMMING_PAD_K
        sizes += [num_experts * pn * pk // 2, num_experts * pn * pk // 32]
        if version_key(release) >= version_key("0.33.0"):
            sizes.append(num_experts * 4)
    return tuple(sizes)


def unread_note(config: ModelConfig) -> str:
    """What of a DeepSeek-V4 checkpoint's load is not counted, said in the basis. DeepGEMM's
    transform_sf_into_required_layout was read in the vendored deep_gemm 2.8.0 binary of the 0.30.0
    wheel (docs/memory.md section 5, the DeepGEMM row): on SM90 it keeps the float32 block scales as
    loaded; on SM100 it broadcasts them per row and packs UE8M0, whose size is taken from DeepGEMM's
    published layout rule, not decoded from the binary."""
    if not is_dsv4(config) or config.quant_method != "fp8":
        return ""
    return (
        "DeepSeek-V4 not counted: the FP8 linears' scales as DeepGEMM re-lays them on SM100 "
        "(transform_sf_into_required_layout in the wheel's vendored deep_gemm; fp8_utils.py 0.30.0:1082-1160): "
        "one UE8M0 scale per row and 128 columns, packed four a word, N x K / 128 bytes a linear per rank by "
        "DeepGEMM's published layout (~13 MiB for DeepSeek-V4-Flash at TP 4); SM90 keeps the float32 block "
        "scales as loaded (read in the binary)"
    )
