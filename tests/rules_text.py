"""Shared material for the diagnosis tests: the real logs, the engine's templates, and rendering."""

from __future__ import annotations

import json
from pathlib import Path

from apron.rules.pattern import Field, split

LOGS = Path(__file__).parent / "fixtures" / "logs"
TRAINING = Path(__file__).parent / "fixtures" / "boots-training.json"
FACTS_VERSIONS = ("0.29.0", "0.30.0", "0.33.0")


def log_text(name: str) -> str:
    return (LOGS / f"{name}.log").read_text()


def log_index() -> dict:
    return json.loads((LOGS / "index.json").read_text())


def training_failures() -> list[dict]:
    boots = json.loads(TRAINING.read_text())["boots"]
    return [b for b in boots if (b.get("failure") or {}).get("last_error")]


def shipped_refusals(version: str) -> list[dict]:
    """The refusal templates of a release from its shipped engine facts."""
    from apron.engine.facts import load_facts
    from apron.rules.catalog import facts_refusals

    refusals = facts_refusals(load_facts(version))
    assert refusals, f"the shipped engine facts of vllm {version} hold no refusal templates"
    return refusals


def template_with(refusals: list[dict], phrase: str) -> dict:
    found = [r for r in refusals if phrase in r["template"]]
    assert found, f"no template with {phrase!r}"
    return found[0]


def render(template: str, values: dict) -> str:
    """A template rendered the way the f-string in vLLM renders it (conversion and format spec)."""
    out = []
    for part in split(template):
        if isinstance(part, str):
            out.append(part)
            continue
        value = values.get(part.expr, _default(part))
        if part.conversion == "r":
            value = repr(value)
        try:
            out.append(format(value, part.spec) if part.spec and "{" not in part.spec else str(value))
        except (ValueError, TypeError):
            out.append(str(value))
    return "".join(out)


def _default(part: Field):
    return 12345 if part.spec and part.spec[-1:] in "dfeg%xXbo" else "VALUE"
