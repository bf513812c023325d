"""The fused-MoE kernel the release picks, and the memory that choice costs.

Each quantization method asks its oracle (model_executor/layers/fused_moe/oracle/{unquantized, fp8,
mxfp4, int_wna16}.py) for the first backend of a priority list whose kernel supports the device,
scheme and activation; monolithic kernels are tried before modular ones of the same backend. The
lists are the same in 0.29-0.33 (oracle/unquantized.py 0.29.0:48-99, oracle/fp8.py 0.29.0:81-96,
0.31.0:84-100, 0.33.0:88-104, oracle/mxfp4.py 0.29.0:191-198 and 321-342, oracle/int_wna16.py
0.29.0:108-180), so the choice here depends on the GPU, the checkpoint, the tensor-parallel size and
the engine's environment more than on the release.

A stock install has flashinfer-python (vLLM's pinned dependency) and DeepGEMM: every 0.29-0.33 wheel
vendors it, compiled, at vllm/third_party/deep_gemm, and `has_deep_gemm` finds either copy
(utils/import_utils.py 0.29.0:490-497, 0.30.0:511-518, 0.31.0:500-507, 0.32.0:512-519,
0.33.0:512-519). `is_deep_gemm_supported` is then true on cc 9.0, 10.x and 12.x unless
VLLM_USE_DEEP_GEMM=0 (utils/deep_gemm.py 0.30.0:110-116, 0.33.0:113-118; platforms/cuda.py
support_deep_gemm 0.30.0:721-727; envs.py VLLM_USE_DEEP_GEMM, VLLM_MOE_USE_DEEP_GEMM and
VLLM_USE_DEEP_GEMM_E8M0 default "1": 0.29.0:1541-1549, 0.30.0:1537-1545, 0.33.0:1600-1608). For block
FP8 (128 x 128) experts at plain TP that leaves DeepGEMM's TritonOrDeepGemmExperts (DEEPGEMM) as:
- cc 9.0: not taken. The oracle moves Triton to the front for block FP8 at ep_size 1 (oracle/fp8.py
  0.29.0:113-123, 0.31.0:117-127, 0.32.0:120-130, 0.33.0:122-132), and Triton takes every block
  shape below 1,024 padded experts (experts/triton_moe.py 0.30.0:87-91).
- cc 10.x: the fallback. FlashInfer TRT-LLM comes first and takes SiLU, relu2 and uninterleaved
  SwiGLU-OAI up to 2,048 experts (experts/trtllm_fp8_moe.py 0.30.0:67-109, 162-184; 0.29 also refuses
  a SwiGLU clamp on block FP8, 0.29.0:68-101); FlashInfer CUTLASS takes block FP8 on 9.0 only
  (experts/flashinfer_cutlass_moe.py 0.30.0:164-172), so what TRT-LLM refuses goes to DeepGEMM.
- cc 12.x: the pick. Neither FlashInfer kernel takes block FP8 there; DeepGEMM is next.
- a checkpoint block the TP shard does not divide is refined to a finer block at load (oracle/fp8.py
  refine_fp8_moe_block_shape 0.29.0:272-302; 0.31+ through resolve_fp8_moe_weight_block_shape), a
  weight key only Triton takes: Triton on every capability.
- VLLM_USE_DEEP_GEMM or VLLM_MOE_USE_DEEP_GEMM present in the environment, even at its default "1",
  forces DeepGEMM ahead of the list (both "1") or drops it (either "0") (oracle/fp8.py 0.29.0:393-407,
  0.33.0:484-495); 0.33 also drops it for qwen3_5_text / qwen3_5_moe_text on 10.x and 12.x and for
  kolibri1 on 12.x (oracle/fp8.py 0.33.0:497-503, utils/deep_gemm.py 0.33.0:28-54).

- A **modular** kernel takes its intermediate caches from vLLM's workspace manager:
  get_simultaneous(max(ws13, out), ws2), each part rounded up to 256 B, over M = max_num_batched_tokens
  in the profile run (fused_moe/modular_kernel.py 0.29.0:1172-1180, 0.33.0:1186-1221). That buffer
  outlives profile_run: non-torch, once.
- A **monolithic** kernel (FlashInfer TRT-LLM on SM100, the OAI Triton MXFP4 kernel on Hopper) takes
  nothing from the manager and allocates its intermediates inside the call: part of the forward moment.

DeepGEMM's load-time re-layout of the expert scales and its JIT warm-up are not counted here: the
warm-up (kernel_warmup, VLLM_DEEP_GEMM_WARMUP "relax", model_executor/warmup/kernel_warmup.py
0.30.0:227-233) runs in compile_or_warm_up_model (v1/worker/gpu_worker.py 0.30.0:773-807), after the
KV cache is sized; the scale layout is the weights' (docs/memory.md section 5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from apron.engine.facts import version_key
from apron.frozen import frozen
from apron.plan.activation import Buffer
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, dsv4_mxfp4_backend, is_dsv4_fp4, pad_to

# TRT-LLM MoE's token tile is autotuned at run time (flashinfer runner.h getMaxNumCtasInBatchDim); the
# largest tile it may pick bounds the padded row count from above.
TRTLLM_MAX_TILE_TOKENS = 128


# DeepGEMM's grouped contiguous layout pads each expert's rows to this: DeepGemmExperts asserts the
# block shape equals get_mk_alignment_for_contiguous_layout(), and block FP8 is 128 x 128
# (experts/deep_gemm_moe.py 0.29.0:136, 0.33.0:150). On 10.x / 12.x a smaller per-call alignment may
# replace it (deep_gemm_utils.py compute_aligned_M_and_alignment 0.29.0:62-76: only when smaller), a
# heuristic compiled into DeepGEMM: the 128 bounds the padded rows from above there.
DEEP_GEMM_ALIGN = 128
# moe_align_block_size in Triton's kernel pads the experts to 32 and takes fewer than 1,024
# (experts/triton_moe.py 0.29.0:86-91, 0.33.0:88-93).
TRITON_MAX_PADDED_EXPERTS = 1024
# FlashInfer TRT-LLM routing (experts/trtllm_fp8_moe.py 0.29.0:97, 0.30.0:104, 0.33.0:107).
TRTLLM_MAX_EXPERTS = 2048
# 0.33's per-model exclusions on Blackwell, model_type -> capability majors (utils/deep_gemm.py
# 0.33.0:28-34); the MoE oracle reads them only in 0.33 (oracle/fp8.py 0.33.0:497-503).
DEEP_GEMM_EXCLUDED_033 = {"qwen3_5_text": (10, 12), "qwen3_5_moe_text": (10, 12), "kolibri1": (12,)}


@frozen
class MoEBackend:
    name: str
    is_monolithic: bool
    basis: str
    # is_deep_gemm_e8m0_used(): DeepGEMM supported and VLLM_USE_DEEP_GEMM_E8M0 (default "1")
    # (utils/deep_gemm.py 0.30.0:119-141); decides TritonOrDeepGemmExperts' workspace
    is_deep_gemm_e8m0: bool = False
    # The engine's own start-up refusal (the oracle raises): the plan says so as a proven constraint,
    # the verdict is `unsupported`; the input itself is valid, so it is no bad-input error.
    refusal: str | None = None


class _Refused(Exception):
    """The oracle (or vLLM reading its switches) raises at start-up: the message says why."""


@frozen
class DeepGemm:
    """What vLLM's DeepGEMM switches answer on this GPU with this environment."""

    is_supported: bool  # is_deep_gemm_supported: cc 9.0 / 10.x / 12.x and VLLM_USE_DEEP_GEMM
    is_e8m0: bool  # is_deep_gemm_e8m0_used
    forced: bool | None  # the oracle's explicit branch: None unless either MoE switch is in the environment


