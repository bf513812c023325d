"""When a boot breaks: fingerprint the failure, match a correction rule, prove it with a second boot.

No language model sits in this path: the decisive error is found by reading the log
(apron.rules.logtext), classified against the pinned release's own refusal templates and a few
observed failures (apron.rules.families), and answered by rules that are plain code, one module each
(apron.rules.corrections). A rule is a hypothesis on a release until a corrected boot on that same
release came up healthy and answered (apron.rules.status).

The interface the boot uses:

    fingerprint(log_text, engine_version=None) -> Fingerprint | None
    match_rules(fingerprint, log_text, plan_json) -> [RuleMatch]     # first to try first
    RuleMatch.correction(user_settings) -> user_settings             # pure; RuleFailed if it cannot
    StatusStore().note_hypothesis(rule_id, engine_version, failed_record_id)
    promote(rule_id, engine_version, failed_id, healthy_id)
    could_have_known(plan_json, fingerprint) -> KnownReport          # .line for the report
    diagnose(log_text, plan_json=..., user_settings=...) -> Diagnosis  # all of the above at once

`apron boot --fix` is meant to be this loop (bounded, both boots recorded):

    record = boot(plan)                                    # issue 5: runner, records
    for attempt in range(MAX_FIX_ATTEMPTS):
        if record.healthy and record.answers:
            break
        found = fingerprint(record.log_text, engine_version=plan.engine_version)
        if found is None or found.blame in ("harness", "input"):
            break                                          # nothing a flag can change
        if found.blame == "host":                          # retried elsewhere by the boot's fault
            ...                                            # classifier; nccl_disable_nvls may add env
        for match in match_rules(found, record.log_text, plan.to_json()):
            try:
                corrected = match.correction(user)
            except RuleFailed:
                continue
            break
        else:
            break                                          # no rule applies: report and stop
        store.note_hypothesis(match.rule_id, plan.engine_version, record.id)
        user, failed = corrected, record
        plan = plan_checkpoint(checkpoint, gpu, user, plan.engine_version)   # re-made, re-checked
        record = boot(plan)
        if record.healthy and record.answers:
            promote(match.rule_id, plan.engine_version, failed.id, record.id)

Each report also carries could_have_known(plan_json, found).line: whether the preflight had flagged
the failure, or a miss for the calculator.
"""

from __future__ import annotations

from apron.rules.diagnose import Candidate, Diagnosis, diagnose, settings_from_args, settings_from_plan
from apron.rules.fingerprint import Fingerprint, fingerprint
from apron.rules.known import KnownReport, could_have_known
from apron.rules.registry import Rule, RuleFailed, RuleMatch, all_rules, get_rule, match_rules
from apron.rules.status import RuleStatus, StatusStore

MAX_FIX_ATTEMPTS = 2


def promote(
    rule_id: str, engine_version: str, failed_id: str, healthy_id: str, store: StatusStore | None = None
) -> RuleStatus:
    """The corrected boot was healthy and answered: `rule_id` is proven on this release."""
    get_rule(rule_id)  # an unknown rule id is bad input, not a new file
    return (store or StatusStore()).promote(rule_id, engine_version, failed_id, healthy_id)


__all__ = [
    "Candidate",
    "Diagnosis",
    "Fingerprint",
    "KnownReport",
    "MAX_FIX_ATTEMPTS",
    "Rule",
    "RuleFailed",
    "RuleMatch",
    "RuleStatus",
    "StatusStore",
    "all_rules",
    "could_have_known",
    "diagnose",
    "fingerprint",
    "get_rule",
    "match_rules",
    "promote",
    "settings_from_args",
    "settings_from_plan",
]
