"""max_num_batched_tokens below max_num_seqs: lower --max-num-seqs to max_num_batched_tokens.

config/scheduler.py: "max_num_batched_tokens (B) must be greater than or equal to max_num_seqs (S)."
Lowering the sequences keeps the user's batch (the memory the plan counted for it).
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("batched_tokens_below_max_num_seqs",)
SUMMARY = "lower --max-num-seqs to max_num_batched_tokens"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    batched, seqs = fingerprint.fields.get("max_num_batched_tokens"), fingerprint.fields.get("max_num_seqs")
    if not isinstance(batched, int) or batched < 1 or isinstance(seqs, int) and seqs <= batched:
        return None
    return {"max_num_seqs": batched, "previous_max_num_seqs": seqs}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_num_seqs=fields["max_num_seqs"])
