"""Issue 20's mechanisms, each against the shapes the vLLM source gives it: every byte once (kept
workspaces, construction buffers), the MoE kernel each GPU gets, the graph terms per layer kind and
backend, DeepSeek-V4's attention padding, the all-reduce fusion workspace, and the stated range with
the verdict it decides. Expected values are recomputed here from the config and the settings."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import load_facts
from apron.hardware import resolve_gpu
from apron.plan import graphs, moe
from apron.plan.allocator import load_block_bytes
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.quantity import Quantity
from apron.plan.result import Plan
from apron.plan.settings import UserSettings, resolve_settings
from apron.report.card import render_card
from conftest import snapshot_path

MIB, GIB = 2**20, 2**30


@pytest.fixture(autouse=True)
def _facts(apron_home_with_facts):
    return apron_home_with_facts


def plan(name: str, gpu: str, engine: str = "0.33.0", **settings) -> Plan:
    user = UserSettings(**{"max_model_len": 4096, **settings})
    return plan_checkpoint(load_snapshot(snapshot_path(name)), resolve_gpu(gpu), user, engine_version=engine)


def parts(result: Plan, key: str) -> dict[str, int]:
    return {c["name"]: c["num_bytes"] for c in result.details[key]}


def moment(result: Plan, name: str) -> dict:
    return next(m for m in result.details["activation"]["moments"] if m["name"] == name)


def config(name: str) -> ModelConfig:
    return ModelConfig.from_config(load_snapshot(snapshot_path(name)).config)


# ---- each byte once --------------------------------------------------------------------------------


def test_workspaces_kept_after_the_compile_moment_offset_it_and_count_once_in_non_torch():
    """gpt-oss-20b on an RTX 4090 (0.30): the compile transient precedes the first GEMM and the first
    MoE layer, so vLLM's transient is the moment less the cuBLAS and Marlin MoE workspaces, which
    non-torch holds (utils/mem_utils.py: transient = peak - allocated after the run)."""
    result = plan("openai/gpt-oss-20b", "4090", "0.30.0", max_model_len=640)
    compile_moment = moment(result, "compile transient")
    kept = {b["name"].split(" (")[0]: b["bytes"] for b in compile_moment["not_yet_live"]}
    non_torch = parts(result, "non_torch")
    assert kept == {
        "cuBLAS workspace": non_torch["cuBLAS workspace (default stream)"],
        "workspace manager buffer": non_torch["MoE workspace"],
    }
    assert compile_moment["bytes"] == compile_moment["live_bytes"] - sum(kept.values())
    assert result.quantities["activation_peak_bytes"].value == compile_moment["bytes"]
    # the forward pass comes after both: nothing to offset there, and no workspace among its tensors
    forward = moment(result, "forward pass")
    assert forward["not_yet_live"] == [] and not any("workspace" in b["name"] for b in forward["buffers"])


def test_construction_buffers_are_weights_not_activation():
    """Qwen3.8-Flash-Next's QSA layers register their top-k buffers in __init__ (nvidia/qsa.py
    0.33.0:524-531): inside vLLM's "Model loading took", and in no moment of the profile run."""
    result = plan("Qwen/Qwen3.8-Flash-Next", "H200", tensor_parallel_size=4, language_model_only=True)
    groups = {g["group"]: g["bytes_per_gpu"] for g in result.details["weights"]["groups"]}
    cfg = config("Qwen/Qwen3.8-Flash-Next").text
    qsa_layers = sum(1 for t in cfg["layer_types"] if t != "linear_attention")
    width = int(cfg["indexer_budget"]) + int(cfg["indexer_compress_ratio"])
    assert groups["buffers made at construction"] == qsa_layers * load_block_bytes(8192 * width * 4)
    for m in result.details["activation"]["moments"]:
        assert not any("QSA" in b["name"] for b in m["buffers"]), m["name"]


def test_the_workspace_manager_holds_the_largest_request_once():
    """GLM-5.3-Flash's sparse indexer and its MoE share vLLM's one workspace buffer: non-torch holds the
    larger, and the forward moment none of it (v1/worker/workspace.py: the buffer only grows)."""
    result = plan("zai-org/GLM-5.3-Flash", "H200", tensor_parallel_size=4, language_model_only=True)
    forward = moment(result, "forward pass")
    assert not any("workspace growth" in b["name"] for b in forward["buffers"])
    workspace = parts(result, "non_torch")["MoE workspace"]
    cfg = config("zai-org/GLM-5.3-Flash")
    backend = moe.choose_backend(cfg, (9, 0))
    settings = resolve_settings(
        load_snapshot(snapshot_path("zai-org/GLM-5.3-Flash")),
        cfg,
        resolve_gpu("H200"),
        load_facts("0.33.0"),
        UserSettings(max_model_len=4096, tensor_parallel_size=4, language_model_only=True),
    )
    assert workspace >= moe.workspace_bytes(cfg, settings, backend) > 0