def env_flag(env: Mapping[str, str], name: str) -> bool:
    """envs.py reads these switches as bool(int(os.getenv(name, "1"))); a value int() refuses makes
    vLLM raise at start-up, so the plan refuses it too."""
    text = env.get(name, "1")
    try:
        return bool(int(text))
    except ValueError:
        raise _Refused(
            f"environment variable {name}={text!r}: vLLM reads it as an integer and fails; give 0 or 1"
        ) from None


def deep_gemm(capability: tuple[int, int], env: Mapping[str, str]) -> DeepGemm:
    arch = capability == (9, 0) or capability[0] in (10, 12)
    supported = arch and env_flag(env, "VLLM_USE_DEEP_GEMM")
    forced = None
    if "VLLM_USE_DEEP_GEMM" in env or "VLLM_MOE_USE_DEEP_GEMM" in env:
        forced = env_flag(env, "VLLM_USE_DEEP_GEMM") and env_flag(env, "VLLM_MOE_USE_DEEP_GEMM")
    return DeepGemm(supported, supported and env_flag(env, "VLLM_USE_DEEP_GEMM_E8M0"), forced)


def scheme(config: ModelConfig) -> str:
    """The checkpoint's MoE weight scheme as the oracles tell them apart."""
    method = config.quant_method
    q = config.quantization_config or {}
    if method in ("mxfp4", "gpt_oss_mxfp4"):
        return "mxfp4"
    if method == "fp8":
        if q.get("weight_block_size"):
            return "fp8 block"
        return "fp8 static" if q.get("activation_scheme") == "static" else "fp8 dynamic"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return "int4 weight-only"
    return "bf16" if method is None else str(method)


