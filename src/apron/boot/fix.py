"""`apron boot --fix`: when the engine refuses, apply the rule that matches and boot again.

The loop (bounded by max_attempts corrected boots, every boot recorded):
    boot the plan -> healthy and the endpoint answers? done.
    else fingerprint the log (apron.rules) -> the first rule whose correction changes the settings
    -> note it as a hypothesis on this engine release -> re-make the plan from the corrected settings
    -> boot again -> healthy and answering: the rule is proven on this release, with both record ids.
A fix record links the two boots, the rule, the corrected flags and whether the plan had known.
Host and harness faults are not the model's: the boot itself retries those elsewhere; --fix stops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from apron.boot.answers import AnswerSettings, after_healthy_hook
from apron.boot.hosts import NO_SSH, SshSettings
from apron.boot.runner import BootResult, boot
from apron.boot.session import BootOptions, Progress
from apron.boot.targets import TargetSpec
from apron.frozen import replace
from apron.plan.result import Plan
from apron.plan.settings import UserSettings
from apron.records.documents import FixRecord
from apron.records.store import RecordStore
from apron.rules import Fingerprint, RuleMatch, StatusStore
from apron.units import shorten

Replan = Callable[[Plan, UserSettings], Plan]  # (plan, corrected settings) -> the plan made from them


@dataclass
class FixOutcome:
    boots: list[BootResult] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # fix record ids
    stopped_because: str = ""

    @property
    def final(self) -> BootResult:
        return self.boots[-1]


def boot_with_fix(
    plan: Plan,
    targets: list[TargetSpec],
    options: BootOptions,
    store: RecordStore,
    answers: AnswerSettings,
    replan: Replan,
    *,
    ssh: SshSettings = NO_SSH,
    max_attempts: int = 2,
    progress: Progress = lambda m: None,
) -> FixOutcome:
    statuses = StatusStore(store.rules_dir)
    outcome = FixOutcome()
    current = plan
    for attempt in range(max_attempts + 1):
        result = boot(current, targets, options, store, after_healthy_hook(current, answers, progress), ssh, progress)
        outcome.boots.append(result)
        if attempt and outcome.fixes:
            _settle(store, statuses, outcome, result, progress)
        if result.record.responded:
            outcome.stopped_because = "healthy and answering"
            return outcome
        if attempt == max_attempts:
            outcome.stopped_because = f"still failing after {max_attempts} corrected boots"
            return outcome
        correction = _correction(current, result, progress)
        if isinstance(correction, str):
            outcome.stopped_because = correction
            return outcome
        found, match, corrected = correction
        statuses.note_hypothesis(match.rule_id, current.engine_version, result.record_id)
        next_plan = replan(current, corrected)
        fix = _fix_record(current, next_plan, found, match, result)
        outcome.fixes.append(store.put(fix))
        progress(f"rule {match.rule_id}: {' '.join(fix.corrected_flags) or 'settings changed'}; booting again")
        current = next_plan
    return outcome


def _correction(
    plan: Plan, result: BootResult, progress: Progress
) -> tuple[Fingerprint, RuleMatch, UserSettings] | str:
    """(fingerprint, RuleMatch, corrected settings), or the reason there is none: read from the log the
    boot handed along (parsed once, when the record was made), not back from the store."""
    from apron.rules import RuleFailed, fingerprint, match_rules, settings_from_plan

    record, log = result.record, result.log
    if record.outcome in ("host_fault", "harness_fault"):
        return f"{record.outcome.replace('_', ' ')}: not the model's failure, nothing to correct"
    if log is None:
        return "the boot keeps no engine log to read"
    found = fingerprint(log.parsed, engine_version=plan.engine_version)
    if found is None:
        return "no decisive error found in the log"
    progress(f"failure: {found.family}: {shorten(found.message, 200)}")
    user = settings_from_plan(plan)
    for match in match_rules(found, log.text, plan):
        try:
            return found, match, match.correction(user)
        except RuleFailed as exc:
            progress(f"rule {match.rule_id} cannot correct this: {exc}")
    return f"no correction rule matches {found.family}"


def _fix_record(plan: Plan, next_plan: Plan, found: Fingerprint, match: RuleMatch, result: BootResult) -> FixRecord:
    from apron.rules import could_have_known

    # _correction found a decisive error in this log, so the boot handed one along.
    ran = result.log.parsed.non_default_settings if result.log is not None else None
    return FixRecord(
        rule=match.rule_id,
        engine_version=plan.engine_version,
        failed_boot=result.record_id,
        family=found.family,
        fingerprint=found.id,
        fields=dict(match.fields),
        corrected_flags=tuple(f for f in next_plan.flags if f not in set(plan.flags)),
        corrected_command=next_plan.command,
        could_have_known=could_have_known(plan, found, ran, result.record.engine.version).line,
    )


def _settle(
    store: RecordStore, statuses: StatusStore, outcome: FixOutcome, result: BootResult, progress: Progress
) -> None:
    """The boot after a correction: proven when it is healthy and answers, else the rule stays a
    hypothesis. Either way a record says how the corrected boot went."""
    from apron.rules import promote

    fix = store.get_as(outcome.fixes[-1], FixRecord).document
    good = result.record.responded
    if good:
        promote(fix.rule, fix.engine_version, fix.failed_boot, result.record_id, store=statuses)
        progress(
            f"rule {fix.rule} proven on vllm {fix.engine_version}: "
            f"{fix.failed_boot[:12]} failed, {result.record_id[:12]} healthy"
        )
    settled = replace(
        fix,
        corrected_boot=result.record_id,
        status="proven" if good else "hypothesis",
        settles=outcome.fixes[-1],
    )
    outcome.fixes[-1] = store.put(settled)


def replan_from_plan(plan: Plan, user: UserSettings) -> Plan:
    """Re-make a plan from corrected settings: same checkpoint, GPU and engine release."""
    from apron.checkpoint import load_checkpoint
    from apron.hardware import resolve_gpu
    from apron.plan.planner import plan_checkpoint

    model = plan.model
    checkpoint = load_checkpoint(model.source, model.revision if model.repo_id else None)
    gpu = resolve_gpu(plan.gpu_name, memory_bytes=plan.total_bytes_per_gpu, capability=plan.compute_capability)
    return plan_checkpoint(checkpoint, gpu, user, plan.engine_version)
