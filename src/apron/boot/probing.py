"""`apron probe` and `apron boot --probe`: the allocator probe carried into a boot, and its record.

The host side of measure/probe_hook.py. Which functions the hook wraps comes from the release's engine
facts (engine/extract/profiling.py), never from a list per version. The boot copies the hook to the
target as `<run>/probe/sitecustomize.py`, puts that folder first on the engine's PYTHONPATH (the
boot record's command shows it), and before it removes the run folder reads back what the hook wrote.
The probe record then sets the readings beside the plan's predicted buffers (records/probe.py).
"""

from __future__ import annotations

import datetime as _dt
import json
from importlib import resources
from typing import Any

from apron.engine.facts import load_facts
from apron.errors import BadInput
from apron.plan.result import Plan
from apron.records.documents import BootRecord, ProbePhase, ProbeRecord
from apron.records.probe import (
    CUDA_BLOCK_BYTES,
    ProbeReading,
    ReadingPhase,
    match_buffers,
    moments_from_plan,
    read_reading,
)

HOOK_FOLDER = "probe"
READINGS_FOLDER = "probe/out"


def probe_functions(plan: Plan) -> tuple[str, ...]:
    """The profiling functions of the plan's release, as the hook names them ("module:Class.method")."""
    functions = load_facts(plan.engine_version).profiling_functions
    if not functions:
        raise BadInput(
            f"the engine facts of vllm {plan.engine_version} do not say where it profiles (synced by an "
            f"older Apron): run `apron engine sync vllm=={plan.engine_version}` again"
        )
    return tuple(functions)


def check_probe_request(plan: Plan, profile: str, extra_args: tuple[str, ...]) -> None:
    """The CPU engine profiles only with compilation on: refuse a probe that would record nothing."""
    eager = plan.settings.enforce_eager or "--enforce-eager" in extra_args
    if profile == "cpu" and eager:
        raise BadInput(
            "--probe on the CPU engine needs compilation on: under --enforce-eager vLLM's CPU worker skips "
            "its warm-up run, the only profiling pass it makes (v1/worker/cpu_model_runner.py "
            "warming_up_model); plan without --enforce-eager"
        )


def hook_source() -> bytes:
    return resources.files("apron.measure").joinpath("probe_hook.py").read_bytes()


def probe_env(run_dir: str, functions: tuple[str, ...], extra_env: dict[str, str]) -> dict[str, str]:
    """The engine's environment for the hook: its folder first on PYTHONPATH (before any the user gave)."""
    path = f"{run_dir}/{HOOK_FOLDER}"
    given = extra_env.get("PYTHONPATH")
    return {
        "PYTHONPATH": f"{path}:{given}" if given else path,
        "APRON_PROBE_DIR": f"{run_dir}/{READINGS_FOLDER}",
        "APRON_PROBE_FUNCTIONS": json.dumps(list(functions)),
    }


def fetch_script(run_dir: str) -> str:
    """One line per file the hook wrote: NAME, a tab, its JSON (json.dump writes no newlines)."""
    return (
        f'cd "{run_dir}/{READINGS_FOLDER}" 2>/dev/null || exit 0; '
        'for f in *.json; do [ -f "$f" ] && printf "%s\\t" "$f" && tr -d "\\n" < "$f" && echo; done; true'
    )


