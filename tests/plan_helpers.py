"""A real plan to start from: `apron plan` of a tiny Gemma2 for an L4 on vLLM 0.32.0
(tests/fixtures/plans/tiny-gemma2-L4-vllm-0.32.0.json), with the fields a test cares about changed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from apron.plan.quantity import Problem, Quantity
from apron.plan.result import Plan

PLAN_FILE = Path(__file__).parent / "fixtures" / "plans" / "tiny-gemma2-L4-vllm-0.32.0.json"


def base_plan() -> Plan:
    return Plan.from_json(json.loads(PLAN_FILE.read_text()), str(PLAN_FILE))


def a_plan(
    *,
    settings: dict[str, Any] | None = None,
    quantities: dict[str, int | float | None] | None = None,
    problems: tuple[tuple[str, str, str], ...] = (),
    model_shape: dict[str, int] | None = None,
    **changes: Any,
) -> Plan:
    """The tiny plan with SETTINGS fields, quantity VALUES (label predicted; None: unknown), PROBLEMS
    as (kind, message, label), the model shape and any other top-level field changed."""
    plan = base_plan()
    if settings:
        changes["settings"] = replace(plan.settings, **settings)
    if quantities:
        merged = dict(plan.quantities)
        for name, value in quantities.items():
            old = merged[name]
            merged[name] = (
                Quantity.unknown(old.unit, "test") if value is None else Quantity(value, old.unit, "predicted", "test")
            )
        changes["quantities"] = merged
    if problems:
        changes["problems"] = tuple(Problem(kind, message, label) for kind, message, label in problems)
    if model_shape is not None:
        changes["details"] = {**plan.details, "model_shape": model_shape}
    return replace(plan, **changes)
