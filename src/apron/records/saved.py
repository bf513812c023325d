"""A saved plan, wherever the user keeps it: an `apron.plan/1` JSON file (`apron plan --json >
plan.json`, gzip too), a file holding a plan record, or the id of a plan record in the store (a unique
prefix of 4+ hex characters, as `apron records show` takes). The one loader `apron boot` and `apron diagnose --plan`
share."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from apron.errors import BadInput
from apron.plan.result import SCHEMA, Plan
from apron.records.documents import PlanRecord
from apron.records.store import MIN_PREFIX, RecordStore

MIN_ID_CHARS = MIN_PREFIX


def saved_plan(ref: str, store: RecordStore) -> Plan | None:
    """The plan REF names; None when REF is no such file (or a JSON file that is not a plan, such as a
    checkpoint snapshot) and no record id. BadInput for a damaged plan or an id the store lacks."""
    path = Path(ref).expanduser()
    if path.is_file():
        document = _read_json(path)
        plan = _plan_in(document)
        return Plan.from_json(plan, str(path)) if plan is not None else None
    if looks_like_record_id(ref):
        return store.get_as(ref, PlanRecord).document.plan
    return None


def looks_like_record_id(ref: str) -> bool:
    return len(ref) >= MIN_ID_CHARS and all(c in "0123456789abcdef" for c in ref.lower())


def not_a_plan(ref: str) -> BadInput:
    return BadInput(
        f"{ref}: neither an {SCHEMA} document, a plan record, nor the id of one ({MIN_ID_CHARS}+ hex "
        "characters); write one with `apron plan ... --json > plan.json`"
    )


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable JSON document ({exc})") from None


def _plan_in(document: Any) -> dict[str, Any] | None:
    """The plan document itself, or the one a record holds under "plan"; None for anything else."""
    if not isinstance(document, dict):
        return None
    if document.get("schema") == SCHEMA:
        return document
    inner = document.get("plan")
    return inner if isinstance(inner, dict) and inner.get("schema") == SCHEMA else None
