"""One multimodal item needs more tokens than a batch holds: raise --max-num-batched-tokens to it.

v1/core/encoder_cache_manager.py compute_mm_encoder_budget: "Chunked MM input disabled but
max_tokens_per_mm_item (T) is larger than max_num_batched_tokens (B). Please increase
max_num_batched_tokens."
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("mm_item_over_batched_tokens",)
SUMMARY = "raise --max-num-batched-tokens to the largest multimodal item"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    item, batched = fingerprint.fields.get("max_tokens_per_mm_item"), fingerprint.fields.get("max_num_batched_tokens")
    if not isinstance(item, int) or isinstance(batched, int) and batched >= item:
        return None
    return {"max_num_batched_tokens": item, "previous_max_num_batched_tokens": batched}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_num_batched_tokens=fields["max_num_batched_tokens"])