def activation(config: ModelConfig) -> str:
    return str(config.get("mlp_hidden_act") or config.get("hidden_act") or "silu").lower()


def is_gated(config: ModelConfig) -> bool:
    """Gated activations (SiLU/GELU and mul) take a w13 of twice the intermediate width; relu2 and the
    other *_no_mul activations a w1 of one (adjust_N_for_activation, modular_kernel.py 0.33.0:914-926)."""
    return activation(config) not in ("relu2", "relu2_no_mul", "gelu_no_mul", "silu_no_mul")


def choose_backend(
    config: ModelConfig,
    capability: tuple[int, int],
    release: str = "0.33.0",
    *,
    env: Mapping[str, str] | None = None,
    tensor_parallel_size: int = 1,
) -> MoEBackend:
    """The oracle's pick at plain tensor parallelism (no EP, DP or LoRA); ENV, the engine process's
    environment variables. Where the engine refuses at start-up, a backend carrying the refusal."""
    try:
        return _choose(config, capability, release, env or {}, tensor_parallel_size)
    except _Refused as refused:
        return MoEBackend("NONE", False, "the FP8 MoE oracle raises at start-up", refusal=str(refused))


def _choose(
    config: ModelConfig, capability: tuple[int, int], release: str, env: Mapping[str, str], tensor_parallel_size: int
) -> MoEBackend:
    kind = scheme(config)
    sm100 = capability[0] == 10
    if kind.startswith("fp8") and not is_dsv4_fp4(config) and deep_gemm(capability, env).forced:
        return forced_deep_gemm(config, capability, env, tensor_parallel_size)
    if kind == "fp8 block" and capability >= (8, 9) and not is_dsv4_fp4(config):
        return block_fp8_backend(config, capability, release, env, tensor_parallel_size)
    if is_dsv4_fp4(config):
        # DeepSeek-V4's fp4 experts take their own oracle (weights.py dsv4_mxfp4_backend); Humming's
        # workspace is not read, so it is taken as Marlin's (the kernel it stands in for)
        name, _, _ = dsv4_mxfp4_backend(capability, release)
        monolithic = name.startswith("FLASHINFER_TRTLLM")
        return MoEBackend(name, monolithic, "oracle/mxfp4.py select_deepseek_v4_mxfp4_moe_backend (weights.py)")
    if kind == "mxfp4":
        if sm100:
            return MoEBackend("FLASHINFER_TRTLLM_MXFP4", True, "oracle/mxfp4.py 0.29.0:321-342: TRT-LLM first on SM100")
        if (9, 0) <= capability < (11, 0):
            return MoEBackend("OAI_TRITON_MXFP4", True, "oracle/mxfp4.py 0.29.0:191-198: the OAI Triton kernels")
        return MoEBackend("MARLIN", False, "oracle/mxfp4.py: Marlin below Hopper and on SM12x")
    if kind == "int4 weight-only":
        return MoEBackend("MARLIN", False, "oracle/int_wna16.py 0.29.0:108-180: Marlin (TRT-LLM MXINT4 needs group 32)")
    if sm100 and kind in ("bf16", "fp8 static"):
        return MoEBackend(
            "FLASHINFER_TRTLLM",
            True,
            "oracles/unquantized.py 0.29.0:48-99 and fp8.py 0.29.0:70-134: the TRT-LLM kernel leads on SM100 "
            "(experts/trtllm_bf16_moe.py, trtllm_fp8_moe.py 0.29.0:68-186)",
        )
    if kind == "fp8 static" and capability[0] in (9, 12):
        return MoEBackend("FLASHINFER_CUTLASS", False, "oracle/fp8.py: FlashInfer CUTLASS takes static per-tensor FP8")
    if kind.startswith("fp8") and capability < (8, 9):
        return MoEBackend("MARLIN", False, "oracle/fp8.py: no FP8 compute below cc 8.9, Marlin W8A16")
    return MoEBackend(
        "TRITON",
        False,
        "oracle/fp8.py 0.29.0:81-96 and unquantized.py 0.29.0:77-79 (FlashInfer demoted on SM90): Triton experts",
    )


