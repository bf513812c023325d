"""GLM-5.3-Flash (glm5_next): where the parameters vLLM builds differ in dtype from the checkpoint.

The model file builds some layers without the checkpoint's FP8 quantization and some parameters in
float32 whatever the checkpoint stores, so the bytes per GPU are not the checkpoint's split:

- The MLA projections are built with ``quant_config=None`` ("MLA projections are BF16 in checkpoint",
  models/glm5next/nvidia/model.py 0.30.0:330; common/model.py 0.31.0:330, 0.32.0:397, 0.33.0:408),
  but this FP8 checkpoint stores q_a_proj, kv_a_proj_with_mqa, q_b_proj and o_proj as block FP8.
  ``load_weights`` hands each to ``_try_load_fp8_attn_proj`` (called at 0.30.0:831, 0.31.0:832,
  0.32.0/0.33.0:945; defined at 0.30.0:1236, 0.31.0:1248, 0.32.0/0.33.0:1423), which finds no
  ``weight_scale_inv`` parameter to load into and dequantizes the weight (``_dequant_fp8_block``)
  into the BF16 parameter: q_a and kv_a fused into the replicated ``fused_qkv_a_proj``
  (DeepSeekV2FusedQkvAProjLinear, disable_tp), q_b column- and o_proj row-parallel. The indexer's
  wk goes the same way when it is FP8 (``_try_load_fp8_indexer_wk``, 0.30.0:1169, 0.31.0:1181,
  0.32.0/0.33.0:1356). Their scales are never kept.
- Parameters declared float32: the hyper-connection mixers ``hc_{attn,ffn}_{fn,base,scale}``
  (model.py 0.30.0:389-401, 0.31.0:390-402, 0.32.0:457-469, 0.33.0:468-480), the router's
  ``e_score_correction_bias`` (0.30.0:188, 0.31.0:188, 0.32.0:246, 0.33.0:257), the KDA short
  convolutions (``params_dtype=torch.float32``, kda.py 0.30.0/0.31.0:247-268, 0.32.0/0.33.0:269-290)
  and ``dt_bias`` (kda.py 0.30.0/0.31.0:241, 0.32.0/0.33.0:263), and the indexer's
  ``index_kpool_compress_ape`` (attention.py 0.30.0:240, 0.31.0:252, 0.32.0/0.33.0:219). The
  checkpoint's BF16 hc_*_fn and convolutions load into them as float32.
"""

from __future__ import annotations

import re

from apron.plan.model_config import ModelConfig

_MODEL_TYPES = ("glm5_next", "glm5_next_text")
# The FP8 projections the model keeps in the model dtype (_FP8_ATTN_PROJS and the indexer's wk).
# Pattern strings, compiled on their first use (re's cache): a plan of another model compiles none.
_DEQUANTIZED = r"\.self_attn\.(q_a_proj|kv_a_proj_with_mqa|q_b_proj|o_proj|indexer\.wk)\.weight"
_FLOAT32 = (
    r"(^|\.)hc_(attn|ffn)_(fn|base|scale)$|\.gate\.e_score_correction_bias$"
    r"|\.self_attn\.[qkv]_conv1d\.weight$|\.self_attn\.dt_bias$|\.indexer\.index_kpool_compress_ape$"
)
_FP8_DTYPES = ("F8_E4M3", "F8_E4M3FN")


def is_glm5_next(config: ModelConfig) -> bool:
    return config.model_type in _MODEL_TYPES or config.text_model_type in _MODEL_TYPES


def dtype_class(name: str, dtype: str, config: ModelConfig) -> str | None:
    """How GLM-5.3-Flash's vLLM model stores this checkpoint tensor, where it differs from the
    generic rule: "dequantized" (an FP8 weight loaded as the model dtype), "dropped_scale" (the
    scale of one, never kept) or "fp32_param" (a float32 parameter). None: the generic rule holds."""
    if not is_glm5_next(config):
        return None
    match = re.search(_DEQUANTIZED, name)
    if match and name.endswith(".weight") and dtype in _FP8_DTYPES:
        return "dequantized"
    if match and name.endswith(".weight_scale_inv"):
        return "dropped_scale"
    if re.search(_FLOAT32, name):
        return "fp32_param"
    return None


def is_dropped_scale(name: str, config: ModelConfig) -> bool:
    return is_glm5_next(config) and bool(re.search(_DEQUANTIZED, name)) and name.endswith(".weight_scale_inv")


def note(added_bytes: dict[str, int]) -> str:
    """The basis line: what the dtype rules added per GPU, and what they leave unexplained."""
    dequantized = added_bytes.get("dequantized", 0)
    fp32 = added_bytes.get("fp32_param", 0)
    return (
        f"GLM-5.3-Flash: MLA projections dequantized from FP8 to the model dtype at load "
        f"(+{dequantized / 2**20:.1f} MiB), float32 hyper-connection, router-bias and KDA "
        f"convolution parameters (+{fp32 / 2**20:.1f} MiB) (models/glm5next model.py, kda.py); "
        "the per-layer sparse MLA index groups follow max_num_batched_tokens, not the GPU (counted with "
        "the construction buffers; vLLM's defaults double it on GPUs of 160 GiB or more); not explained "
        "by the loading code read: the rest of what boots of this model are reported to load (the experts "
        "keep their bytes on both the Triton and the FlashInfer TRT-LLM FP8 MoE layouts); a boot's 'Model "
        "loading took' on each GPU at two max_num_batched_tokens would settle it"
    )
