"""float16 refused for gemma2-type models: boot with --dtype bfloat16 (float32 below cc 8.0).

config/model.py _check_valid_dtype: "The model type 'gemma2' does not support float16. Reason:
Numerical instability. Please use bfloat16 or float32 instead." Below compute capability 8.0 bfloat16
is refused too, so the plan's GPU picks float32 there.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, gpu_capability

FAMILIES = ("float16_unsupported",)
SUMMARY = "boot with --dtype bfloat16 (float32 below compute capability 8.0)"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    capability = gpu_capability(plan)
    dtype = "float32" if capability is not None and capability < 80 else "bfloat16"
    return {"dtype": dtype, "model_type": fingerprint.fields.get("model_type"), "compute_capability": capability}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, dtype=fields["dtype"])
