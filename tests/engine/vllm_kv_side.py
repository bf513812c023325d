"""Runs inside a Python that has vLLM (the CPU build) installed: vLLM's OWN KV planning functions.

Reads cases as JSON on stdin, writes results as JSON on stdout. Each case carries Apron's layer
specs in a plain form; this script rebuilds them as vLLM spec objects and asks vLLM's
get_kv_cache_configs / get_kv_cache_capacity for groups, bytes per block, blocks, tokens and
concurrency, or its refusal message. Hybrid cases also run vLLM's own state-shape calculators and
Platform._align_hybrid_block_size on stand-in model and backend objects.

Stand-ins (documented, because the real objects need a GPU or a model load): a SimpleNamespace model
config with the attributes these functions read, an attention backend class that only reports
kernel block sizes, and CUDA values for the settings the CPU platform changes (block size 16,
layer-outer KV layout, async scheduling, hybrid KV manager on).
"""

from __future__ import annotations

import json
import os
import sys
import types

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import torch  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.model_executor.layers.mamba.mamba_utils import (  # noqa: E402
    MambaStateShapeCalculator,
)
from vllm.v1.attention.backend import MultipleOf  # noqa: E402
from vllm.v1.core import kv_cache_utils as ku  # noqa: E402
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,  # noqa: E402
    SlidingWindowSpec,
)

TORCH_DTYPES = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32}


def vllm_config(case: dict, model_config=None) -> VllmConfig:
    vc = VllmConfig()
    mc = model_config or types.SimpleNamespace()
    mc.max_model_len = case["max_model_len"]
    mc.original_max_model_len = case["max_model_len"]
    vc.model_config = mc
    cc = vc.cache_config
    cc.block_size = case.get("block_size", 16)
    cc.kv_cache_layout = "LBNHC"
    cc.mamba_cache_mode = case["mamba_cache_mode"]
    cc.num_gpu_blocks_override = None
    sc = vc.scheduler_config
    sc.max_num_batched_tokens = case["max_num_batched_tokens"]
    sc.async_scheduling = True
    sc.disable_hybrid_kv_cache_manager = False
    return vc


def spec_object(s: dict, mamba_cache_mode: str):
    if s["kind"] == "mamba":
        return MambaSpec(
            shapes=tuple(tuple(x) for x in s["shapes"]),
            dtypes=tuple(TORCH_DTYPES[d] for d in s["dtype_bytes"]),
            block_size=s["block_size"],
            page_size_padded=s.get("page_size_padded"),
            mamba_cache_mode=mamba_cache_mode,
            num_prefill_checkpoint_blocks=s.get("num_prefill_checkpoint_blocks", 0),
        )
    dtype = TORCH_DTYPES[s["dtype_bytes"]]
    common = dict(block_size=s["block_size"], num_kv_heads=s["num_kv_heads"], head_size=s["head_size"], dtype=dtype)
    if s["kind"] == "sliding":
        return SlidingWindowSpec(**common, sliding_window=s["sliding_window"])
    if s["kind"] == "mla":
        return MLAAttentionSpec(**common, cache_dtype_str=s.get("cache_dtype_str", "auto"))
    return FullAttentionSpec(**common)


def plan(case: dict) -> dict:
    vc = vllm_config(case)
    specs = {name: spec_object(s, case["mamba_cache_mode"]) for name, s in case["specs"]}
    try:
        config = ku.get_kv_cache_configs(vc, [specs], [case["available_bytes"]])[0]
    except ValueError as exc:
        return {"refusal": str(exc)}
    tokens, concurrency = ku.get_kv_cache_capacity(vc, config)
    layout = vc.cache_config.get_resolved_kv_cache_layout()
    return {
        "num_blocks": config.num_blocks,
        "bytes_per_block": ku._get_kv_cache_bytes_per_block(config.kv_cache_groups, layout),
        "kv_tokens": tokens,
        "max_concurrency": round(concurrency, 6),
        "groups": [len(g.layer_names) for g in config.kv_cache_groups],
    }


class _Backend:
    """Only what _align_hybrid_block_size reads from an attention backend."""

    sizes = [MultipleOf(16)]

    @classmethod
    def get_supported_kernel_block_sizes(cls, kv_cache_spec=None):
        return cls.sizes

    @classmethod
    def customize_spec(cls, spec):
        return spec

    @staticmethod
    def get_name():
        return "STAND_IN"

    @classmethod
    def is_ssm(cls):
        return False


