"""The heads do not divide by --tensor-parallel-size: use the largest smaller power of two that does.

Refusal: "Total number of attention heads (H) must be divisible by tensor parallel size (T)." Going
down keeps to GPUs the user could rent (machines come in powers of two); the plan made from the
corrected settings then says whether the weights still fit.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("tp_heads_indivisible",)
SUMMARY = "lower --tensor-parallel-size to the largest power of two that divides the heads"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    heads = fingerprint.fields.get("total_num_attention_heads")
    current = fingerprint.fields.get("tensor_parallel_size")
    if not isinstance(heads, int) or not isinstance(current, int) or heads < 1 or current < 2:
        return None
    size = 1
    while size * 2 < current and heads % (size * 2) == 0:
        size *= 2
    return {"tensor_parallel_size": size, "previous_tensor_parallel_size": current, "num_attention_heads": heads}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, tensor_parallel_size=fields["tensor_parallel_size"])
