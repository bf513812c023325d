"""The fused-MoE kernel the release picks, and the memory that choice costs.

Each quantization method asks its oracle (model_executor/layers/fused_moe/oracle/{unquantized, fp8,
mxfp4, int_wna16}.py) for the first backend of a priority list whose kernel supports the device,
scheme and activation; monolithic kernels are tried before modular ones of the same backend. The
lists are the same in 0.29-0.33 (oracle/unquantized.py 0.29.0:48-99, oracle/fp8.py 0.29.0:70-134 and
0.30.0:70-134, oracle/mxfp4.py 0.29.0:191-198 and 321-342, oracle/int_wna16.py 0.29.0:108-180), so the
choice here depends on the GPU and the checkpoint, not the release. A stock install is assumed:
flashinfer-python present (vLLM's pinned dependency), DeepGEMM absent (not a dependency).

- A **modular** kernel takes its intermediate caches from vLLM's workspace manager:
  get_simultaneous(max(ws13, out), ws2), each part rounded up to 256 B, over M = max_num_batched_tokens
  in the profile run (fused_moe/modular_kernel.py 0.29.0:1172-1180, 0.33.0:1186-1221). That buffer
  outlives profile_run: non-torch, once.
- A **monolithic** kernel (FlashInfer TRT-LLM on SM100, the OAI Triton MXFP4 kernel on Hopper) takes
  nothing from the manager and allocates its intermediates inside the call: part of the forward moment.
"""

from __future__ import annotations

from apron.frozen import frozen
from apron.plan.activation import Buffer
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, dsv4_mxfp4_backend, is_dsv4_fp4, pad_to

# TRT-LLM MoE's token tile is autotuned at run time (flashinfer runner.h getMaxNumCtasInBatchDim); the
# largest tile it may pick bounds the padded row count from above.
TRTLLM_MAX_TILE_TOKENS = 128


@frozen
class MoEBackend:
    name: str
    is_monolithic: bool
    basis: str


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


def is_gated(config: ModelConfig) -> bool:
    """Gated activations (SiLU/GELU and mul) take a w13 of twice the intermediate width; relu2 and the
    other *_no_mul activations a w1 of one (adjust_N_for_activation, modular_kernel.py 0.33.0:914-926)."""
    act = str(config.get("mlp_hidden_act") or config.get("hidden_act") or "silu").lower()
    return act not in ("relu2", "relu2_no_mul", "gelu_no_mul", "silu_no_mul")


def choose_backend(config: ModelConfig, capability: tuple[int, int], release: str = "0.33.0") -> MoEBackend:
    """The oracle's pick at plain tensor parallelism (no EP, DP or LoRA)."""
    kind = scheme(config)
    sm100 = capability[0] == 10
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
    if sm100 and kind in ("bf16", "fp8 block", "fp8 static"):
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
        "oracle/fp8.py 0.29.0:113-123 (block FP8 moves Triton first on Hopper) and unquantized.py 0.29.0:77-79 "
        "(FlashInfer demoted on SM90): Triton experts",
    )


def workspace_bytes(
    config: ModelConfig, settings: EngineSettings, backend: MoEBackend, *, mxfp4_dims: tuple[int, int] | None = None
) -> int:
    """The workspace manager's bytes for the chosen modular kernel (0 for a monolithic one). Triton
    (experts/triton_moe.py 0.29.0:218-233): ws13 (M, k, max(N_act, K)), ws2 (M, k, max(N, K)); Marlin
    (experts/marlin_moe.py 0.33.0:653-705): ws1 (M k, max(N, K)), ws2 (M k max(2N, K)) over the per-rank
    intermediate N; FlashInfer CUTLASS (experts/flashinfer_cutlass_moe.py 0.29.0:209-240): (M, K) and
    none. N is the per-rank w13 width (twice the intermediate for gated activations), K the hidden
    size. `mxfp4_dims`: (intermediate, hidden) after MXFP4's padding, where the experts are MXFP4."""
    if not config.is_moe or backend.is_monolithic:
        return 0
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