def block_fp8_backend(
    config: ModelConfig, capability: tuple[int, int], release: str, env: Mapping[str, str], tp: int
) -> MoEBackend:
    """select_fp8_moe_backend for 128 x 128 block FP8 on cc >= 8.9 (oracle/fp8.py 0.29.0:305-452,
    0.33.0:398-550): the explicit DeepGEMM switch, then the priority list, each kernel's checks."""
    dg = deep_gemm(capability, env)
    if is_refined(config, tp):
        return MoEBackend(
            "TRITON",
            False,
            "oracle/fp8.py refine_fp8_moe_block_shape (0.29.0:272-302, 0.33.0:292-322): the TP shard splits a "
            "128 block, the refined weight key is one only Triton takes",
        )
    if capability == (9, 0) and triton_takes(config):
        return MoEBackend(
            "TRITON",
            False,
            "oracle/fp8.py 0.29.0:113-123, 0.31.0:117-127, 0.33.0:122-132: block FP8 at ep_size 1 moves Triton "
            "first on Hopper (ahead of DeepGEMM)",
        )
    if capability == (9, 0):
        return MoEBackend(
            "FLASHINFER_CUTLASS",
            False,
            "experts/triton_moe.py 0.29.0:86-91 refuses 1,024 padded experts; FlashInfer CUTLASS takes block FP8 "
            "on 9.0 (flashinfer_cutlass_moe.py 0.30.0:164-172)",
        )
    if capability[0] == 10 and trtllm_takes(config, release):
        return MoEBackend(
            "FLASHINFER_TRTLLM",
            True,
            "oracle/fp8.py 0.29.0:81-96: the TRT-LLM kernel leads on SM100 (experts/trtllm_fp8_moe.py "
            "0.30.0:67-109, 162-184)",
        )
    excluded = version_key(release) >= version_key("0.33.0") and capability[0] in DEEP_GEMM_EXCLUDED_033.get(
        config.text_model_type, ()
    )
    if dg.forced is not False and not excluded and deep_gemm_takes(config, dg):
        return MoEBackend(
            "DEEPGEMM",
            False,
            "oracle/fp8.py 0.29.0:81-96: DeepGEMM (vendored, vllm/third_party/deep_gemm) follows FlashInfer, whose "
            "kernels refuse block FP8 here (trtllm_fp8_moe.py 0.30.0:67-109, 162-184; flashinfer_cutlass_moe.py "
            "0.30.0:164-172): TritonOrDeepGemmExperts",
            dg.is_e8m0,
        )
    return MoEBackend(
        "TRITON",
        False,
        "oracle/fp8.py 0.29.0:81-96: Triton after FlashInfer and DeepGEMM"
        + (" (0.33 drops DeepGEMM for this model type: oracle/fp8.py 0.33.0:497-503)" if excluded else ""),
    )


def forced_deep_gemm(config: ModelConfig, capability: tuple[int, int], env: Mapping[str, str], tp: int) -> MoEBackend:
    """VLLM_USE_DEEP_GEMM or VLLM_MOE_USE_DEEP_GEMM in the environment, both 1: the oracle returns
    DeepGEMM or raises ValueError (_return_or_raise, oracle/fp8.py 0.29.0:393-407, 0.33.0:484-495), for
    every FP8 MoE checkpoint: the engine does not start where DeepGEMM refuses, and neither does the plan."""
    dg = deep_gemm(capability, env)
    if scheme(config) == "fp8 block" and not is_refined(config, tp) and deep_gemm_takes(config, dg):
        return MoEBackend(
            "DEEPGEMM",
            False,
            "oracle/fp8.py 0.29.0:393-407, 0.33.0:484-495: VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM set "
            "puts TritonOrDeepGemmExperts first",
            dg.is_e8m0,
        )
    names = [name for name in ("VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM") if name in env]
    raise _Refused(
        f"environment variable {names[0]}={env[names[0]]}: set, it makes vLLM's FP8 MoE oracle take DeepGEMM, "
        f"which refuses these experts on cc {capability[0]}.{capability[1]} (only unrefined 128x128 block FP8, "
        "gated SiLU, on cc 9.0 / 10.x / 12.x), so vLLM raises at start-up; unset it"
    )