def parse_fetched(text: str) -> dict[str, Any]:
    """{file name: document}; a file that is not JSON becomes {"unreadable": why}."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        name, sep, body = line.partition("\t")
        if not sep:
            continue
        try:
            out[name] = json.loads(body)
        except ValueError as exc:
            out[name] = {"unreadable": f"{name}: {exc}"}
    return out


def probe_record(boot_id: str, boot: BootRecord, plan: Plan, files: dict[str, Any] | None) -> ProbeRecord:
    """The probe record of a boot from the files its hook wrote (None: they could not be fetched)."""
    base = ProbeRecord(
        created_at=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        boot_id=boot_id,
        plan_id=boot.plan_id,
        status="not_run",
        logged_peak_bytes=_logged_peak(boot),
        predicted_peak_bytes=_quantity(plan, "activation_peak_bytes"),
        predicted_moment=(plan.details.get("activation") or {}).get("peak"),
        predicted_retained_bytes=_component(plan, "non_torch", "retained allocator segments"),
    )
    readings = [read_reading(doc) for name, doc in sorted((files or {}).items()) if name.startswith("probe-")]
    if not readings:
        return _without_reading(base, boot, files)
    readings.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.pid or 0))
    first = readings[0]
    notes = [f"rank {r.rank}: {r.status} {r.error or ''}".strip() for r in readings[1:] if r.status != "recorded"]
    if first.raised:
        notes.append(f"the profiling function itself raised {first.raised} (the engine's error, passed on)")
    if first.is_trace_truncated:
        notes.append("the allocator's history filled its buffer: the earliest events are missing")
    return _from_reading(base, first, plan, readings, tuple(notes))


def _from_reading(
    base: ProbeRecord, reading: ProbeReading, plan: Plan, readings: list[ProbeReading], notes: tuple[str, ...]
) -> ProbeRecord:
    phases = tuple(_phase(p, plan, reading.platform) for p in reading.phases)
    return ProbeRecord(
        **{**_scalars(base), "status": "recorded" if reading.status == "recorded" else "failed"},
        function=reading.function,
        platform=reading.platform,
        error=reading.error,
        peak_bytes=reading.peak_bytes,
        allocator_peak_bytes=reading.allocator_peak_bytes,
        peak_phase=reading.peak_phase,
        phases=phases,
        segments=reading.segments,
        retained_free_bytes=reading.retained_free_bytes,
        non_torch_growth_bytes=reading.non_torch_growth_bytes,
        non_torch_basis=reading.non_torch_basis,
        seconds=reading.seconds,
        ranks=tuple((r.rank, r.peak_bytes) for r in readings),
        notes=notes,
    )


def _phase(phase: ReadingPhase, plan: Plan, platform: str | None) -> ProbePhase:
    granularity = CUDA_BLOCK_BYTES if platform == "cuda" else 1
    match = match_buffers(phase.blocks, moments_from_plan(plan.details), granularity)
    return ProbePhase(phase.name, phase.peak_bytes, match.moment, match.blocks, match.predicted, phase.allocated)


def _without_reading(base: ProbeRecord, boot: BootRecord, files: dict[str, Any] | None) -> ProbeRecord:
    failures = [d for name, d in sorted((files or {}).items()) if name.startswith("patch-error")]
    patched = [d for name, d in sorted((files or {}).items()) if name.startswith("patched")]
    if files is None:
        why = "the hook's files could not be read back from the target"
    elif failures:
        why = f"the hook could not wrap {failures[0].get('function')}: {failures[0].get('error')}"
    elif patched:
        why = f"the hook wrapped {', '.join(patched[0].get('functions') or ())} but the engine never called it" + (
            " (the boot failed first)" if boot.outcome != "healthy" else ""
        )
    else:
        why = "no engine process imported a profiling function (the hook was not loaded, or the engine failed first)"
    status = "failed" if failures else "not_run"
    return ProbeRecord(**{**_scalars(base), "status": status, "error": why})


def _scalars(record: ProbeRecord) -> dict[str, Any]:
    return {
        "created_at": record.created_at,
        "boot_id": record.boot_id,
        "plan_id": record.plan_id,
        "status": record.status,
        "logged_peak_bytes": record.logged_peak_bytes,
        "predicted_peak_bytes": record.predicted_peak_bytes,
        "predicted_moment": record.predicted_moment,
        "predicted_retained_bytes": record.predicted_retained_bytes,
    }


def _logged_peak(boot: BootRecord) -> int | None:
    measured = boot.measured.get("activation_peak_bytes")
    return int(measured.value) if measured is not None else None


def _quantity(plan: Plan, name: str) -> int | None:
    quantity = plan.quantities.get(name)
    return int(quantity.value) if quantity is not None and quantity.value is not None else None


def _component(plan: Plan, term: str, name: str) -> int | None:
    for component in plan.details.get(term) or ():
        if isinstance(component, dict) and component.get("name") == name:
            return int(component.get("num_bytes") or 0)
    return None
