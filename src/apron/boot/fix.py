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
from apron.boot.runner import BootResult, SshSettings, boot
from apron.boot.session import BootOptions, Progress
from apron.boot.targets import TargetSpec
from apron.records.store import RecordStore

Replan = Callable[[dict, object], dict]  # (plan json, corrected UserSettings) -> plan json


@dataclass
class FixOutcome:
    boots: list[BootResult] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)  # fix record ids
    stopped_because: str = ""

    @property
    def final(self) -> BootResult:
        return self.boots[-1]


def is_good(result: BootResult) -> bool:
    """Healthy, and the endpoint produced tokens (whether they are right, the checks say)."""
    record = result.record
    responded = ((record.get("after_healthy") or {}).get("responded") or {}).get("ok")
    return record["outcome"] == "healthy" and bool(responded)


def boot_with_fix(
    plan: dict,
    targets: list[TargetSpec],
    options: BootOptions,
    store: RecordStore,
    answers: AnswerSettings,
    replan: Replan,
    *,
    ssh: SshSettings = SshSettings(),
    max_attempts: int = 2,
    progress: Progress = lambda m: None,
) -> FixOutcome:
    from apron.rules import StatusStore

    statuses = StatusStore(store.root / "rules")
    outcome = FixOutcome()
    current = plan
    for attempt in range(max_attempts + 1):
        result = boot(current, targets, options, store, after_healthy_hook(current, answers, progress), ssh, progress)
        outcome.boots.append(result)
        if attempt and outcome.fixes:
            _settle(store, statuses, outcome, result, progress)
        if is_good(result):
            outcome.stopped_because = "healthy and answering"
            return outcome
        if attempt == max_attempts:
            outcome.stopped_because = f"still failing after {max_attempts} corrected boots"
            return outcome
        correction = _correction(current, result, store, progress)
        if isinstance(correction, str):
            outcome.stopped_because = correction
            return outcome
        found, match, corrected = correction
        statuses.note_hypothesis(match.rule_id, current["engine"]["version"], result.record_id)
        next_plan = replan(current, corrected)
        fix = _fix_record(current, next_plan, found, match, result)
        outcome.fixes.append(store.put(fix))
        progress(f"rule {match.rule_id}: {' '.join(fix['corrected_flags']) or 'settings changed'}; booting again")
        current = next_plan
    return outcome


def _correction(plan: dict, result: BootResult, store: RecordStore, progress: Progress):
    """(fingerprint, RuleMatch, corrected settings), or the reason there is none."""
    from apron.rules import RuleFailed, fingerprint, match_rules, settings_from_plan

    record = result.record
    if record["outcome"] in ("host_fault", "harness_fault"):
        return f"{record['outcome'].replace('_', ' ')}: not the model's failure, nothing to correct"
    log_text = store.get_blob(record["log"]["sha256"]).decode("utf-8", errors="replace")
    found = fingerprint(log_text, engine_version=plan["engine"]["version"])
    if found is None:
        return "no decisive error found in the log"
    progress(f"failure: {found.family}: {found.message[:200]}")
    user = settings_from_plan(plan)
    for match in match_rules(found, log_text, plan):
        try:
            return found, match, match.correction(user)
        except RuleFailed as exc:
            progress(f"rule {match.rule_id} cannot correct this: {exc}")
    return f"no correction rule matches {found.family}"


def _fix_record(plan: dict, next_plan: dict, found, match, result: BootResult) -> dict:
    from apron.rules import could_have_known

    before, after = set(plan.get("flags") or []), next_plan.get("flags") or []
    return {
        "kind": "fix",
        "rule": match.rule_id,
        "engine_version": plan["engine"]["version"],
        "failed_boot": result.record_id,
        "corrected_boot": None,
        "status": "hypothesis",
        "family": found.family,
        "fingerprint": found.id,
        "fields": match.fields,
        "corrected_flags": [f for f in after if f not in before],
        "corrected_command": next_plan.get("command"),
        "could_have_known": could_have_known(plan, found).line,
    }


def _settle(store: RecordStore, statuses, outcome: FixOutcome, result: BootResult, progress: Progress) -> None:
    """The boot after a correction: proven when it is healthy and answers, else the rule stays a
    hypothesis. Either way a record says how the corrected boot went."""
    from apron.rules import promote

    fix = store.get(outcome.fixes[-1]).document
    good = is_good(result)
    status = "proven" if good else "hypothesis"
    if good:
        promote(fix["rule"], fix["engine_version"], fix["failed_boot"], result.record_id, store=statuses)
        progress(
            f"rule {fix['rule']} proven on vllm {fix['engine_version']}: "
            f"{fix['failed_boot'][:12]} failed, {result.record_id[:12]} healthy"
        )
    settled = {**fix, "corrected_boot": result.record_id, "status": status, "settles": outcome.fixes[-1]}
    outcome.fixes[-1] = store.put(settled)


def replan_from_plan(plan: dict, user) -> dict:
    """Re-make a plan from corrected settings: same checkpoint, GPU and engine release."""
    from apron.checkpoint import load_checkpoint
    from apron.hardware import resolve_gpu
    from apron.plan.planner import plan_checkpoint

    model, hardware = plan["model"], plan["hardware"]
    checkpoint = load_checkpoint(model["source"], model.get("revision") if model.get("repo_id") else None)
    capability = hardware.get("compute_capability")
    gpu = resolve_gpu(hardware["gpu"], memory_bytes=hardware["total_bytes_per_gpu"], capability=capability)
    return plan_checkpoint(checkpoint, gpu, user, plan["engine"]["version"]).to_json()
