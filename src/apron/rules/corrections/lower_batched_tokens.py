"""Out of memory during the profiling run: halve --max-num-batched-tokens (then --max-model-len).

The profiling run pushes max_num_batched_tokens tokens through the model at once; its activations
are the transient peak. Halving that count halves the peak's token-proportional part. Once the batch
is already small (512 tokens or fewer) the rule halves max_model_len instead, down to 2048.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, ran_with

FAMILIES = ("cuda_oom",)
SUMMARY = "halve --max-num-batched-tokens (or --max-model-len) for an out-of-memory while profiling"
PRIORITY = 30
MIN_BATCHED_TOKENS = 512
MIN_MODEL_LEN = 2048


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    if fingerprint.phase != "profiling":
        return None
    batched = ran_with("max_num_batched_tokens", log_text, plan)
    seqs = ran_with("max_num_seqs", log_text, plan)
    if isinstance(batched, int) and batched > MIN_BATCHED_TOKENS:
        wanted = max(batched // 2, MIN_BATCHED_TOKENS)
        fields = {"max_num_batched_tokens": wanted, "previous_max_num_batched_tokens": batched}
        if isinstance(seqs, int) and seqs > wanted:  # the engine requires batched tokens >= seqs
            fields["max_num_seqs"] = wanted
        return fields
    length = ran_with("max_model_len", log_text, plan)
    if isinstance(length, int) and length > MIN_MODEL_LEN:
        return {"max_model_len": max(length // 2, MIN_MODEL_LEN), "previous_max_model_len": length}
    return None


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    changes = {k: fields[k] for k in ("max_num_batched_tokens", "max_num_seqs", "max_model_len") if k in fields}
    return replace(settings, **changes)
