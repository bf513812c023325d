"""SOURCE -> Checkpoint: a folder, a snapshot file, a catalog entry or a Hub repo id."""

from __future__ import annotations

import os
import re

from apron.checkpoint.model import Checkpoint
from apron.errors import BadInput

# Hub repo ids: "name" or "org/name", letters, digits, '-', '_', '.' (huggingface_hub's validator).
REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


def load_checkpoint(source: str, revision: str | None = None, *, use_catalog: bool = True) -> Checkpoint:
    # os.path, not pathlib, until a folder is read: pathlib's import is ~5 ms of a catalog plan's start
    path = os.path.expanduser(source)
    if os.path.isdir(path):
        from pathlib import Path

        from apron.checkpoint.local import load_local

        return load_local(Path(path))
    if os.path.isfile(path):
        if path.endswith((".json", ".json.gz")):
            from apron.checkpoint.snapshot import load_snapshot

            return load_snapshot(path)
        raise BadInput(
            f"{source}: a file, but not a snapshot (*.json or *.json.gz); give a checkpoint "
            "folder, a snapshot file or a Hub repo id"
        )
    if os.path.islink(path):  # a link to nothing (or a loop): the user meant this path, not a repo id
        from pathlib import Path

        from apron.checkpoint.local import entry_problem

        raise BadInput(f"SOURCE {source}: {entry_problem(Path(path))}")
    if not REPO_ID.match(source) or source.endswith((".json", ".gz", ".safetensors")):
        raise BadInput(
            f"SOURCE '{source}' does not exist and is not a Hub repo id (org/name); give a "
            "checkpoint folder, a snapshot file or a repo id"
        )
    from apron.checkpoint.catalog import in_catalog, load_from_catalog

    if use_catalog and in_catalog(source, revision):
        return load_from_catalog(source)
    from apron.checkpoint.hub import load_hub

    return load_hub(source, revision)