# ---- the MoE kernel each GPU gets ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name,capability,expected,monolithic",
    [
        ("zai-org/GLM-4.7-Flash", (10, 0), "FLASHINFER_TRTLLM", True),  # bf16 on SM100
        ("zai-org/GLM-4.7-Flash", (9, 0), "TRITON", False),  # FlashInfer demoted on SM90
        ("Qwen/Qwen3.6-35B-A3B-FP8", (10, 0), "FLASHINFER_TRTLLM", True),  # block FP8 on SM100
        ("Qwen/Qwen3.6-35B-A3B-FP8", (9, 0), "TRITON", False),  # block FP8: Triton first on Hopper
        ("Qwen/Qwen3.6-35B-A3B-FP8", (8, 0), "MARLIN", False),  # no FP8 compute below 8.9
        ("openai/gpt-oss-120b", (9, 0), "OAI_TRITON_MXFP4", True),
        ("openai/gpt-oss-120b", (8, 9), "MARLIN", False),
        ("openai/gpt-oss-120b", (10, 0), "FLASHINFER_TRTLLM_MXFP4", True),
    ],
)
def test_the_oracle_picks_the_kernel_by_scheme_and_capability(name, capability, expected, monolithic):
    backend = moe.choose_backend(config(name), capability)
    assert (backend.name, backend.is_monolithic) == (expected, monolithic)


def test_a_monolithic_kernel_books_no_workspace_and_allocates_inside_the_forward():
    b200, h200 = (plan("zai-org/GLM-4.7-Flash", gpu, max_model_len=8192) for gpu in ("B200", "H200"))
    assert "MoE workspace" not in parts(b200, "non_torch")
    assert parts(h200, "non_torch")["MoE workspace"] > 0
    inside = {b["name"] for b in moment(b200, "forward pass")["buffers"] if b["name"].startswith("TRT-LLM")}
    assert {"TRT-LLM MoE gemm1 output", "TRT-LLM MoE gemm2 output"} <= inside


def test_non_gated_experts_take_one_intermediate_width():
    """relu2 (Nemotron-H): N = I/tp and N_act = N, so ws13 and ws2 are both (T, k, max(I, H))
    (modular_kernel.py 0.33.0:914-926); the gated formula would book ws2 at max(2I, H)."""
    name = "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16"
    result = plan(name, "H100", max_model_len=8192)
    cfg = config(name)
    assert not moe.is_gated(cfg)
    tokens, topk, hidden, inter = 8192, cfg.num_experts_per_tok, cfg.hidden_size, cfg.moe_intermediate_size
    part = math.ceil(tokens * topk * max(inter, hidden) * 2 / 256) * 256
    assert parts(result, "non_torch")["MoE workspace"] == 2 * part


# ---- CUDA graphs ------------------------------------------------------------------------------------


def test_fa3_mla_accumulators_on_hopper_and_flashinfer_workspaces_on_b200():
    """FLASH_ATTN_MLA (H100's first MLA choice) caps splits at 32 with FULL graphs, head size
    kv_lora_rank (flashattn_mla.py 0.30.0:128-159); FlashInfer-MLA on SM100 makes a 128 MiB
    workspace at its first decode, inside the estimate (mla/flashinfer_mla.py 0.29.0:69-88)."""
    name = "deepseek-ai/DeepSeek-V2-Lite-Chat"
    h100, b200 = plan(name, "H100"), plan(name, "B200")
    cfg = config(name)
    assert h100.details["kv"]["backend"] == "FLASH_ATTN_MLA"
    expected = 32 * 512 * cfg.num_heads * (cfg.kv_lora_rank + 1) * 4
    assert parts(h100, "cudagraphs")["FA3 split-KV accumulators (first FULL graph)"] == expected
    assert b200.details["kv"]["backend"] == "FLASHINFER_MLA"
    assert parts(b200, "cudagraphs")["decode kernel workspace (first decode forward)"] == 128 * MIB


def test_flashinfer_trtllm_decode_workspace_on_b200_dense():
    result = plan("Qwen/Qwen3-8B", "B200")
    assert result.details["kv"]["backend"] == "FLASHINFER"
    assert parts(result, "cudagraphs")["decode kernel workspace (first decode forward)"] == 394 * MIB


def test_sliding_and_full_fa3_models_carry_the_accumulators_in_the_high_end_only():
    result = plan("openai/gpt-oss-120b", "H100", "0.29.0", max_model_len=640)
    term = next(c for c in result.details["cudagraphs"] if c["name"].startswith("FA3 split-KV"))
    assert term["num_bytes"] == 0 and term["high_bytes"] == 32 * 1024 * 64 * 65 * 4  # one copy, 1,024 FULL sizes
    q = result.quantities["cudagraph_bytes"]
    assert q.high - q.value >= term["high_bytes"]


