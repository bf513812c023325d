"""The bundled catalog: snapshots of popular public checkpoints shipped inside the package.

They let `apron plan <repo_id>` answer with no network. A plan from the catalog says so, and names
the revision the snapshot was recorded from.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from apron.checkpoint import files as cf
from apron.checkpoint.model import Checkpoint
from apron.checkpoint.snapshot import load_snapshot

# Package data sits beside the code (importlib.resources costs ~13 ms of start-up for the same files).
CATALOG = Path(__file__).parent / "catalog"


@lru_cache(maxsize=1)
def catalog_index() -> dict[str, dict[str, Any]]:
    index: dict[str, dict[str, Any]] = json.loads((CATALOG / "index.json").read_text())
    return index


def in_catalog(repo_id: str, revision: str | None = None) -> bool:
    entry = catalog_index().get(repo_id)
    return entry is not None and revision in (None, entry.get("revision"))


def load_from_catalog(repo_id: str) -> Checkpoint:
    import gzip

    entry = catalog_index()[repo_id]
    raw = (CATALOG / entry["file"]).read_bytes()
    document = cf.parse_json(gzip.decompress(raw), f"catalog/{entry['file']}")
    checkpoint = load_snapshot(f"catalog:{repo_id}", source_kind="catalog", source=repo_id, document=document)
    note = (
        f"read from Apron's bundled catalog (revision {entry.get('revision') or 'unrecorded'}"
        f"{'' if entry.get('exact') else ', byte totals not checked against the Hub'}), not the Hub"
    )
    return _with_notes(checkpoint, note)


def _with_notes(checkpoint: Checkpoint, *notes: str) -> Checkpoint:
    from dataclasses import replace

    return replace(checkpoint, notes=checkpoint.notes + notes)
