"""KV cache too small for one request at max_model_len: lower --max-model-len to the engine's estimate.

vLLM (v1/core/kv_cache_utils.py _check_enough_kv_cache_memory) refuses when one request at
max_model_len needs more KV cache than is left, and, when at least one block fits, prints the longest
max_model_len that would fit ("the estimated maximum model length is N"). That estimate is the
engine's own binary search over its block planner, so it is taken as is.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("kv_cache_too_small",)
SUMMARY = "lower --max-model-len to the engine's estimate of what fits"
PRIORITY = 10


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    estimate = fingerprint.fields.get("estimated_max_model_len")
    current = fingerprint.fields.get("max_model_len")
    if not isinstance(estimate, int) or estimate < 1:
        return None  # no block fits at all: a shorter context cannot help
    if isinstance(current, int) and estimate >= current:
        return None
    return {"max_model_len": estimate, "previous_max_model_len": current}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_model_len=fields["max_model_len"])