def test_state_mixers_stay_outside_piecewise_graphs():
    """mamba-2.8b: a PIECEWISE graph holds the norm and the two projections of a layer, a FULL graph
    the mixer kernels too (compilation/backends.py split_graph; config/compilation.py _attention_ops)."""
    cfg = config("state-spaces/mamba-2.8b-hf")
    result = plan("state-spaces/mamba-2.8b-hf", "4090", "0.29.0", max_model_len=640)
    per = graphs.CUDAGRAPH_PER_LAYER_GRAPH_BYTES * cfg.num_layers / graphs.DENSE_LAUNCHES
    extrapolated = parts(result, "cudagraphs")["FULL graphs extrapolated from the second sample"]
    assert extrapolated == (35 - 1) * int(per * 7)  # 35 FULL sizes at 256 sequences
    first = parts(result, "cudagraphs")["piecewise graphs and the first FULL graph"]
    assert first == int(graphs.CUDAGRAPH_BASE_BYTES + per * (51 * 3 + 7))


# ---- DeepSeek-V4, the fusion workspace, MLA's context width -------------------------------------------


def test_deepseek_v4_holds_padded_attention_and_hyper_connection_streams():
    """At TP 8 a rank has 8 heads; FlashMLA pads them to 64 (nvidia/flashmla.py 0.29.0:78-85): the
    attention output and the profile run's padded query copy are [T, 64, 512] each, beside hc_mult - 1
    more [T, H] residual streams (kernels/mhc/tilelang.py)."""
    name = "deepseek-ai/DeepSeek-V4-Flash-0731"
    result = plan(name, "H200", tensor_parallel_size=8, max_model_len=32768)
    forward = {b["name"]: b["bytes"] for b in moment(result, "forward pass")["buffers"]}
    cfg = config(name).text
    padded = 8192 * 64 * int(cfg["head_dim"]) * 2
    assert forward["attention output (padded heads)"] == forward["padded query copy (profile run)"] == padded
    assert forward["hyper-connection residual streams"] == 8192 * (cfg["hc_mult"] - 1) * cfg["hidden_size"] * 2


def test_allreduce_fusion_workspace_at_tensor_parallelism_on_hopper():
    """allreduce_rms_fusion.py: 64 MiB cap at TP 2 on cc 9.0, M = cap / (H x 2) tokens, three MNNVL
    buffers of two-shot size (flashinfer comm/trtllm_mnnvl_ar.py)."""
    result = plan("Qwen/Qwen3-32B", "H100", tensor_parallel_size=2)
    tokens = 64 * MIB // (5120 * 2)
    two_shot = 2 * math.ceil(tokens / 2) * 2 * 5120 * 2
    assert parts(result, "non_torch")["FlashInfer all-reduce fusion workspace"] == 3 * math.ceil(two_shot / 32) * 32
    assert "FlashInfer all-reduce fusion workspace" not in parts(plan("Qwen/Qwen3-32B", "H100"), "non_torch")
    assert "FlashInfer all-reduce fusion workspace" not in parts(
        plan("Qwen/Qwen3-32B", "A100", tensor_parallel_size=2), "non_torch"
    )


def test_mla_context_width_is_aligned_to_the_chosen_backends_block():
    """determine_chunked_prefill_workspace_size: min(max(8 L, 4 S B), 65536) with B the block the
    backend settles on; at L = 4096 and S = 1024 the 4 S B side decides: 16 on H100 (FLASH_ATTN_MLA),
    32 on B200 (FlashInfer-MLA)."""
    name = "deepseek-ai/DeepSeek-V2-Lite-Chat"
    cfg = config(name)
    per_row = cfg.num_heads * (int(cfg.get("qk_nope_head_dim")) + int(cfg.get("v_head_dim"))) * 2
    for gpu, block in (("H100", 16), ("B200", 32)):
        result = plan(name, gpu, max_model_len=4096, max_num_seqs=1024)
        rows = min(max(8 * 4096, 4 * 1024 * block), 65536)
        context = {b["name"]: b["bytes"] for b in moment(result, "forward pass")["buffers"]}
        assert context["MLA context up-projection"] == rows * per_row, gpu


# ---- the range and the verdict it decides -------------------------------------------------------------


