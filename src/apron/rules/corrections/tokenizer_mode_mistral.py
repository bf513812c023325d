"""The model needs the Mistral tokenizer: boot with --tokenizer-mode mistral.

Refusals: "This model requires `--tokenizer-mode mistral`" (Pixtral, Voxtral) and
"mistral_format=True is not supported with tokenizer_mode='hf'".
"""

from __future__ import annotations

from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, with_flag

FAMILIES = ("tokenizer_mode_mistral_required",)
SUMMARY = "boot with --tokenizer-mode mistral"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    return {"tokenizer_mode": "mistral"}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return with_flag(settings, "--tokenizer-mode", fields["tokenizer_mode"])
