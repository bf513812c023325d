"""max_num_batched_tokens below max_model_len (without chunked prefill): raise it to max_model_len.

config/scheduler.py verify_max_model_len: "max_num_batched_tokens (B) is smaller than max_model_len
(L) ... Please increase max_num_batched_tokens or decrease max_model_len."
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("batched_tokens_below_max_model_len",)
SUMMARY = "raise --max-num-batched-tokens to max_model_len"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    batched, length = fingerprint.fields.get("max_num_batched_tokens"), fingerprint.fields.get("max_model_len")
    if not isinstance(length, int) or isinstance(batched, int) and batched >= length:
        return None
    return {"max_num_batched_tokens": length, "previous_max_num_batched_tokens": batched}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_num_batched_tokens=fields["max_num_batched_tokens"])
