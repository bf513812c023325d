"""`apron diagnose` and `apron rules` as text for a person."""

from __future__ import annotations

from typing import Any

from apron.rules.diagnose import Diagnosis, settings_flags
from apron.rules.families import family_summary
from apron.rules.registry import Rule
from apron.rules.status import RuleStatus

_WIDTH = 17


def _row(label: str, value: str) -> str:
    return f"{label:<{_WIDTH}}{value}"


def render_diagnosis(diagnosis: Diagnosis, log_name: str) -> str:
    found = diagnosis.fingerprint
    if found is None:
        return (
            f"no decisive error in {log_name}: no error before the engine's shutdown (a healthy boot, or a log "
            "that ends before the engine failed)"
        )
    detail = ([found.process] if found.process else []) + (
        [f"printed {found.occurrences}x"] if found.occurrences > 1 else []
    )
    where = f"line {found.line_number}" + (f" ({', '.join(detail)})" if detail else "")
    exception = f"{found.exception}: " if found.exception else ""
    lines = [
        _row("decisive error", f"{where}: {exception}{_clip(found.message, 220)}"),
        _row("family", f"{found.family} [{found.blame}] {family_summary(found.family)}"),
        _row(
            "fingerprint",
            f"{found.id}  phase {found.phase or 'unknown'}  engine vllm {diagnosis.engine_version or 'unknown'}",
        ),
        _row("source", found.source),
    ]
    if found.fields:
        lines.append(_row("fields", " ".join(f"{k}={_value(v)}" for k, v in found.fields.items())))
    if found.check:
        lines.append(_row("check", found.check))
    flags = " ".join(settings_flags(diagnosis.settings)) or "(engine defaults)"
    lines.append(_row("ran with", f"{flags}  [from {diagnosis.settings_source}]"))
    lines += _rule_lines(diagnosis)
    if diagnosis.known is not None:
        lines.append(_row("could have known", diagnosis.known.line))
    return "\n".join(lines)


def _rule_lines(diagnosis: Diagnosis) -> list[str]:
    if not diagnosis.candidates:
        return [_row("rule", "none applies: no flag change is known to fix this failure")]
    lines = []
    for index, candidate in enumerate(diagnosis.candidates):
        label = "rule" if index == 0 else "then rule"
        lines.append(_row(label, f"{candidate.match.rule_id}: {candidate.match.summary}"))
        if candidate.corrected is not None:
            change = ", ".join(candidate.changes(diagnosis.settings)) or "(same flags)"
            lines.append(_row("  change", change))
            lines.append(_row("  corrected", " ".join(settings_flags(candidate.corrected)) or "(engine defaults)"))
        else:
            lines.append(_row("  not applied", candidate.error or "no correction"))
        lines.append(_row("  status", _status_line(candidate.status, diagnosis.engine_version)))
    for error in diagnosis.rule_errors:
        lines.append(_row("rule failed", f"{error.rule_id}: {error.error} (skipped)"))
    return lines


def _status_line(status: RuleStatus | None, version: str | None) -> str:
    if status is None:
        return "unknown: the engine version is unknown (pass --engine vllm==X)"
    if status.is_proven:
        return f"proven on vllm {status.engine_version}: {status.evidence()}"
    if status.status == "hypothesis":
        return f"hypothesis on vllm {status.engine_version} ({status.evidence()}); a corrected healthy boot proves it"
    return f"untested on vllm {status.engine_version}: a hypothesis until a corrected boot comes up healthy"


def render_rules(rules: tuple[Rule, ...], statuses: dict[str, dict[str, RuleStatus]], version: str | None) -> str:
    lines = []
    for rule in rules:
        by_version = statuses.get(rule.id, {})
        if version:
            status = by_version.get(version)
            state = f"{status.status if status else 'untested'} on {version}"
        else:
            proven = [v for v, s in by_version.items() if s.is_proven]
            state = f"proven on {', '.join(proven)}" if proven else "hypothesis" if by_version else "untested"
        lines.append(f"{rule.id:<34} {state:<24} {rule.summary}")
        lines.append(f"{'':<34} families: {', '.join(rule.families)}")
    return "\n".join(lines)


def render_rule(rule: Rule, statuses: dict[str, RuleStatus]) -> str:
    lines = [
        _row("rule", rule.id),
        _row("summary", rule.summary),
        _row("families", ", ".join(rule.families)),
        _row("priority", str(rule.priority)),
    ]
    if not statuses:
        lines.append(_row("status", "untested on every release (no boot has tried it)"))
    for version, status in statuses.items():
        lines.append(_row(f"vllm {version}", f"{status.status}: {status.evidence()}"))
    lines += ["", rule.doc]
    return "\n".join(lines)


def rule_json(rule: Rule, statuses: dict[str, RuleStatus]) -> dict[str, Any]:
    return {
        "rule": rule.id,
        "summary": rule.summary,
        "families": list(rule.families),
        "priority": rule.priority,
        "doc": rule.doc,
        "statuses": {v: s.to_json() for v, s in statuses.items()},
    }


def _value(value: object) -> str:
    if isinstance(value, float):
        return str(value)
    if isinstance(value, list):
        return ",".join(map(str, value[:8])) + (",…" if len(value) > 8 else "")
    return _clip(str(value), 60)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
