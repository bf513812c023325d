"""`apron boot` as a request: which plan, where, with which engine options, what to run after /health,
and whether to correct a failure; then what the outcome means (exit 0, or a one-line failure).

The command line fills a BootRequest and prints what `run_boot` returns; every decision lives here.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from apron.boot.answers import AnswerSettings
from apron.boot.fix import FixOutcome, boot_with_fix, replan_from_plan
from apron.boot.hosts import SshSettings
from apron.boot.runner import BootResult, probe_engine
from apron.boot.session import BootOptions, Progress
from apron.boot.targets import parse_target
from apron.errors import BadInput
from apron.frozen import field, frozen, replace
from apron.plan.result import Plan
from apron.records.saved import saved_plan
from apron.records.store import RecordStore
from apron.units import shorten

# Plans a SOURCE that is not a saved plan: (source, --gpu, vLLM release) -> the plan, with the command
# line's other settings.
Planner = Callable[[str, str, str | None], Plan]


@frozen
class BootRequest:
    source_or_plan: str
    targets: tuple[str, ...]
    options: BootOptions
    answers: AnswerSettings
    ssh: SshSettings = field(default_factory=SshSettings)
    fix_attempts: int = 0  # corrected boots at most; 0: no --fix
    records: str | None = None
    plan: Plan | None = None  # already made (--from FILE); else source_or_plan is resolved
    gpu: str | None = None  # --gpu for a SOURCE; None: the CPU platform when the engine is the CPU build
    engine: str | None = None  # --engine for a SOURCE; None: the release of the engine on the target
    probe: bool = False  # `apron probe` / --probe: the allocator hook rides along (boot/probing.py)


def parse_env(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """--env KEY=VALUE pairs as a dict (BadInput naming the pair that is not one)."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"--env '{pair}' must be KEY=VALUE")
        env[key] = value
    return env


def resolve_plan(request: BootRequest, store: RecordStore, planner: Planner, progress: Progress) -> Plan:
    """The saved plan the request names, or the plan of its model SOURCE for the GPU and release given,
    or (where not given) for the engine on the first target: its release, and the CPU platform when
    it is vLLM's CPU build."""
    ref = request.source_or_plan
    plan = saved_plan(ref, store)
    if plan is not None:
        return plan
    gpu, engine = request.gpu, request.engine
    if gpu is None or engine is None:
        found = probe_engine(parse_target(request.targets[0]), request.options, request.ssh, progress)
        engine = engine or found.release
        gpu = gpu or ("cpu" if found.is_cpu_build else None)
    if gpu is None:
        raise BadInput(f"{ref} is a model, not a saved plan: give --gpu to plan it first")
    progress(f"planning {ref} for {'the CPU platform' if gpu == 'cpu' else gpu}, vLLM {engine or 'newest'}")
    return planner(ref, gpu, engine)


def run_boot(request: BootRequest, planner: Planner, progress: Progress) -> FixOutcome:
    store = RecordStore(request.records)
    specs = [parse_target(t) for t in request.targets]
    if not specs:
        raise BadInput("--on: give at least one target (local, ssh://user@host, sky)")
    plan = request.plan or resolve_plan(request, store, planner, progress)
    # The target downloads gated weights with the user's Hub token.
    options = replace(request.options, hf_token=request.options.hf_token or os.environ.get("HF_TOKEN"))
    if request.probe:
        from apron.boot.probing import check_probe_request, probe_functions

        profile = options.profile or ("cpu" if plan.gpu_name == "cpu" else "gpu")
        check_probe_request(plan, profile, options.extra_args)
        options = replace(options, probe_functions=probe_functions(plan))
    outcome = boot_with_fix(
        plan,
        specs,
        options,
        store,
        request.answers,
        replan_from_plan,
        ssh=request.ssh,
        max_attempts=request.fix_attempts,
        progress=progress,
    )
    if request.fix_attempts:
        fixes = f"; fix records {', '.join(f[:12] for f in outcome.fixes)}" if outcome.fixes else ""
        progress(f"--fix: {len(outcome.boots)} boot(s); {outcome.stopped_because}{fixes}")
    return outcome


def failure(result: BootResult) -> str | None:
    """Why the boot counts as failed (exit 1), or None when it booted and answered what it was asked."""
    record = result.record
    fault = record.fault
    if record.outcome != "healthy" or fault:
        what = "healthy, but" if record.outcome == "healthy" else record.outcome
        reason = f"{fault.reason}: {shorten(fault.evidence, 300)}" if fault else "no fault recorded"
        return f"boot {what}: {reason} (record {result.record_id[:12]})"
    missed = [name for name, value in record.verdicts.items() if value is False]
    if missed:
        return f"booted, but not {' / '.join(missed)}: see the checks in record {result.record_id[:12]}"
    return None


def probe_failure(result: BootResult) -> str | None:
    """Why the probe recorded nothing (exit 1 for `apron probe`), or None when it recorded the run."""
    probe = result.probe
    if probe is None or probe.status == "recorded":
        return None
    return f"probe {probe.status.replace('_', ' ')}: {probe.error} (probe record {str(result.probe_id)[:12]})"
