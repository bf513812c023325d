"""Runs inside the vLLM CPU build: does vLLM's own code accept a tensor-parallel degree?

Reads {"builds": [...], "functions": [...]} as JSON on stdin and writes the answers as JSON on stdout.

- builds: vLLM validates the config (ModelConfig.verify_with_parallel_config, as VllmConfig does) and
  constructs the model on the meta device at the case's TP (vllm_build.py; its stand-ins leave the
  routed experts unbuilt, so the MoE checks are the functions' below). The answer is "ok" or the
  exception vLLM raised.
- functions: the arithmetic of the checks a meta-device build does not reach, run through vLLM's own
  functions: FusedMoEConfig.__post_init__'s expert split, the block-FP8 MoE refinement and refusal
  (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape, then fp8_utils.validate_fp8_block_shape_moe as
  Fp8MoEMethod.create_weights composes them) and the block-FP8 row/column validation
  (fp8_utils.validate_fp8_block_shape).
"""

from __future__ import annotations

import json
import os
import sys
import types

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_build  # noqa: E402


def _refused(call) -> str | None:
    """vLLM's refusal (an assert or a ValueError, as divide() and the checks raise them), or None."""
    try:
        call()
    except (AssertionError, ValueError, NotImplementedError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def build(case: dict) -> str | None:
    def run() -> None:
        view = vllm_build.build(case)
        vc = view["vllm_config"]
        vc.model_config.verify_with_parallel_config(vc.parallel_config)

    return _refused(run)


def _world_size(tp: int) -> None:
    import vllm.distributed as distributed

    distributed.get_tensor_model_parallel_world_size = lambda: tp


class _Fields(types.SimpleNamespace):
    """A FusedMoEConfig's fields for __post_init__: the split's inputs given, every other field unset
    (None), so what runs after the split's assert takes its plain path."""

    def __getattr__(self, name: str) -> None:
        return None


def moe_split(case: dict) -> str | None:
    from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig

    fields = _Fields(
        moe_parallel_config=types.SimpleNamespace(tp_size=case["tp"]),
        intermediate_size=case["intermediate"],
        dp_size=1,
        max_num_tokens=1,
        hidden_dim=case.get("hidden", 1),
        is_act_and_mul=True,  # gate and up fused, as every MoE Apron plans (False is refused off CUDA)
    )
    return _refused(lambda: FusedMoEConfig.__post_init__(fields))


def fp8_moe(case: dict) -> str | None:
    from vllm.model_executor.layers.fused_moe.oracle.fp8 import refine_fp8_moe_block_shape
    from vllm.model_executor.layers.quantization.utils.fp8_utils import validate_fp8_block_shape_moe

    tp, shard = case["tp"], case["intermediate"] // case["tp"]
    moe = types.SimpleNamespace(intermediate_size_per_partition=shard, tp_size=tp, hidden_dim=case["hidden"])
    if refine_fp8_moe_block_shape(moe, case["block"]) is not None:
        return None
    _world_size(tp)
    return _refused(lambda: validate_fp8_block_shape_moe(shard, case["block"]))


def fp8_linear(case: dict) -> str | None:
    from vllm.model_executor.layers.quantization.utils.fp8_utils import validate_fp8_block_shape

    tp = case["tp"]
    layer = types.SimpleNamespace(tp_size=tp, allow_fp8_block_shape_mismatch=False)
    if case["parallel"] == "row":
        size, out = case["size"], 128
        args = (layer, size, out, size // tp, [out], case["block"])
    else:
        size = case["size"]
        args = (layer, 128, size, 128, [size // tp], case["block"])
    return _refused(lambda: validate_fp8_block_shape(*args))


FUNCTIONS = {"moe_split": moe_split, "fp8_moe": fp8_moe, "fp8_linear": fp8_linear}


def main() -> None:
    request = json.load(sys.stdin)
    builds = request.get("builds", [])
    vllm_build.install_stand_ins(tuple(builds[0].get("capability", (9, 0))) if builds else (9, 0))
    out = {"builds": [], "functions": []}
    for case in builds:
        answer = {"id": case["id"], "tp": case["tp"]}
        try:
            answer["refusal"] = build(case)
        except Exception as exc:  # a stand-in that does not hold: the test names it, it is not a verdict
            answer["error"] = f"{type(exc).__name__}: {exc}"
        out["builds"].append(answer)
    for case in request.get("functions", []):
        out["functions"].append({"id": case["id"], "refusal": FUNCTIONS[case["function"]](case)})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
