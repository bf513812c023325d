"""The bundled catalog: snapshots of popular public checkpoints shipped inside the package.

They let `apron plan <repo_id>` answer with no network. A plan from the catalog says so, and names
the revision the snapshot was recorded from.
"""

from __future__ import annotations

import json
import os
import zlib
from functools import lru_cache

from apron.checkpoint import files as cf
from apron.checkpoint.model import Checkpoint
from apron.checkpoint.snapshot import load_snapshot
from apron.frozen import replace
from apron.paths import read_bytes

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# Package data sits beside the code (importlib.resources costs ~13 ms of start-up for the same files);
# a str, not a pathlib.Path: pathlib's import is ~5 ms of a plan's start.
CATALOG = os.path.join(os.path.dirname(__file__), "catalog")
# zlib reads the catalog's gzip files (one member each: tests/test_catalog_headers.py reads every one
# with gzip too) without the gzip module's import (~1 ms): 16 + MAX_WBITS takes the gzip framing.
_GZIP_WBITS = 16 + zlib.MAX_WBITS


@lru_cache(maxsize=1)
def catalog_index() -> dict[str, dict[str, Any]]:
    index: dict[str, dict[str, Any]] = json.loads(read_bytes(os.path.join(CATALOG, "index.json")))
    return index


@lru_cache(maxsize=1)
def _folded() -> dict[str, str]:
    return {repo_id.casefold(): repo_id for repo_id in catalog_index()}


def catalog_id(repo_id: str) -> str | None:
    """The catalog's id for REPO_ID, matched without regard to case as the Hub resolves repo ids
    (Qwen/Qwen3-8b is Qwen/Qwen3-8B); None when the catalog has no such model."""
    return repo_id if repo_id in catalog_index() else _folded().get(repo_id.casefold())


def in_catalog(repo_id: str, revision: str | None = None) -> bool:
    found = catalog_id(repo_id)
    return found is not None and revision in (None, catalog_index()[found].get("revision"))


def load_from_catalog(repo_id: str) -> Checkpoint:
    found = catalog_id(repo_id)
    if found is None:
        raise KeyError(repo_id)
    entry = catalog_index()[found]
    raw = zlib.decompress(read_bytes(os.path.join(CATALOG, entry["file"])), _GZIP_WBITS)
    document = cf.parse_json(raw, f"catalog/{entry['file']}")
    checkpoint = load_snapshot(
        f"catalog:{found}", source_kind="catalog", source=found, document=document, is_trusted=True
    )
    note = (
        f"read from Apron's bundled catalog (revision {entry.get('revision') or 'unrecorded'}"
        f"{'' if entry.get('exact') else ', byte totals not checked against the Hub'}), not the Hub"
    )
    if found != repo_id:
        note += f"; {repo_id} is {found} there (repo ids match without regard to case, as on the Hub)"
    return _with_notes(checkpoint, note)


def _with_notes(checkpoint: Checkpoint, *notes: str) -> Checkpoint:
    return replace(checkpoint, notes=checkpoint.notes + notes)
