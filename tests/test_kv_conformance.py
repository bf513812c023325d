"""Conformance: Apron's KV planner against vLLM's own code, run on the CPU build of vLLM (0.32.0).

For every case vLLM builds the model itself from the checkpoint's real config.json, on the meta device
(tests/engine/vllm_build.py): the per-layer specs come from each layer's own get_kv_cache_spec (through
the runner's collection, backend customisation included), the block size from
Platform.update_block_size_for_backend, the KV cache layout from resolve_kv_cache_layout. Then, for
each scheduling variant, vLLM's get_kv_cache_configs / get_kv_cache_capacity give groups, bytes per
block, blocks, tokens and concurrency - or the engine's refusal. Apron plans the same config with the
same settings and must agree on every layer's block and page, the block size, the layout and every
number. Zero mismatches allowed.

Depth "built": the model constructed by vLLM (CUDA model classes; stand-ins listed in the output
replace only what a CPU cannot run: streams, kernels, weights and the GPU queries). The attention
backend is the one Apron names for the GPU (platforms/cuda.py cannot import without CUDA); every step
after that choice is vLLM's. The CPU build is 0.32.0; the other releases' grouping code was compared
by reading (docs/kv-layouts.md), not executed here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from apron.engine.facts import load_facts
from apron.plan.kv.layouts import build_layout
from apron.plan.kv.planning import plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings, UserSettings
from conftest import snapshot_document
from engine_env import vllm_python

GIB = 2**30
VLLM_SIDE = Path(__file__).parent / "engine" / "vllm_kv_side.py"
RELEASE = "0.32.0"
ADA, HOPPER, BLACKWELL = (8, 9), (9, 0), (10, 0)
# CUDA model classes (the CPU platform's registry would pick CPU or generic variants).
CUDA_CLASSES = {
    "DeepseekV4ForCausalLM": "vllm.models.deepseek_v4.nvidia.model.DeepseekV4ForCausalLM",
    "DeepseekV41ForCausalLM": "vllm.models.deepseek_v41.nvidia.vl_model.DeepseekV41ForCausalLM",
    "GlmMoeDsaForCausalLM": "vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM",
    "Glm5NextForConditionalGeneration": "vllm.models.glm5next.common.model.Glm5NextForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration": "vllm.models.qwen4_exp.nvidia.model.Qwen4ExpForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration": (
        "vllm.models.minimax_m3.nvidia.model.MiniMaxM3SparseForConditionalGeneration"
    ),
}
SHORT = ((4096, 2048, 2.0),)  # (max_model_len, max_num_batched_tokens, available GiB)
DEFAULT = ((32768, 8192, 40.0), (131072, 2048, 20.0))
NEW = ((32768, 8192, 40.0), (131072, 2048, 20.0), (262144, 4096, 12.0), (1048576, 8192, 6.0))

CASES = [  # (id, model, tp, compute capability, kv_cache_dtype, language_model_only, variants)
    ("qwen3-8b", "Qwen/Qwen3-8B", 1, ADA, "auto", False, ((640, 2048, 4.48), (40960, 2048, 4.48))),
    ("qwen3-8b-tp2", "Qwen/Qwen3-8B", 2, ADA, "auto", False, DEFAULT),
    ("qwen3-8b-tp4-fp8", "Qwen/Qwen3-8B", 4, HOPPER, "fp8", False, DEFAULT),
    ("qwen3-8b-tp8-kv-replicated", "Qwen/Qwen3-8B", 8, ADA, "auto", False, ((40960, 8192, 5.0),)),
    ("llama-3.1-8b-128k", "meta-llama/Llama-3.1-8B-Instruct", 1, ADA, "auto", False, ((131072, 8192, 30.0),)),
    ("mistral-7b-tp2-fp8", "mistralai/Mistral-7B-Instruct-v0.3", 2, HOPPER, "fp8_e4m3", False, ((32768, 2048, 10.0),)),
    ("qwen3-32b-tp8", "Qwen/Qwen3-32B", 8, ADA, "auto", False, ((40960, 8192, 40.0),)),
    ("phi-4-all-sliding", "microsoft/phi-4", 1, ADA, "auto", False, ((16384, 2048, 20.0), (4096, 2048, 3.0))),
    ("gpt-oss-20b", "openai/gpt-oss-20b", 1, ADA, "auto", False, ((640, 2048, 4.33), (32768, 8192, 20.0))),
    ("gpt-oss-120b-tp2", "openai/gpt-oss-120b", 2, ADA, "auto", False, ((131072, 8192, 40.0), (8192, 2048, 1.0))),
    ("gemma-2-2b", "google/gemma-2-2b-it", 1, ADA, "auto", False, ((8192, 2048, 15.0),)),
    ("gemma-4-31b-wide-heads", "google/gemma-4-31B-it", 1, ADA, "auto", True, ((32768, 8192, 30.0),)),
    ("deepseek-v2-lite-mla", "deepseek-ai/DeepSeek-V2-Lite", 1, ADA, "auto", False, DEFAULT),
    ("deepseek-v2-lite-mla-tp4", "deepseek-ai/DeepSeek-V2-Lite", 4, ADA, "auto", False, ((163840, 8192, 8.0),)),
    ("glm-4.7-flash-mla", "zai-org/GLM-4.7-Flash", 1, ADA, "auto", False, ((32768, 8192, 20.0),)),
    ("mamba-2.8b", "state-spaces/mamba-2.8b-hf", 1, ADA, "auto", False, ((640, 2048, 14.84),)),
    ("mamba-2.8b-tp2", "state-spaces/mamba-2.8b-hf", 2, ADA, "auto", False, ((2048, 2048, 6.0),)),
    ("nemotron-h-hybrid", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 1, ADA, "auto", False, DEFAULT),
    ("nemotron-h-tp2-fp8", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 2, HOPPER, "fp8", False, DEFAULT),
    ("qwen3.6-gdn-hybrid", "Qwen/Qwen3.6-35B-A3B-FP8", 1, ADA, "auto", True, DEFAULT),
    ("qwen3.8-gdn-tp4", "Qwen/Qwen3.8-27B", 4, ADA, "auto", True, ((262144, 8192, 30.0),)),
    ("dsv4-h200", "deepseek-ai/DeepSeek-V4-Flash-0731", 1, HOPPER, "auto", False, NEW),
    ("dsv4-b200-tp4", "deepseek-ai/DeepSeek-V4-Flash-0731", 4, BLACKWELL, "auto", False, NEW),
    ("dsv4-h200-tp8-fp8", "deepseek-ai/DeepSeek-V4-Flash-0731", 8, HOPPER, "fp8", False, NEW),
    ("dsv41-h200", "deepseek-ai/DeepSeek-V4.1-Flash", 1, HOPPER, "auto", True, NEW),
    ("dsv41-h200-tp4", "deepseek-ai/DeepSeek-V4.1-Flash", 4, HOPPER, "auto", True, NEW),
    ("dsv41-b200-tp2-mega", "deepseek-ai/DeepSeek-V4.1-Flash", 2, BLACKWELL, "auto", True, NEW),
    ("dsv41-b200-tp8-mega", "deepseek-ai/DeepSeek-V4.1-Flash", 8, BLACKWELL, "auto", True, NEW),
    ("glm5.3-h200", "zai-org/GLM-5.3", 1, HOPPER, "auto", False, NEW),
    ("glm5.3-h200-tp4-fp8", "zai-org/GLM-5.3", 4, HOPPER, "fp8", False, NEW),
    ("glm5.3-b200-tp2", "zai-org/GLM-5.3", 2, BLACKWELL, "auto", False, NEW),
    ("glm5.3-b200-tp8", "zai-org/GLM-5.3", 8, BLACKWELL, "auto", False, NEW),
    ("glm5.3-flash-h200", "zai-org/GLM-5.3-Flash", 1, HOPPER, "auto", True, NEW),
    ("glm5.3-flash-h200-tp2", "zai-org/GLM-5.3-Flash", 2, HOPPER, "auto", True, NEW),
    ("glm5.3-flash-b200-tp4", "zai-org/GLM-5.3-Flash", 4, BLACKWELL, "auto", True, NEW),
    ("glm5.3-flash-b200-tp8", "zai-org/GLM-5.3-Flash", 8, BLACKWELL, "auto", True, NEW),
    ("qwen3.8-flash-next-h200", "Qwen/Qwen3.8-Flash-Next", 1, HOPPER, "auto", True, NEW),
    ("qwen3.8-flash-next-h200-vision", "Qwen/Qwen3.8-Flash-Next", 1, HOPPER, "auto", False, NEW[:1]),
    ("qwen3.8-flash-next-b200-tp2", "Qwen/Qwen3.8-Flash-Next", 2, BLACKWELL, "auto", True, NEW),
    ("qwen3.8-flash-next-h200-tp4", "Qwen/Qwen3.8-Flash-Next", 4, HOPPER, "auto", True, NEW),
    ("qwen3.8-flash-next-b200-tp8", "Qwen/Qwen3.8-Flash-Next", 8, BLACKWELL, "auto", True, NEW),
    ("minimax-m3-h200", "MiniMaxAI/MiniMax-M3", 1, HOPPER, "auto", True, NEW),
    ("minimax-m3-b200-tp4", "MiniMaxAI/MiniMax-M3", 4, BLACKWELL, "auto", True, NEW),
    ("minimax-m3-h200-tp8", "MiniMaxAI/MiniMax-M3", 8, HOPPER, "auto", True, NEW),
]


def _settings(config: ModelConfig, tp: int, kv_dtype: str, language_model_only: bool, length: int, tokens: int):
    return EngineSettings(
        tensor_parallel_size=tp,
        max_model_len=length,
        derived_max_model_len=length,
        gpu_memory_utilization=0.9,
        max_num_seqs=256,
        max_num_batched_tokens=tokens,
        kv_cache_dtype=kv_dtype,
        dtype="bfloat16",
        enforce_eager=False,
        language_model_only=language_model_only,
        cudagraph_capture_sizes=(1,),
        user=UserSettings(tensor_parallel_size=tp),
    )


def apron_side(case) -> tuple:
    ident, model, tp, capability, kv_dtype, lmo, variants = case
    config = ModelConfig.from_config(snapshot_document(model)["files"]["config.json"])
    arch = config.raw["architectures"][0]
    facts = load_facts(RELEASE)
    entry = facts.architecture(arch) or {}
    length, tokens, _ = variants[0]
    layout = build_layout(
        arch,
        config,
        _settings(config, tp, kv_dtype, lmo, length, tokens),
        facts,
        capability=capability,
        is_attention_free=bool(entry.get("is_attention_free")),
    )
    assert not layout.unknowns and not layout.refusals, (ident, layout.unknowns, layout.refusals)
    plans = []
    for length, tokens, gib in variants:
        ctx = SchedulingContext(length, tokens, mamba_cache_mode=layout.mamba_cache_mode)
        plans.append(plan_kv(dict(layout.specs), int(gib * GIB), ctx, block_outermost=layout.block_outermost))
    return layout, plans, config, arch


def engine_request(case, layout, config: ModelConfig, arch: str) -> dict:
    ident, model, tp, capability, kv_dtype, lmo, variants = case
    backend = layout.backend.backend.name
    return {
        "id": ident,
        "build": {
            # the checkpoint's config.json itself: Apron's reading drops nulls, which transformers
            # would replace by a class default (Mistral's sliding_window: null is no window, absent is 4096)
            "config": snapshot_document(model)["files"]["config.json"],
            "model_class": CUDA_CLASSES.get(arch),
            "tp": tp,
            "capability": list(capability),
            "kv_cache_dtype": kv_dtype,
            "dtype": "bfloat16",
            "language_model_only": lmo,
            "max_model_len": variants[0][0],
            "max_num_batched_tokens": variants[0][1],
            "backends": {"dense": backend, "mla": backend, "sparse": backend},
        },
        "variants": [
            {"max_model_len": m, "max_num_batched_tokens": t, "available_bytes": int(g * GIB)} for m, t, g in variants
        ],
    }


def layer_key(name: str, classic: bool) -> str:
    """vLLM's layer name without the model prefix; the classic families name layers by index."""
    rest = "layers." + name.split(".layers.", 1)[1] if ".layers." in name else name
    return ".".join(rest.split(".")[:2]) if classic else rest


