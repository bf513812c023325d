"""The correction rules: one module each under apron/rules/corrections/, found at import.

A rule module defines
    FAMILIES    the failure families it looks at (the fingerprint's family),
    SUMMARY     one line: what it changes,
    match(fingerprint, log_text, plan) -> dict | None
                the values the correction needs, or None when it does not apply (or cannot say
                what to change: a rule never guesses),
    correction(settings, fields) -> settings
                pure: new UserSettings from the old ones and the fields match returned,
and may set PRIORITY (lower first; default 50) when two rules can answer the same family.

A rule that raises is logged and skipped; it never stops the others.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from functools import lru_cache
from types import ModuleType
from typing import Any

from apron.errors import ApronError, BadInput
from apron.frozen import field, frozen
from apron.plan.result import Plan
from apron.plan.settings import UserSettings
from apron.rules.families import Fields
from apron.rules.fingerprint import Fingerprint

log = logging.getLogger("apron.rules")
DEFAULT_PRIORITY = 50


class RuleFailed(ApronError):
    """A rule raised, or its correction changed nothing (booting again would repeat the failure)."""


@frozen
class Rule:
    id: str
    families: tuple[str, ...]
    summary: str
    priority: int
    module: ModuleType = field(compare=False, repr=False)

    @property
    def doc(self) -> str:
        return (self.module.__doc__ or "").strip()


@frozen
class RuleMatch:
    rule_id: str
    family: str
    summary: str
    fields: Fields = field(compare=False)

    def correction(self, settings: UserSettings) -> UserSettings:
        """The corrected settings; raises RuleFailed when the rule raises or changes nothing."""
        rule = get_rule(self.rule_id)
        try:
            corrected = rule.module.correction(settings, dict(self.fields))
        except ApronError as exc:
            raise RuleFailed(f"rule {self.rule_id}: correction refused: {exc.message}") from exc
        except Exception as exc:  # noqa: BLE001 - a broken rule must not take the diagnosis down
            raise RuleFailed(f"rule {self.rule_id}: correction raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(corrected, UserSettings):
            raise RuleFailed(f"rule {self.rule_id}: correction returned {type(corrected).__name__}, not UserSettings")
        if corrected == settings:
            raise RuleFailed(f"rule {self.rule_id}: the correction changes nothing for these settings")
        return corrected

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule_id, "family": self.family, "summary": self.summary, "fields": self.fields}


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    from apron.rules import corrections

    rules = []
    for info in pkgutil.iter_modules(corrections.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{corrections.__name__}.{info.name}")
        rules.append(rule_from_module(module, info.name))
    return tuple(sorted(rules, key=lambda r: (r.priority, r.id)))


def rule_from_module(module: ModuleType, rule_id: str | None = None) -> Rule:
    rule_id = rule_id or module.__name__.rsplit(".", 1)[-1]
    for name in ("FAMILIES", "SUMMARY", "match", "correction"):
        if not hasattr(module, name):
            raise TypeError(f"rule module {module.__name__} lacks {name}")
    return Rule(rule_id, tuple(module.FAMILIES), module.SUMMARY, getattr(module, "PRIORITY", DEFAULT_PRIORITY), module)


def get_rule(rule_id: str) -> Rule:
    for rule in all_rules():
        if rule.id == rule_id:
            return rule
    known = ", ".join(r.id for r in all_rules())
    raise BadInput(f"no rule {rule_id!r} (known: {known})")


@frozen
class RuleError:
    rule_id: str
    error: str


def run_rules(
    fingerprint: Fingerprint, log_text: str, plan: Plan | None, rules: tuple[Rule, ...] | None = None
) -> tuple[list[RuleMatch], list[RuleError]]:
    """Every rule whose family is the fingerprint's and whose match says yes, and the rules that
    raised on the way (logged, skipped)."""
    matches, errors = [], []
    for rule in all_rules() if rules is None else rules:
        if fingerprint.family not in rule.families:
            continue
        try:
            fields = rule.module.match(fingerprint, log_text, plan)
        except Exception as exc:  # noqa: BLE001 - one broken rule never stops the others
            log.warning("rule %s raised %s: %s; skipped", rule.id, type(exc).__name__, exc)
            errors.append(RuleError(rule.id, f"{type(exc).__name__}: {exc}"))
            continue
        if fields is not None:
            matches.append(RuleMatch(rule.id, fingerprint.family, rule.summary, dict(fields)))
    return matches, errors


def match_rules(
    fingerprint: Fingerprint, log_text: str, plan: Plan | None, rules: tuple[Rule, ...] | None = None
) -> list[RuleMatch]:
    """The rules that apply to this failure, the one to try first first."""
    return run_rules(fingerprint, log_text, plan, rules)[0]