def is_refined(config: ModelConfig, tp: int) -> bool:
    """refine_fp8_moe_block_shape returns a finer block (oracle/fp8.py 0.29.0:272-302)."""
    block_n, block_k = ((config.quantization_config or {}).get("weight_block_size") or [128, 128])[:2]
    per_rank = config.moe_intermediate_size // tp
    if per_rank % block_n == 0 and (tp == 1 or per_rank % block_k == 0):
        return False
    return math.gcd(block_n, block_k, per_rank, config.hidden_size) >= 32


def triton_takes(config: ModelConfig) -> bool:
    return pad_to(config.num_experts, 32) < TRITON_MAX_PADDED_EXPERTS


def trtllm_takes(config: ModelConfig, release: str) -> bool:
    """TrtLlmFp8Experts (monolithic or modular) on block FP8: SiLU, relu2 (no mul) or uninterleaved
    SwiGLU-OAI, at most 2,048 experts; 0.29 refuses a SwiGLU clamp on block FP8 (trtllm_fp8_moe.py
    0.29.0:68-101, 0.30.0:67-109, 162-184)."""
    if activation(config) not in ("silu", "relu2", "relu2_no_mul", "swigluoai_uninterleave"):
        return False
    if version_key(release) < version_key("0.30.0") and config.get("swiglu_limit") is not None:
        return False
    return config.num_experts <= TRTLLM_MAX_EXPERTS


def deep_gemm_takes(config: ModelConfig, dg: DeepGemm) -> bool:
    """TritonOrDeepGemmExperts: both kernels' checks (experts/fallback.py 0.30.0:52-93): DeepGEMM
    supported, gated, SiLU / SwiGLU-step / uninterleaved SwiGLU-OAI (deep_gemm_moe.py 0.30.0:156-189,
    0.33.0:170-203)."""
    return (
        dg.is_supported and is_gated(config) and activation(config) in ("silu", "swiglustep", "swigluoai_uninterleave")
    )


