"""Block-FP8 experts with the DeepGEMM every vLLM 0.29-0.33 wheel vendors (vllm/third_party/deep_gemm):
which kernel the FP8 MoE oracle picks per capability, release, TP size and environment, and the
workspace TritonOrDeepGemmExperts asks of the workspace manager. Expected bytes are worked out here
by hand from the source's arithmetic (deep_gemm_utils.py compute_aligned_M_and_alignment,
deep_gemm_moe.py workspace_shapes, modular_kernel.py get_simultaneous), not read from the planner."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import load_facts
from apron.hardware import resolve_gpu
from apron.plan import moe
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings, resolve_settings
from conftest import snapshot_path

QWEN = "Qwen/Qwen3.6-35B-A3B-FP8"  # qwen3_5_moe_text: 256 experts, top-8, I 512, H 2048
GLM = "zai-org/GLM-5.3-Flash"  # glm5_next_text: 288 experts, top-8, I 2048, H 4096


@pytest.fixture(autouse=True)
def _facts(apron_home_with_facts):
    return apron_home_with_facts


def config(name: str, **text_overrides) -> ModelConfig:
    raw = copy.deepcopy(load_snapshot(snapshot_path(name)).config)
    raw.get("text_config", raw).update(text_overrides)
    return ModelConfig.from_config(raw)


def pick(name: str, capability, release="0.33.0", env=None, tp=1, **overrides) -> moe.MoEBackend:
    return moe.choose_backend(config(name, **overrides), capability, release, env=env, tensor_parallel_size=tp)


@pytest.mark.parametrize(
    "name,capability,release,env,tp,expected",
    [
        # Hopper: Triton is moved ahead of DeepGEMM for block FP8 at ep_size 1 (oracle/fp8.py 0.29.0:113-123)
        (QWEN, (9, 0), "0.30.0", {}, 1, "TRITON"),
        (GLM, (9, 0), "0.33.0", {}, 4, "TRITON"),
        # SM100: FlashInfer TRT-LLM leads and takes SiLU experts
        (QWEN, (10, 0), "0.33.0", {}, 1, "FLASHINFER_TRTLLM"),
        (GLM, (10, 0), "0.30.0", {}, 2, "FLASHINFER_TRTLLM"),  # its swiglu_limit 10 too, from 0.30
        # SM120: neither FlashInfer kernel takes block FP8, DeepGEMM is next
        (QWEN, (12, 0), "0.32.0", {}, 2, "DEEPGEMM"),
        (GLM, (12, 0), "0.33.0", {}, 2, "DEEPGEMM"),
        # 0.33 drops DeepGEMM for qwen3_5_moe_text on 10.x / 12.x (oracle/fp8.py 0.33.0:497-503)
        (QWEN, (12, 0), "0.33.0", {}, 2, "TRITON"),
        # either switch at 0 drops it; either one set, both 1, puts it first (even on Hopper)
        (GLM, (12, 0), "0.33.0", {"VLLM_MOE_USE_DEEP_GEMM": "0"}, 2, "TRITON"),
        (QWEN, (9, 0), "0.30.0", {"VLLM_USE_DEEP_GEMM": "1"}, 1, "DEEPGEMM"),
        (GLM, (10, 0), "0.33.0", {"VLLM_MOE_USE_DEEP_GEMM": "1"}, 2, "DEEPGEMM"),
        # the explicit branch comes before 0.33's model exclusion
        (QWEN, (12, 0), "0.33.0", {"VLLM_USE_DEEP_GEMM": "1"}, 2, "DEEPGEMM"),
        # Ada has FP8 but no DeepGEMM (support_deep_gemm: 9.0, 10.x, 12.x)
        (QWEN, (8, 9), "0.33.0", {}, 1, "TRITON"),
        # 512 / 8 = 64 per rank splits the 128 block: refined to 64 x 64, a key only Triton takes
        (QWEN, (10, 0), "0.33.0", {}, 8, "TRITON"),
        (QWEN, (12, 0), "0.30.0", {}, 8, "TRITON"),
    ],
)
def test_the_fp8_oracle_places_deepgemm_by_capability_release_and_environment(
    name, capability, release, env, tp, expected
):
    assert pick(name, capability, release, env, tp).name == expected


def test_what_trtllm_refuses_on_sm100_goes_to_deepgemm():
    """SwiGLU-step experts: TRT-LLM takes SiLU, relu2 and uninterleaved SwiGLU-OAI only
    (trtllm_fp8_moe.py 0.30.0:177-184), DeepGEMM takes SwiGLU-step (deep_gemm_moe.py 0.30.0:177-189);
    above 2,048 experts TRT-LLM's routing refuses (0.30.0:104); 0.29 refuses a SwiGLU clamp on block
    FP8 (0.29.0:68-101) where 0.30 takes it with SiLU (GLM-5.3-Flash carries swiglu_limit 10 and passes it
    to its experts, models/glm5next/nvidia/model.py 0.30.0:208-247; 0.29 has no GLM-5.3-Flash, so a
    Qwen3.6 config with a clamp stands in)."""
    assert pick(GLM, (10, 0), hidden_act="swiglustep").name == "DEEPGEMM"
    assert pick(GLM, (10, 0), n_routed_experts=2304).name == "DEEPGEMM"
    assert pick(GLM, (10, 0), n_routed_experts=2048).name == "FLASHINFER_TRTLLM"
    assert pick(QWEN, (10, 0), "0.29.0", swiglu_limit=7.0).name == "DEEPGEMM"
    assert pick(QWEN, (10, 0), "0.29.0").name == "FLASHINFER_TRTLLM"
    assert pick(GLM, (10, 0), "0.30.0").name == "FLASHINFER_TRTLLM"
    # GELU: neither FlashInfer nor DeepGEMM, Triton
    assert pick(GLM, (10, 0), hidden_act="gelu").name == "TRITON"


def test_hopper_past_tritons_expert_limit_takes_flashinfer_cutlass():
    """Triton's moe_align_block_size wants fewer than 1,024 padded experts (triton_moe.py 0.29.0:86-91):
    993 pads to 1,024; FlashInfer CUTLASS takes block FP8 on 9.0 (flashinfer_cutlass_moe.py 0.30.0:164-172)."""
    assert pick(GLM, (9, 0), n_routed_experts=992).name == "TRITON"
    assert pick(GLM, (9, 0), n_routed_experts=993).name == "FLASHINFER_CUTLASS"


@pytest.mark.parametrize(
    "capability,tp,overrides",
    [
        ((8, 9), 1, {}),  # Ada: no DeepGEMM
        ((12, 0), 8, {}),  # the refined 64 x 64 block
        ((9, 0), 1, {"hidden_act": "gelu"}),  # an activation DeepGEMM does not take
    ],
)
def test_a_forced_deepgemm_that_refuses_the_experts_is_refused_as_vllm_refuses_it(capability, tp, overrides):
    """_return_or_raise (oracle/fp8.py 0.29.0:393-407): with the switch set, vLLM raises ValueError
    at start-up instead of walking the list; the backend carries that refusal."""
    refused = pick(QWEN, capability, env={"VLLM_USE_DEEP_GEMM": "1"}, tp=tp, **overrides)
    assert refused.refusal is not None and "VLLM_USE_DEEP_GEMM=1" in refused.refusal
    assert pick(QWEN, capability, tp=tp, **overrides).name != "DEEPGEMM"
    assert pick(QWEN, capability, tp=tp, **overrides).refusal is None


def test_e8m0_follows_its_switch_and_a_non_integer_switch_is_refused():
    assert pick(GLM, (12, 0)).is_deep_gemm_e8m0
    assert not pick(GLM, (12, 0), env={"VLLM_USE_DEEP_GEMM_E8M0": "0"}).is_deep_gemm_e8m0
    refused = pick(GLM, (12, 0), env={"VLLM_USE_DEEP_GEMM": "true"})
    assert refused.refusal is not None and "VLLM_USE_DEEP_GEMM='true'" in refused.refusal


def test_a_plan_the_oracle_refuses_is_unsupported_not_bad_input():
    """The deployment is valid input; the engine refuses it at start-up: the plan's verdict says so, with
    the refusal as a proven constraint (exit 1, not 2)."""
    user = UserSettings(max_model_len=4096, env=(("VLLM_USE_DEEP_GEMM", "1"),))
    result = plan_checkpoint(load_snapshot(snapshot_path(QWEN)), resolve_gpu("4090"), user, engine_version="0.32.0")
    assert result.verdict == "unsupported"
    refusal = [p for p in result.problems if p.label == "proven_constraint" and "VLLM_USE_DEEP_GEMM=1" in p.message]
    assert refusal and refusal[0].kind == "quantization_capability"


def workspace(release: str, gpu: str = "RTX 5090") -> int:
    user = UserSettings(
        max_model_len=4096, tensor_parallel_size=2, max_num_batched_tokens=8192, language_model_only=True
    )
    result = plan_checkpoint(load_snapshot(snapshot_path(QWEN)), resolve_gpu(gpu), user, engine_version=release)
    return {c["name"]: c["num_bytes"] for c in result.details["non_torch"]}["MoE workspace"]


def test_deepgemm_workspace_pads_every_expert_to_128_rows():
    """Qwen3.6-35B-A3B-FP8 at TP 2 on RTX 5090s, T 8,192: per rank I = 256, H = 2,048, N = 512.
    Rows M_sum = round_up(8192 * 8 + min(65536, 256) * 127, 128) = 98,048 (Triton: 65,536).
    0.32: ws1 (98048, ceil(2048 / 2)) bf16 = 200,802,304 B (above the (8192, 2048) output), ws2
    (98048, 2048) bf16 = 401,604,608 B. 0.30 books ws1 at full width: 401,604,608 B. 0.33 drops
    DeepGEMM for this model type: Triton's (65536, 2048) twice."""
    assert workspace("0.32.0") == 200_802_304 + 401_604_608  # 574.5 MiB
    assert workspace("0.30.0") == 2 * 401_604_608  # 766 MiB
    assert workspace("0.33.0") == 2 * 268_435_456  # 512 MiB, Triton's
    assert workspace("0.32.0", "H100") == 2 * 268_435_456  # Hopper keeps Triton


