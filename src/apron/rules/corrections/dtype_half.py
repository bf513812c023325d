"""bfloat16 refused below compute capability 8.0: boot with --dtype half.

platforms/cuda.py check_if_supports_dtype: "Bfloat16 is only supported on GPUs with compute capability
of at least 8.0 ... You can use float16 instead ... --dtype=half."
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("bfloat16_unsupported",)
SUMMARY = "boot with --dtype half (float16) below compute capability 8.0"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    return {"dtype": "half", "compute_capability": fingerprint.fields.get("compute_capability")}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, dtype=fields["dtype"])
