"""Runs inside a Python that has vLLM (the CPU build) installed: vLLM's OWN KV planning, end to end.

Reads cases as JSON on stdin, writes results as JSON to the file named by the first argument
(stdout without one). For each case vLLM builds the model
from its config.json on the meta device (vllm_build.py: the runner's per-layer specs, the platform's
block size, the resolved KV cache layout), then, for each scheduling variant of the case, vLLM's
get_kv_cache_configs / get_kv_cache_capacity turn those specs into groups, bytes per block, blocks,
tokens and concurrency - or the engine's refusal. A case that vLLM cannot build reports the error.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_build  # noqa: E402


def engine_plan(vc, specs: dict, available: int, layer_backends: dict) -> dict:
    from vllm.v1.core import kv_cache_utils as ku

    try:
        config = ku.get_kv_cache_configs(vc, [specs], [available])[0]
        vllm_build.kernel_block_sizes(config, specs, layer_backends)
    except ValueError as exc:
        return {"refusal": str(exc)}
    tokens, concurrency = ku.get_kv_cache_capacity(vc, config)
    return {
        "num_blocks": config.num_blocks,
        "bytes_per_block": bytes_per_block(vc, config),
        "kv_tokens": tokens,
        "max_concurrency": round(concurrency, 6),
        "groups": [sorted(g.layer_names) for g in config.kv_cache_groups],
    }


def bytes_per_block(vc, config) -> int:
    """kv_cache_utils.py _get_kv_cache_bytes_per_block: 0.32 takes the resolved layout, 0.29-0.31 the groups only."""
    import inspect

    from vllm.v1.core import kv_cache_utils as ku

    if "layout" in inspect.signature(ku._get_kv_cache_bytes_per_block).parameters:
        return ku._get_kv_cache_bytes_per_block(config.kv_cache_groups, vc.cache_config.get_resolved_kv_cache_layout())
    return ku._get_kv_cache_bytes_per_block(config.kv_cache_groups)


def built(case: dict) -> dict:
    view = vllm_build.build(case["build"])
    vc = view["vllm_config"]
    vc.scheduler_config.async_scheduling = True  # the CUDA default (max_in_flight_tokens = 2 x T)
    first = case["variants"][0]
    vc.model_config.max_model_len = first["max_model_len"]
    vc.scheduler_config.max_num_batched_tokens = first["max_num_batched_tokens"]
    out = {
        "layers": [(name, vllm_build.spec_wire(spec, vc)) for name, spec in view["specs"].items()],
        "block_size": view["block_size"],
        "mamba_page_size_padded": view["mamba_page_size_padded"],
        "layout": view["layout"],
        "backends": view["backends"],
        "plans": [],
    }
    for variant in case["variants"]:
        vc.model_config.max_model_len = variant["max_model_len"]
        vc.scheduler_config.max_num_batched_tokens = variant["max_num_batched_tokens"]
        out["plans"].append(engine_plan(vc, dict(view["specs"]), variant["available_bytes"], view["layer_backends"]))
    return out


def main() -> None:
    cases = json.load(sys.stdin)
    vllm_build.install_stand_ins(tuple(cases[0]["build"].get("capability", (9, 0))) if cases else (9, 0))
    out = []
    for case in cases:
        result = {"id": case["id"]}
        start = time.perf_counter()
        try:
            result["built"] = built(case)
        except Exception as exc:  # reported per case; the test names the failure
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["traceback"] = traceback.format_exc()[-3000:]
        result["seconds"] = round(time.perf_counter() - start, 2)
        out.append(result)
    answer = {"stand_ins": list(vllm_build.STAND_INS), "cases": out}
    if len(sys.argv) > 1:  # a file: some releases print to stdout while they import
        with open(sys.argv[1], "w") as handle:
            json.dump(answer, handle)
    else:
        json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
