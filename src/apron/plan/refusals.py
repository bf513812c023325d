"""The plan's refusals in the order the release raises them: the first is what `vllm serve` says;
the others only once it is fixed, and the plan says so.

vLLM 0.29.0-0.33.0 start up in the same order (engine/arg_utils.py create_engine_config, then the
worker): argument parsing; ModelConfig.__post_init__ (config/model.py 0.32.0: the registry's
inspect_model_cls at 730, _get_and_verify_dtype at 793, get_and_verify_max_len at 811); the
SchedulerConfig (config/scheduler.py verify_max_model_len); VllmConfig.__post_init__ (config/vllm.py
0.32.0: verify_with_parallel_config at 1452, _get_quantization_config at 1508); the worker's
init_device (v1/worker/gpu_worker.py 0.32.0:503, check_if_supports_dtype); the model's construction
(the vocabulary, attention and MLP layers divide by the TP size, the attention backend takes the KV
dtype and the GPU); loading the weights into host memory; the profiling run and the KV check
(v1/core/kv_cache_utils.py); then the CUDA-graph sizes a hybrid's state blocks allow.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.plan.quantity import Problem

AFTER_FIRST = "after fixing the first"
# kind -> start-up stage (lower first). "dtype" is the config's (a model type refusing float16) or the
# worker's (bfloat16 below compute capability 8.0): _stage tells them apart by the message.
_STAGES: dict[str, int] = {
    "unrecognized_argument": 0,
    "architecture_not_supported": 1,
    "dtype": 2,
    "max_model_len": 3,
    "scheduler": 4,
    "tensor_parallel_heads": 5,
    "pipeline_parallel": 5,
    "expert_parallel": 5,
    "quantization_capability": 6,
    "tensor_parallel_vision": 8,
    "tensor_parallel_vocab": 8,
    "tensor_parallel_kv_heads": 8,
    "tensor_parallel_linear_attention": 8,
    "tensor_parallel_quant_block": 8,
    "block_size": 8,
    "compute_capability": 8,
    "kv_cache_dtype": 8,
    "tensor_parallel_intermediate": 8,
    "host_ram_exceeded": 9,
    "weights_exceed_request": 10,
    "no_kv_memory": 10,
    "kv_cache_too_small": 10,
    "max_num_seqs_exceeds_state_blocks": 11,
}
_WORKER_DTYPE_STAGE = 7


def _stage(problem: Problem) -> int | None:
    stage = _STAGES.get(problem.kind)
    if problem.kind == "dtype" and problem.message.startswith("Bfloat16 is only supported"):
        return _WORKER_DTYPE_STAGE
    return stage


# Notes that belong to the refusal before them (its fix, how close it is) and move with it.
_ATTACHED = ("fix", "tight")


def in_start_up_order(problems: list[Problem]) -> list[Problem]:
    """PROBLEMS with each refusal (and its fix and margin notes) moved to its place in start-up order;
    every refusal after the first says it comes after fixing the first. Other problems keep their
    place: before the first refusal, or after the last."""
    lead: list[Problem] = []
    tail: list[Problem] = []
    units: list[tuple[int, list[Problem]]] = []
    for problem in problems:
        stage = _stage(problem)
        if stage is not None:
            units.append((stage, [problem]))
        elif units and problem.kind in _ATTACHED:
            units[-1][1].append(problem)
        else:
            (tail if units else lead).append(problem)
    if len(units) < 2:
        return problems
    units.sort(key=lambda unit: unit[0])  # stable: one stage keeps the plan's own order
    first = units[0][1][0]
    out = lead + units[0][1]
    for _, (refusal, *notes) in units[1:]:
        out.append(replace(refusal, message=f"{AFTER_FIRST} ({first.kind}): {refusal.message}"))
        out += notes
    return out + tail
