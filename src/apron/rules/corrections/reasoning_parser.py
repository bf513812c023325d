"""A reasoning parser that is not registered, or none where one is needed: set the plan's parser.

Refusals: "invalid reasoning parser: X (chose from { ... })", "reasoning_parser_name='X' has not been
registered", and "thinking_token_budget is set but reasoning_config is not configured. Please set
--reasoning-parser". The parser comes from the plan (its flags name the parser of the model family
that this release registers). An invalid parser with nothing to replace it is dropped; where one is
required and the plan names none, the rule does not match.
"""

from __future__ import annotations

from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, plan_flag_value, with_flag

FAMILIES = ("invalid_reasoning_parser", "reasoning_parser_required")
SUMMARY = "set --reasoning-parser to the parser the plan names (or drop an invalid one)"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    suggested = plan_flag_value(plan, "--reasoning-parser")
    bad = fingerprint.fields.get("reasoning_parser") or fingerprint.fields.get("reasoning_parser_name")
    valid = fingerprint.fields.get("valid_reasoning_parsers")
    if suggested and isinstance(valid, list) and valid and suggested not in valid:
        suggested = None  # the plan's parser is not in this engine's list either
    if suggested == bad:
        return None
    if fingerprint.family == "reasoning_parser_required" and not suggested:
        return None
    return {"reasoning_parser": suggested, "invalid_reasoning_parser": bad}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return with_flag(settings, "--reasoning-parser", fields["reasoning_parser"])