def workspace_bytes(
    config: ModelConfig,
    settings: EngineSettings,
    backend: MoEBackend,
    *,
    mxfp4_dims: tuple[int, int] | None = None,
    release: str = "0.33.0",
) -> int:
    """The workspace manager's bytes for the chosen modular kernel (0 for a monolithic one). Triton
    (experts/triton_moe.py 0.29.0:218-233): ws13 (M, k, max(N_act, K)), ws2 (M, k, max(N, K)); Marlin
    (experts/marlin_moe.py 0.33.0:653-705): ws1 (M k, max(N, K)), ws2 (M k max(2N, K)) over the per-rank
    intermediate N; FlashInfer CUTLASS (experts/flashinfer_cutlass_moe.py 0.29.0:209-240): (M, K) and
    none. N is the per-rank w13 width (twice the intermediate for gated activations), K the hidden
    size. `mxfp4_dims`: (intermediate, hidden) after MXFP4's padding, where the experts are MXFP4."""
    if not config.is_moe or backend.is_monolithic:
        return 0
    if backend.name == "DEEPGEMM" and uses_deep_gemm_workspace(config, settings, backend):
        return deep_gemm_workspace_bytes(config, settings, release)
    tokens, topk = settings.max_num_batched_tokens, max(config.num_experts_per_tok, 1)
    dsz = DTYPE_BYTES[settings.dtype]
    inter, hidden = mxfp4_dims or (config.moe_intermediate_size // settings.tensor_parallel_size, config.hidden_size)
    width = 2 * inter if is_gated(config) else inter  # N
    if backend.name in ("MARLIN", "HUMMING"):
        ws13, ws2 = tokens * topk * max(inter, hidden), tokens * topk * max(2 * inter, hidden)
    elif backend.name == "FLASHINFER_CUTLASS":
        ws13, ws2 = tokens * hidden, 0
    else:
        act = width // 2 if is_gated(config) else width  # N_act
        ws13, ws2 = tokens * topk * max(act, hidden), tokens * topk * max(width, hidden)
    output = tokens * hidden
    return pad_to(max(ws13, output) * dsz, 256) + pad_to(ws2 * dsz, 256)


def uses_deep_gemm_workspace(config: ModelConfig, settings: EngineSettings, backend: MoEBackend) -> bool:
    """TritonOrDeepGemmExperts.workspace_shapes books DeepGEMM's workspace when E8M0 is used or the
    shape suits DeepGEMM (M >= 128, N and K multiples of 128), else Triton's
    (experts/triton_deep_gemm_moe.py 0.29.0:40-73; deep_gemm_moe.py _valid_deep_gemm_shape 0.29.0:53-55)."""
    if backend.is_deep_gemm_e8m0:
        return True
    width = 2 * (config.moe_intermediate_size // settings.tensor_parallel_size)
    return (
        settings.max_num_batched_tokens >= DEEP_GEMM_ALIGN
        and width % DEEP_GEMM_ALIGN == 0
        and config.hidden_size % DEEP_GEMM_ALIGN == 0
    )


def deep_gemm_rows(tokens: int, topk: int, num_local_experts: int) -> int:
    """compute_aligned_M_and_alignment with no CPU expert counts (deep_gemm_utils.py 0.29.0:28-83,
    0.33.0:27-82): M_sum = round_up(T k + min(T k, E) (align - 1), align)."""
    routed = tokens * topk
    return pad_to(routed + min(routed, num_local_experts) * (DEEP_GEMM_ALIGN - 1), DEEP_GEMM_ALIGN)


def deep_gemm_workspace_bytes(config: ModelConfig, settings: EngineSettings, release: str) -> int:
    """DeepGemmExperts.workspace_shapes (experts/deep_gemm_moe.py 0.29.0:199-223, 0.31.0:213-245): ws1
    (M_sum, max(N_act, K)), ws2 (M_sum, max(N, K)), output (T, K), in the activation dtype; from 0.31
    ws1 is sized in bytes as the FP8 buffer it is used as (_fp8_workspace_shape 0.31.0:53-65:
    ceil(columns / dtype bytes) elements). All experts are local at plain TP."""
    tokens, topk = settings.max_num_batched_tokens, max(config.num_experts_per_tok, 1)
    dsz = DTYPE_BYTES[settings.dtype]
    inter, hidden = config.moe_intermediate_size // settings.tensor_parallel_size, config.hidden_size
    rows = deep_gemm_rows(tokens, topk, config.num_experts)
    columns1 = max(inter, hidden)  # N_act: the gated activation halves N = 2 I
    if version_key(release) >= version_key("0.31.0"):
        columns1 = -(-columns1 // dsz)
    ws1, ws2, output = rows * columns1, rows * max(2 * inter, hidden), tokens * hidden
    return pad_to(max(ws1, output) * dsz, 256) + pad_to(ws2 * dsz, 256)


def monolithic_buffers(config: ModelConfig, settings: EngineSettings, backend: MoEBackend) -> tuple[Buffer, ...]:
    """FlashInfer TRT-LLM MoE's own intermediates, live inside the MoE call of the dummy forward
    (flashinfer-python 0.7.2.post1 trtllm_fused_moe_kernel_launcher.cu: Bf16MoeLauncher :1871-1885,
    Fp8BlockScaleStagedMoeLauncher :2685-2702): rows P = T k + min(E, T k) (tile - 1), padded to the tile,
    bounded here by the largest tile; routing tensors are int32 of T k rows."""
    if not backend.name.startswith("FLASHINFER_TRTLLM") or not config.is_moe:
        return ()
    tokens, topk, experts = settings.max_num_batched_tokens, max(config.num_experts_per_tok, 1), config.num_experts
    tile = TRTLLM_MAX_TILE_TOKENS
    rows = pad_to(tokens * topk + min(experts, tokens * topk) * (tile - 1), tile)
    inter, hidden = config.moe_intermediate_size // settings.tensor_parallel_size, config.hidden_size
    gated = 2 if is_gated(config) else 1
    out = [Buffer("TRT-LLM MoE routing (expanded ids, permutation)", (3 * tokens * topk + 2 * rows,), 4)]
    if scheme(config) == "fp8 block" and not is_dsv4_fp4(config):
        out += [
            Buffer("TRT-LLM MoE gemm1 output (fp8)", (rows, gated * inter), 1),
            Buffer("TRT-LLM MoE gemm1 scales", (gated * inter // 128, rows), 4),
            Buffer("TRT-LLM MoE activation (fp8)", (rows, inter), 1),
            Buffer("TRT-LLM MoE activation scales", (max(inter // 128, 1), rows), 4),
        ]
    else:
        out.append(Buffer("TRT-LLM MoE gemm1 output", (rows, inter), 2))
    out.append(Buffer("TRT-LLM MoE gemm2 output", (rows, hidden), 2))
    return tuple(out)
