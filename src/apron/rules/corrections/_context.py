"""What rules read besides the fingerprint: the values the failed boot ran with, and the plan."""

from __future__ import annotations

import math
from typing import Any

from apron.frozen import replace
from apron.measure.loglines import read_lines
from apron.measure.logparse import SETTINGS_WINDOW, settings_in
from apron.plan.result import Plan
from apron.plan.settings import UserSettings
from apron.rules.fingerprint import Fingerprint

# What a rule's match returns and its correction reads: the values the correction needs.
Fields = dict[str, Any]
__all__ = ["Fields", "Fingerprint", "Plan", "UserSettings"]


def ran_with(name: str, log_text: str, plan: Plan | None) -> Any:
    """The value of an engine setting the failed boot used: the `non-default args` line vLLM logged,
    else the plan's resolved settings, else None (the rule then says nothing)."""
    head = "\n".join(log_text.split("\n", SETTINGS_WINDOW)[:SETTINGS_WINDOW])
    args = settings_in(read_lines(head))[0] or {}
    if args.get(name) is not None:
        return args[name]
    return plan.settings.to_json().get(name) if plan is not None else None


def engine_default(name: str, engine_version: str | None) -> Any:
    """The release's default for a setting (from its engine facts), None when unknown."""
    if not engine_version:
        return None
    from apron.engine.facts import load_facts
    from apron.errors import ApronError

    try:
        return load_facts(engine_version).defaults.get(name)
    except (ApronError, OSError, KeyError):
        return None


def model_shape(plan: Plan | None) -> dict[str, Any]:
    return plan.model_shape if plan is not None else {}


def total_bytes_per_gpu(plan: Plan | None) -> int | None:
    return plan.total_bytes_per_gpu if plan is not None else None


def gpu_capability(plan: Plan | None) -> int | None:
    """The plan's GPU compute capability as an int (89 for 8.9), from the GPU catalog."""
    if plan is None:
        return None
    from apron.errors import ApronError
    from apron.hardware import resolve_gpu

    try:
        return resolve_gpu(plan.gpu_name).capability_int
    except ApronError:
        return None


def plan_flag_value(plan: Plan | None, option: str) -> str | None:
    """`--reasoning-parser qwen3` in the plan's flags -> "qwen3"."""
    return plan.flag_value(option) if plan is not None else None


def with_flag(settings: UserSettings, option: str, value: str | None) -> UserSettings:
    """The settings with `option value` among the extra flags (replacing any earlier value), or
    without the option when value is None."""
    kept = tuple(f for f in settings.extra_flags if option not in f.split())
    added = (f"{option} {value}",) if value is not None else ()
    return replace(settings, extra_flags=kept + added)


def with_env(settings: UserSettings, name: str, value: str) -> UserSettings:
    env = dict(settings.env)
    env[name] = value
    return replace(settings, env=tuple(sorted(env.items())))


def ceil_hundredth(value: float) -> float:
    # round first: 0.05 * 100 is 5.000000000000001 and must not become 0.06
    return math.ceil(round(value * 100, 6)) / 100


def floor_hundredth(value: float) -> float:
    return math.floor(round(value * 100, 6)) / 100
