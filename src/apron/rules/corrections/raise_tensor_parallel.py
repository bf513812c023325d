"""Out of memory while loading the weights: spread them over more GPUs (--tensor-parallel-size).

The next tensor-parallel size is the next power of two above the current one that divides the
number of attention heads (vLLM refuses a size that does not: "Total number of attention heads (H)
must be divisible by tensor parallel size (T)") and, up to 8, passes every other check vLLM runs on the
layout (KV heads, vocabulary, MLP widths, quantization blocks: details.parallel of plans made since
plan/parallel.py). The heads come from the plan (details.model_shape); without a plan the rule does not
match rather than guess.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, model_shape, ran_with

FAMILIES = ("cuda_oom",)
SUMMARY = "raise --tensor-parallel-size to the next power of two that divides the heads"
PRIORITY = 20
MAX_TENSOR_PARALLEL = 64
LISTED_UP_TO = 8  # a plan lists the passing sizes up to 8 (plan/parallel.py MAX_LISTED_TP)


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    if fingerprint.phase != "weights_loading" and not _plan_says_weights_exceed(plan):
        return None
    heads = model_shape(plan).get("num_attention_heads")
    if not isinstance(heads, int) or heads < 1:
        return None
    current = int(ran_with("tensor_parallel_size", log_text, plan) or 1)
    wanted = next_tensor_parallel(current, heads, _passing(plan))
    if wanted is None:
        return None
    return {"tensor_parallel_size": wanted, "previous_tensor_parallel_size": current, "num_attention_heads": heads}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, tensor_parallel_size=fields["tensor_parallel_size"])


def next_tensor_parallel(current: int, heads: int, passing: tuple[int, ...] | None = None) -> int | None:
    """The next power of two above CURRENT that divides HEADS and, within the sizes PASSING was
    computed for (1-8), is one of them."""
    size = 1
    while size <= current:
        size *= 2
    while size <= MAX_TENSOR_PARALLEL:
        if heads % size == 0 and (passing is None or size > LISTED_UP_TO or size in passing):
            return size
        size *= 2
    return None


def _passing(plan: Plan | None) -> tuple[int, ...] | None:
    section = plan.details.get("parallel") if plan is not None else None
    sizes = section.get("passing_tensor_parallel_sizes") if isinstance(section, dict) else None
    return tuple(sizes) if isinstance(sizes, list) else None


def _plan_says_weights_exceed(plan: Plan | None) -> bool:
    return plan is not None and plan.has_problem("weights_exceed_request")