def test_without_e8m0_a_short_batch_books_tritons_workspace():
    """TritonOrDeepGemmExperts.workspace_shapes: DeepGEMM's when E8M0 is used or M >= 128 with N, K
    multiples of 128; else Triton's (triton_deep_gemm_moe.py 0.29.0:40-73)."""
    cfg = config(GLM)
    settings = resolve_settings(
        load_snapshot(snapshot_path(GLM)),
        cfg,
        resolve_gpu("RTX 5090"),
        load_facts("0.33.0"),
        UserSettings(max_model_len=64, tensor_parallel_size=2, max_num_batched_tokens=64, max_num_seqs=64),
    )
    assert settings.max_num_batched_tokens == 64
    e8m0 = moe.MoEBackend("DEEPGEMM", False, "", is_deep_gemm_e8m0=True)
    plain = dataclasses.replace(e8m0, is_deep_gemm_e8m0=False)
    triton = moe.MoEBackend("TRITON", False, "")
    # 64 tokens x top-8 = 512 routed rows, 288 experts: round_up(512 + 288 * 127, 128) = 37,120 rows
    assert moe.deep_gemm_rows(64, 8, 288) == 37_120
    inter, hidden = 2048 // 2, 4096
    expected = 37_120 * (hidden // 2) * 2 + 37_120 * max(2 * inter, hidden) * 2
    assert moe.workspace_bytes(cfg, settings, e8m0, release="0.33.0") == expected
    assert moe.workspace_bytes(cfg, settings, plain, release="0.33.0") == moe.workspace_bytes(cfg, settings, triton)
    longer = dataclasses.replace(settings, max_num_batched_tokens=128)
    assert moe.workspace_bytes(cfg, longer, plain, release="0.33.0") > moe.workspace_bytes(cfg, longer, triton)
