"""The inputs of `apron diagnose`: a log file, and the plan the boot ran (a file or a record id)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from apron.errors import BadInput

PLAN_SCHEMA = "apron.plan/1"
MIN_ID_PREFIX = 6


def read_log(path: str) -> str:
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"log file {path} does not exist") from None
    except OSError as exc:
        raise BadInput(f"log file {path}: unreadable ({exc.strerror})") from None
    if path.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise BadInput(f"log file {path}: not gzip ({exc})") from None
    return raw.decode("utf-8", "replace")


def load_plan_ref(ref: str) -> dict:
    """A plan JSON file (apron plan --json), a record holding one under "plan", or the id (or an id
    prefix of 6+ characters) of such a record under the records folder."""
    path = Path(ref)
    if path.is_file():
        return _plan_in(_read_json(path), str(path))
    return _plan_in(_read_json(_record_by_id(ref)), ref)


def _read_json(path: Path) -> dict:
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        document = json.loads(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise BadInput(f"--plan {path}: not a readable JSON document ({exc})") from None
    if not isinstance(document, dict):
        raise BadInput(f"--plan {path}: a JSON object is expected")
    return document


def _plan_in(document: dict, where: str) -> dict:
    if document.get("schema") == PLAN_SCHEMA:
        return document
    inner = document.get("plan")
    if isinstance(inner, dict) and inner.get("schema") == PLAN_SCHEMA:
        return inner
    raise BadInput(
        f"--plan {where}: neither an {PLAN_SCHEMA} document nor a record holding one; "
        "write one with `apron plan ... --json > plan.json`"
    )


def _record_by_id(ref: str) -> Path:
    from apron.paths import records_dir

    if len(ref) < MIN_ID_PREFIX or "/" in ref:
        raise BadInput(f"--plan {ref}: no such file, and too short for a record id (6+ characters)")
    root = records_dir()
    found = (
        sorted(
            p
            for p in root.rglob(f"{ref}*")
            if p.is_file() and p.name.endswith((".json", ".json.gz")) and "rules" not in p.relative_to(root).parts
        )
        if root.is_dir()
        else []
    )
    if not found:
        raise BadInput(f"--plan {ref}: no such file, and no record with that id under {root}")
    if len({p.name for p in found}) > 1:
        raise BadInput(f"--plan {ref}: {len(found)} records start with that id; give more characters")
    return found[0]
