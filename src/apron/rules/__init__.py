"""When a boot breaks: fingerprint the failure, match a correction rule, prove it with a second boot.

No language model sits in this path: the decisive error is found by reading the log
(apron.measure.logparse), classified against the pinned release's own refusal templates and a few
observed failures (apron.rules.families), and answered by rules that are plain code, one module each
(apron.rules.corrections). A rule is a hypothesis on a release until a corrected boot on that same
release came up healthy and answered (apron.rules.status).

The interface (apron.boot.fix runs it as `apron boot --fix`; `apron diagnose` as one report):

    fingerprint(log_text, engine_version=None) -> Fingerprint | None
    match_rules(fingerprint, log_text, plan) -> [RuleMatch]          # first to try first
    RuleMatch.correction(user_settings) -> user_settings             # pure; RuleFailed if it cannot
    StatusStore(root).note_hypothesis(rule_id, engine_version, failed_record_id)
    promote(rule_id, engine_version, failed_id, healthy_id)
    could_have_known(plan, fingerprint) -> KnownReport               # .line for the report
    diagnose(log_text, plan=..., user_settings=...) -> Diagnosis     # all of the above at once

`plan` is the typed apron.plan.result.Plan the failed boot ran (or None when there is none).
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
