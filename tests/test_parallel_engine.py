"""Apron's parallel-layout constraints against vLLM's own code (the CPU build, 0.32.0).

vLLM validates each checkpoint's config and builds its model on the meta device at a TP degree
(tests/engine/vllm_parallel_side.py, on vllm_build.py's stand-ins): it refuses exactly where Apron's
plan does. The cases are chosen so that each check a build reaches decides one of them; the MoE and
block-FP8 checks, which a meta-device build does not reach (the routed experts are stand-ins), run
through vLLM's own functions on the same numbers. One subprocess: ~30 s of importing vLLM, then
well under a second a case.

Walking every fixture model over TP 1-8 this way (248 builds, ~9 minutes on 2 busy cores) agreed on all
240 that the stand-ins can build; GLM-5.3 and GLM-5.3-Flash at TP 1, 2, 4 and 8 are not built (their
attention backend on the Ada GPU takes arguments the CPU stand-ins do not pass). `APRON_PARALLEL_WALK=1`
runs it and prints the count.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from apron.hardware import resolve_gpu
from apron.plan import parallel
from apron.plan.parallel import Layout, ParallelShape
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot, snapshot_document, snapshot_names
from engine_env import vllm_python

SIDE = Path(__file__).parent / "engine" / "vllm_parallel_side.py"
RELEASE = "0.32.0"
ADA = resolve_gpu("L40S")
# (fixture, TP): each refused by a different check, or accepted where a naive reading would refuse.
BUILDS = [
    ("microsoft--phi-4", 2),  # 10 KV heads split in two
    ("microsoft--phi-4", 4),  # ... not in four: kv_heads
    ("Qwen--Qwen2.5-1.5B-Instruct", 4),  # 2 KV heads replicated twice
    ("Qwen--Qwen2.5-1.5B-Instruct", 6),  # 12 heads and 2 KV heads pass; the vocabulary and MLP do not
    ("google--gemma-2-2b-it", 8),  # 4 KV heads replicated twice
    ("state-spaces--mamba-2.8b-hf", 2),
    ("state-spaces--mamba-2.8b-hf", 3),  # no heads to check; the mixer's 5,120 does not divide
    ("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 8),  # Mamba-2: 64 heads, 8 groups
    ("Qwen--Qwen3.8-27B", 4),  # gated delta net 48 value heads, vision tower 16 heads
    ("Qwen--Qwen3.8-27B", 6),  # 24 heads pass; the tower, 4 KV heads, the delta net and more do not
    ("Qwen--Qwen3-0.6B-FP8", 8),  # block-FP8 down_proj 3,072 / 8 = 384: whole blocks
    ("meta-llama--Llama-3.1-8B-Instruct", 8),
]
# The checks a build does not reach: vLLM's functions against Apron's check on the same shape.
FUNCTIONS = [
    ("moe 2880 tp8", {"function": "moe_split", "tp": 8, "intermediate": 2880}, ParallelShape(moe_intermediate=2880)),
    ("moe 1000 tp3", {"function": "moe_split", "tp": 3, "intermediate": 1000}, ParallelShape(moe_intermediate=1000)),
    *[
        (
            f"fp8 moe {inter}/{tp} hidden {hidden}",
            {"function": "fp8_moe", "tp": tp, "intermediate": inter, "hidden": hidden, "block": [128, 128]},
            ParallelShape(
                moe_intermediate=inter, hidden_size=hidden, fp8_block=(128, 128), is_fp8_moe=True, is_moe=True
            ),
        )
        for inter, tp, hidden in ((512, 8, 2048), (768, 4, 2048), (1536, 8, 4096), (1000, 4, 2048), (1408, 8, 2048))
    ],
    *[
        (
            f"fp8 {kind} {size}/{tp}",
            {"function": "fp8_linear", "parallel": kind, "tp": tp, "size": size, "block": [128, 128]},
            ParallelShape(
                fp8_block=(128, 128),
                fp8_row_inputs=((kind, size),) if kind == "row" else (),
                fp8_column_outputs=((kind, size),) if kind == "column" else (),
            ),
        )
        for kind, size, tp in (
            ("row", 512, 8),
            ("row", 512, 4),
            ("row", 3072, 8),
            ("column", 1536, 8),
            ("column", 768, 8),
        )
    ],
]


@functools.cache
def _backend(name: str) -> str:
    """The attention backend Apron names for the model on the Ada GPU, as the conformance test uses it."""
    plan = plan_checkpoint(loaded_snapshot(name), ADA, UserSettings(max_model_len=4096), RELEASE)
    backend = (plan.details.get("kv") or {}).get("backend")
    return backend if isinstance(backend, str) else "FLASH_ATTN"


def _build_case(name: str, tp: int) -> dict:
    backend = _backend(name)
    return {
        "id": name,
        "config": snapshot_document(name)["files"]["config.json"],
        "tp": tp,
        "capability": [8, 9],
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "max_num_batched_tokens": 2048,
        "backends": {"dense": backend, "mla": backend, "sparse": backend},
    }


def _apron_failures(name: str, tp: int) -> list[str]:
    plan = plan_checkpoint(
        loaded_snapshot(name), ADA, UserSettings(tensor_parallel_size=tp, max_model_len=4096), RELEASE
    )
    return [c["check"] for c in plan.details["parallel"]["checks"] if c["failure"]]


def _ask_vllm(builds: list[tuple[str, int]]) -> dict:
    request = {
        "builds": [_build_case(name, tp) for name, tp in builds],
        "functions": [{"id": ident, **case} for ident, case, _ in FUNCTIONS],
    }
    result = subprocess.run(
        [vllm_python(), str(SIDE)], input=json.dumps(request), capture_output=True, text=True, timeout=1500
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_vllm_refuses_exactly_the_degrees_apron_refuses():
    walk = os.environ.get("APRON_PARALLEL_WALK") == "1"
    builds = [(n, tp) for n in snapshot_names() for tp in range(1, 9)] if walk else BUILDS
    answer = _ask_vllm(builds)
    mismatches, unbuilt = [], []
    for (name, tp), got in zip(builds, answer["builds"], strict=True):
        if "error" in got:
            unbuilt.append(f"{name} TP {tp}: {got['error'][:120]}")
            if not walk:
                mismatches.append(f"{name} TP {tp}: vLLM could not build it: {got['error'][:200]}")
            continue
        mine = _apron_failures(name, tp)
        if bool(mine) != (got["refusal"] is not None):
            mismatches.append(f"{name} TP {tp}: Apron {mine or 'passes'}, vLLM {got['refusal'] or 'builds it'}")
    for (ident, case, shape), got in zip(FUNCTIONS, answer["functions"], strict=True):
        mine = parallel.failures(shape, Layout(case["tp"]))
        if bool(mine) != (got["refusal"] is not None):
            mismatches.append(
                f"{ident}: Apron {[f.reason for f in mine] or 'passes'}, vLLM {got['refusal'] or 'accepts'}"
            )
    print(f"{len(builds)} builds: {len(builds) - len(unbuilt) - len(mismatches)} agree, {len(unbuilt)} not buildable")
    print("\n".join(unbuilt))
    assert not mismatches, "\n".join(mismatches)
    # the cases are worth running: vLLM refuses some and accepts others, in both groups
    assert {g["refusal"] is None for g in answer["builds"] if "error" not in g} == {True, False}
    assert {g["refusal"] is None for g in answer["functions"]} == {True, False}


@pytest.mark.parametrize("name, tp", [("microsoft--phi-4", 4), ("Qwen--Qwen3.8-27B", 6)])
def test_the_build_cases_fail_where_the_comment_says(name, tp):
    assert _apron_failures(name, tp)