@pytest.fixture(scope="module")
def comparisons():
    python = vllm_python()
    expected, requests = {}, []
    for case in CASES:
        layout, plans, config, arch = apron_side(case)
        expected[case[0]] = (layout, plans)
        requests.append(engine_request(case, layout, config, arch))
    result = subprocess.run(
        [python, str(VLLM_SIDE)], input=json.dumps(requests), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout)
    return expected, {r["id"]: r for r in answer["cases"]}, answer["stand_ins"]


def mismatches(case, layout, plans, engine: dict) -> list[str]:
    if "error" in engine:
        return [f"vLLM could not build the model: {engine['error']}\n{engine.get('traceback', '')[-1500:]}"]
    built = engine["built"]
    classic = layout.family not in ("deepseek_v4", "deepseek_v41", "dsa", "glm5_next", "qwen4_exp", "minimax_m3")
    out = []
    mine = [(name, spec) for name, spec in layout.specs]
    theirs = [(layer_key(name, classic), wire) for name, wire in built["layers"]]
    if [n for n, _ in mine] != [n for n, _ in theirs]:
        out.append(f"layers differ: {[n for n, _ in mine][:6]} ... vs {[n for n, _ in theirs][:6]} ...")
    ctx = SchedulingContext(case[6][0][0], case[6][0][1], mamba_cache_mode=layout.mamba_cache_mode)
    for (name, spec), (_, wire) in zip(mine, theirs, strict=False):
        got = (spec.block_size, spec.page_size_bytes(), spec.max_memory_usage_bytes(ctx))
        want = (wire["block_size"], wire["page_size_bytes"], wire["max_memory_usage_bytes"])
        if got != want:
            out.append(f"{name} ({wire['class']}): block, page, max memory {got} vs vLLM {want}")
            break
    if layout.block_size != built["block_size"]:
        out.append(f"block size {layout.block_size} vs vLLM {built['block_size']}")
    if layout.block_outermost != built["layout"].startswith("B"):
        out.append(f"layout block-outermost {layout.block_outermost} vs vLLM {built['layout']}")
    for variant, kv, plan in zip(case[6], plans, built["plans"], strict=True):
        if "refusal" in plan:
            if kv.refusal is None or not plan["refusal"].startswith(kv.refusal.split(" Try increasing")[0]):
                out.append(f"{variant}: vLLM refuses ({plan['refusal'][:160]}), Apron: {kv.refusal}")
            continue
        if kv.refusal is not None:
            out.append(f"{variant}: Apron refuses ({kv.refusal[:120]}), vLLM plans {plan}")
            continue
        mine_plan = {
            "num_blocks": kv.num_blocks,
            "bytes_per_block": kv.bytes_per_block,
            "kv_tokens": kv.kv_tokens,
            "max_concurrency": round(kv.max_concurrency, 6),
        }
        if mine_plan != {k: plan[k] for k in mine_plan}:
            out.append(f"{variant}: {mine_plan} vs vLLM { ({k: plan[k] for k in mine_plan}) }")
        my_groups = sorted(sorted({layer_key(n, False) for n in g.layer_names}) for g in kv.groups)
        their_groups = sorted(sorted({layer_key(n, classic) for n in g}) for g in plan["groups"])
        if my_groups != their_groups:
            out.append(f"{variant}: groups {[len(g.layer_names) for g in kv.groups]} vs vLLM {plan['groups'][:0]}")
    return out


def test_enough_cases():
    variants = sum(len(case[6]) for case in CASES)
    assert variants >= 120, variants
    assert {c[2] for c in CASES} >= {1, 2, 4, 8}


def test_kv_plans_match_vllm_built_models(comparisons, capsys):
    expected, engine, stand_ins = comparisons
    rows: dict[str, list[int]] = {}
    failures = []
    for case in CASES:
        layout, plans = expected[case[0]]
        found = mismatches(case, layout, plans, engine[case[0]])
        row = rows.setdefault(layout.family, [0, 0])
        row[0] += len(case[6])
        row[1] += len(found)
        failures += [f"{case[0]}: {m}" for m in found]
    table = [f"{'family':<16} {'releases':<9} {'cases':>5}  {'depth':<6} {'mismatches':>10}"]
    table += [f"{family:<16} {RELEASE:<9} {n:>5}  {'built':<6} {bad:>10}" for family, (n, bad) in sorted(rows.items())]
    with capsys.disabled():
        print("\nKV conformance against vLLM-built models (CPU build)\n" + "\n".join(table))
        print("stand-ins: " + "; ".join(stand_ins))
    assert not failures, "\n".join(failures)
