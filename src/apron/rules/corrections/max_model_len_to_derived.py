"""--max-model-len above the model's derived maximum: set it to the derived maximum.

config/model.py _get_and_verify_max_len refuses a user max_model_len above the length derived from
config.json (max_position_embeddings and friends, scaled by RoPE) and prints that length.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("max_model_len_over_derived",)
SUMMARY = "set --max-model-len to the model's derived maximum"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    derived = fingerprint.fields.get("derived_max_model_len")
    if not isinstance(derived, int) or derived < 1:
        return None
    return {"max_model_len": derived, "previous_max_model_len": fingerprint.fields.get("max_model_len")}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_model_len=fields["max_model_len"])
