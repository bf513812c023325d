"""Apron's cache of what a Hub repo held at one commit: its file list and its safetensors headers.

Entries are keyed by (repo, commit sha, file). A commit sha names immutable content, so an entry never
goes stale and a second plan of the same commit sends no header requests. Branch and tag names are
kept only as refs for HF_HUB_OFFLINE=1, where the commit last resolved is the best answer there is.
Config files are not kept here: they live in huggingface_hub's own cache.

Layout under apron.paths.cache_dir():
    hub-headers/<org>--<name>/refs/<revision, URL-quoted>      text: the commit sha
    hub-headers/<org>--<name>/<sha>/listing.json               {"files": {name: size_bytes | null}}
    hub-headers/<org>--<name>/<sha>/headers/<file>             the first 8 + N bytes of the shard
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from urllib.parse import quote

from apron.checkpoint.safetensors import LENGTH_PREFIX_BYTES
from apron.paths import cache_dir, write_atomic

CACHE_NAME = "hub-headers"


def repo_dir(repo_id: str) -> Path:
    return cache_dir() / CACHE_NAME / repo_id.replace("/", "--")


def read_ref(repo_id: str, revision: str) -> str | None:
    path = repo_dir(repo_id) / "refs" / quote(revision, safe="")
    try:
        sha = path.read_text().strip()
    except OSError:
        return None
    return sha or None


def write_ref(repo_id: str, revision: str, sha: str) -> None:
    _write_atomic(repo_dir(repo_id) / "refs" / quote(revision, safe=""), sha.encode())


def read_listing(repo_id: str, sha: str) -> dict[str, int | None] | None:
    try:
        document = json.loads((repo_dir(repo_id) / sha / "listing.json").read_bytes())
        files = document["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a missing or damaged entry is a miss, never an error: the Hub has the truth
    if not isinstance(files, dict):
        return None
    return {str(name): size if isinstance(size, int) else None for name, size in files.items()}


def write_listing(repo_id: str, sha: str, sizes: dict[str, int | None]) -> None:
    raw = json.dumps({"repo_id": repo_id, "sha": sha, "files": sizes}, indent=1, sort_keys=True)
    _write_atomic(repo_dir(repo_id) / sha / "listing.json", raw.encode())


def read_header(repo_id: str, sha: str, file: str) -> bytes | None:
    try:
        raw = _header_path(repo_id, sha, file).read_bytes()
    except OSError:
        return None
    # Only the framing is checked here; parsing (and its errors) happens where every header is parsed.
    if len(raw) < LENGTH_PREFIX_BYTES:
        return None
    (length,) = struct.unpack("<Q", raw[:LENGTH_PREFIX_BYTES])
    return raw if LENGTH_PREFIX_BYTES + length == len(raw) else None


def write_header(repo_id: str, sha: str, file: str, raw: bytes) -> None:
    _write_atomic(_header_path(repo_id, sha, file), raw)


def _header_path(repo_id: str, sha: str, file: str) -> Path:
    return repo_dir(repo_id) / sha / "headers" / quote(file, safe="")


def _write_atomic(path: Path, data: bytes) -> None:
    """Best effort: a cache that cannot be written (read-only home, full disk) costs a refetch next
    time, not this plan."""
    try:
        write_atomic(path, data)
    except OSError:
        pass