def state_shapes(case: dict) -> dict:
    """vLLM's MambaStateShapeCalculator / MambaStateDtypeCalculator for the case's state layout."""
    s = case["state"]
    calc = MambaStateShapeCalculator
    if s["kind"] == "mamba1":
        shapes = calc.mamba1_state_shape(s["tp"], s["intermediate_size"], s["state_size"], s["conv_kernel"])
    elif s["kind"] == "mamba2":
        shapes = calc.mamba2_state_shape(
            s["tp"],
            s["intermediate_size"],
            s["n_groups"],
            s["num_heads"],
            s["head_dim"],
            s["state_size"],
            s["conv_kernel"],
            0,
        )
    else:
        shapes = calc.gated_delta_net_state_shape(
            s["tp"], s["num_k_heads"], s["num_v_heads"], s["head_k_dim"], s["head_v_dim"], s["conv_kernel"], 0
        )
    return {"shapes": [list(x) for x in shapes]}


def align(case: dict) -> dict:
    """Platform._align_hybrid_block_size with vLLM's own arithmetic on a stand-in model config."""
    from vllm.platforms.interface import Platform

    a = case["align"]
    shapes = [tuple(x) for x in a["mamba_shapes"]]
    dtypes = [TORCH_DTYPES[d] for d in a["mamba_dtype_bytes"]]

    class _Model:
        @staticmethod
        def get_mamba_state_shape_from_config(vc):
            return shapes

        @staticmethod
        def get_mamba_state_dtype_from_config(vc):
            return dtypes

    mc = types.SimpleNamespace(
        architecture="StandIn",
        architectures=["StandIn"],
        dtype=TORCH_DTYPES[a["kv_dtype_bytes"]],
        use_mla=False,
        model_impl="auto",
        convert_type="none",
        runner_type="generate",
        is_hybrid=True,
        get_num_kv_heads=lambda pc: a["num_kv_heads"],
        get_head_size=lambda: a["head_size"],
    )
    vc = vllm_config(case, model_config=mc)
    vc.cache_config.cache_dtype = "auto"
    from vllm.model_executor.models import ModelRegistry

    saved = ModelRegistry.resolve_model_cls
    ModelRegistry.resolve_model_cls = lambda *args, **kwargs: (_Model, "StandIn")
    try:
        Platform._align_hybrid_block_size(vc, _Backend)
    finally:
        ModelRegistry.resolve_model_cls = saved
    cc = vc.cache_config
    return {"block_size": cc.block_size, "mamba_page_size_padded": cc.mamba_page_size_padded}


def built(case: dict) -> dict:
    """The model built by vLLM (vllm_build.py), then vLLM's grouping on its own specs, once per
    scheduling variant of the case."""
    import vllm_build

    view = vllm_build.build(case["build"])
    vc = view["vllm_config"]
    vc.scheduler_config.async_scheduling = True
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
        out["plans"].append(engine_plan(vc, dict(view["specs"]), variant["available_bytes"]))
    return out


def engine_plan(vc, specs: dict, available: int) -> dict:
    try:
        config = ku.get_kv_cache_configs(vc, [specs], [available])[0]
    except ValueError as exc:
        return {"refusal": str(exc)}
    tokens, concurrency = ku.get_kv_cache_capacity(vc, config)
    layout = vc.cache_config.get_resolved_kv_cache_layout()
    return {
        "num_blocks": config.num_blocks,
        "bytes_per_block": ku._get_kv_cache_bytes_per_block(config.kv_cache_groups, layout),
        "kv_tokens": tokens,
        "max_concurrency": round(concurrency, 6),
        "groups": [sorted(g.layer_names) for g in config.kv_cache_groups],
    }


def main() -> None:
    cases = json.load(sys.stdin)
    builds = [c for c in cases if "build" in c]
    if builds:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import vllm_build

        vllm_build.install_stand_ins(tuple(builds[0]["build"].get("capability", (9, 0))))
    out = []
    for case in cases:
        result = {"id": case["id"]}
        if "build" in case:
            try:
                result["built"] = built(case)
            except Exception as exc:  # reported per case; the test names the failure
                import traceback

                result["error"] = f"{type(exc).__name__}: {exc}"
                result["traceback"] = traceback.format_exc()[-3000:]
        if "specs" in case:
            result["plan"] = plan(case)
        if "state" in case:
            result["state"] = state_shapes(case)
        if "align" in case:
            result["align"] = align(case)
        out.append(result)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
