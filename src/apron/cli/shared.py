"""What the command modules share besides their options: data on stdout and messages on stderr, the
exit codes (0 ok, 1 failed, 2 bad input; a traceback only with APRON_DEBUG=1), and the plan options
turned into the planner's typed request."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from apron.errors import ApronError, Failed

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

    from apron.hardware import Gpu
    from apron.plan.candidate import CandidatePlan
    from apron.plan.planner import PlanRequest
    from apron.plan.result import Plan
    from apron.records.store import RecordStore


def echo(text: str = "", *, err: bool = False) -> None:
    """One block of text and a newline, on stdout (data) or stderr (messages), flushed at once as
    click.echo does (this module imports no click: `apron plan` runs without it)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def emit_json(data: object) -> None:
    import json  # here, not at the top: `apron --help` loads this module and prints no JSON

    echo(json.dumps(data, indent=2, sort_keys=False))


def say(message: str) -> None:
    """A message or progress line for a person: always stderr."""
    echo(message, err=True)


# Progress lines that are results or answers to the user's own action: shown even off a terminal.
NOTICES = ("interrupted", "rule ", "--fix", "engine mismatch", "answers not checked")


def progress_printer() -> Callable[[str], None]:
    """Progress of long work on stderr with the seconds since it began - on a terminal only (or with
    APRON_PROGRESS=1); a log or a pipe gets only the notices."""
    import time

    started = time.monotonic()
    shown = sys.stderr.isatty() or os.environ.get("APRON_PROGRESS") == "1"

    def show(message: str) -> None:
        if shown:
            say(f"apron: [{time.monotonic() - started:6.1f} s] {message}")
        elif message.startswith(NOTICES):
            say(f"apron: {message}")

    return show


def guarded(call: Callable[[], object], handle: Callable[[Exception, bool], int | None] | None = None) -> int:
    """Run CALL; every error becomes one line on stderr and its exit code. HANDLE turns a framework's
    own exceptions (click's) into a code, or None for the last line of defence."""
    debug = os.environ.get("APRON_DEBUG") == "1"
    try:
        call()
    except ApronError as exc:
        if debug and not exc.quiet:
            raise
        if not exc.quiet:
            say(f"apron: error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        say("apron: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against a bare traceback
        code = handle(exc, debug) if handle else None
        if code is not None:
            return code
        if debug:
            raise
        say(f"apron: internal error: {type(exc).__name__}: {exc} (run with APRON_DEBUG=1 for a traceback)")
        return 1
    return 0


def exit_by_verdict(plan: Plan) -> None:
    """0 fits; 1 does_not_fit, unsupported or unknown, after the whole document is printed."""
    if plan.verdict != "fits":
        raise Failed(f"verdict {plan.verdict}", quiet=True)


def engine_option(value: str | None) -> str | None:
    from apron.engine.facts import parse_engine_spec

    return parse_engine_spec(value) if value else None


def record_store(records: str | None) -> RecordStore:
    from apron.records.store import RecordStore

    return RecordStore(records)


def _limits(text: str | None) -> tuple[tuple[str, int], ...]:
    if not text:
        return ()
    from apron.plan.encoder import parse_limit_mm_per_prompt  # the multimodal planner's: imported when asked

    return parse_limit_mm_per_prompt(text)


def resolve_gpu_option(gpu: str, settings: dict[str, Any]) -> Gpu:
    from apron.hardware import resolve_gpu

    return resolve_gpu(gpu, memory_bytes=settings["gpu_memory_bytes"], capability=settings["gpu_capability"])


def plan_request(source: str, gpu: Gpu, settings: dict[str, Any]) -> PlanRequest:
    from apron.plan.planner import PlanRequest
    from apron.plan.settings import UserSettings

    user = UserSettings(
        tensor_parallel_size=settings["tp"],
        max_model_len=settings["max_model_len"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        max_num_seqs=settings["max_num_seqs"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        kv_cache_dtype=settings["kv_cache_dtype"],
        dtype=settings["dtype"],
        enforce_eager=settings["enforce_eager"],
        language_model_only=settings["language_model_only"],
        limit_mm_per_prompt=_limits(settings.get("limit_mm_per_prompt")),
        mm_encoder_tp_mode=settings.get("mm_encoder_tp_mode"),
        host_ram_bytes=settings.get("host_ram_bytes"),
        kv_cache_memory_bytes=settings.get("kv_cache_memory_bytes"),
    )
    return PlanRequest(
        source=source,
        gpu=gpu,
        user=user,
        engine_version=engine_option(settings["engine"]),
        revision=settings["revision"],
        use_catalog=not settings["no_catalog"],
    )


_SETTING_FIELDS = {
    "tp": "tensor_parallel_size",
    "max_model_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_cache_dtype": "kv_cache_dtype",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "language_model_only": "language_model_only",
    "limit_mm_per_prompt": "limit_mm_per_prompt",
    "mm_encoder_tp_mode": "mm_encoder_tp_mode",
    "host_ram_bytes": "host_ram_bytes",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}


def given_settings(settings: dict[str, Any], typed: frozenset[str] | None = None) -> dict[str, Any]:
    """The engine settings typed on the command line (not defaults), as UserSettings fields. TYPED: the
    options given on the command line (None: those the running click command was given)."""
    if typed is None:
        import click

        ctx = click.get_current_context()
        typed = frozenset(k for k in settings if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE)
    given = {}
    for key, name in _SETTING_FIELDS.items():
        if key in settings and key in typed:
            given[name] = _limits(settings[key]) if key == "limit_mm_per_prompt" else settings[key]
    return given


def candidate_plans(
    from_file: str,
    source: str | None,
    gpu: str | None,
    settings: dict[str, Any],
    calibration: Any = None,
    typed: frozenset[str] | None = None,
) -> tuple[CandidatePlan, ...]:
    """Plan the deployments of a file (`--from`; `--name` picks one): their settings, with the ones
    typed here winning."""
    from apron.plan.candidate import GpuRequest, plan_deployments

    return plan_deployments(
        from_file,
        settings.get("deployment_name"),
        source,
        GpuRequest(gpu, settings.get("gpu_memory_bytes"), settings.get("gpu_capability")),
        given_settings(settings, typed),
        engine_option(settings.get("engine")),
        use_catalog=not settings["no_catalog"],
        calibration=calibration,
    )