def test_every_budget_quantity_states_a_range_that_holds_its_value():
    result = plan("Qwen/Qwen3-32B", "H100", max_model_len=8192)
    document = json.loads(json.dumps(result.to_json()))
    for name in (
        "weights_bytes_per_gpu",
        "non_torch_bytes",
        "cudagraph_bytes",
        "activation_peak_bytes",
        "available_kv_bytes",
        "num_kv_blocks",
        "kv_tokens",
        "max_concurrency",
    ):
        q = document["quantities"][name]
        assert q["low"] < q["value"] < q["high"] or q["low"] <= q["value"] <= q["high"], name
    available = document["quantities"]["available_kv_bytes"]
    terms = sum(
        document["quantities"][n]["high"]
        for n in ("weights_bytes_per_gpu", "non_torch_bytes", "cudagraph_bytes", "activation_peak_bytes")
    )
    assert available["low"] == document["quantities"]["requested_bytes"]["value"] - terms
    exact = document["quantities"]["requested_bytes"]
    assert exact["low"] == exact["value"] == exact["high"]
    # an older document, written before the range existed, reads back with the value standing for both
    old = {"value": 5, "unit": "tokens", "label": "predicted", "basis": "b"}
    assert (Quantity.from_json(old).low, Quantity.from_json(old).high) == (5, 5)


def _tight_length(name: str, gpu: str) -> int:
    """A max_model_len whose one request fits the central budget but not its low end."""
    result = plan(name, gpu, max_model_len=8192)
    q = result.quantities["available_kv_bytes"]
    per_token = result.quantities["kv_bytes_per_token"].value
    return int((q.low + q.value) / 2 // per_token) // 16 * 16


def test_tight_when_one_request_fits_only_above_the_low_end():
    length = _tight_length("Qwen/Qwen3-32B", "H100")
    result = plan("Qwen/Qwen3-32B", "H100", max_model_len=length)
    assert result.verdict == "tight"
    (fix,) = [p.message for p in result.problems if p.kind == "fix"]
    assert fix.endswith("fits at the low end of the range")
    fitting = int(fix.split("--max-model-len ")[1].split()[0])
    assert fitting < length
    assert plan("Qwen/Qwen3-32B", "H100", max_model_len=fitting).verdict == "fits"
    card = render_card(result)
    assert "verdict: TIGHT" in card
    assert "command as given (fits only above the low end of its range):" in card
    assert result.fixed is not None and f"--max-model-len {fitting}" in result.fixed.command
    budget = next(line for line in card.splitlines() if "KV cache budget" in line)
    q = result.quantities["available_kv_bytes"]
    assert f"({q.low / GIB:.2f}-{q.high / GIB:.2f})" in budget


def test_a_tight_plan_prints_its_json_and_exits_one():
    length = _tight_length("Qwen/Qwen3-32B", "H100")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "apron.cli",
            "plan",
            "Qwen/Qwen3-32B",
            "--gpu",
            "H100",
            "--max-model-len",
            str(length),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["verdict"] == "tight" and document["schema"] == "apron.plan/1"


def test_triton_mla_reserves_its_split_logits_in_the_budget_from_033():
    """A100's MLA backend is TRITON_MLA; 0.33 reserves its decode split-KV logits inside the profile
    forward (triton_mla.py 0.33.0:234-243), earlier releases after the budget (slack)."""
    name = "deepseek-ai/DeepSeek-V2-Lite-Chat"
    cfg = config(name)
    new, old = (plan(name, "A100", engine, max_model_len=32768) for engine in ("0.33.0", "0.32.0"))
    assert new.details["kv"]["backend"] == old.details["kv"]["backend"] == "TRITON_MLA"
    splits = 32768 // 512  # a power of two already
    reservation = new.settings.max_num_seqs * cfg.num_heads * splits * (cfg.kv_lora_rank + 1) * 4
    assert parts(old, "non_torch")["MoE workspace"] < reservation  # 0.32: the MoE kernel's alone
    assert parts(new, "non_torch")["MoE workspace"] == reservation  # 0.33: the larger request wins


@pytest.mark.parametrize(
    "capability,release,expected,monolithic",
    [
        ((9, 0), "0.30.0", "MARLIN", False),
        ((9, 0), "0.32.0", "HUMMING", False),
        ((10, 0), "0.30.0", "FLASHINFER_TRTLLM_MXFP4_MXFP8", True),
    ],
)
def test_deepseek_v4_fp4_experts_take_their_own_oracle(capability, release, expected, monolithic):
    """An fp8 DeepSeek-V4 checkpoint's fp4 experts go to Mxfp4MoEMethod and its DeepSeek-V4 oracle
    (select_deepseek_v4_mxfp4_moe_backend; Humming ahead of Marlin on SM90 from 0.32)."""
    backend = moe.choose_backend(config("deepseek-ai/DeepSeek-V4.1-Flash"), capability, release)
    assert (backend.name, backend.is_monolithic) == (expected, monolithic)
