"""A content-addressed record store: a record's id is the sha256 of its canonical JSON.

Layout under the store folder (the user's data dir by default, or a folder kept in git):
    records/<id[:2]>/<id>.json   one record, canonical JSON, never overwritten
    blobs/<sha[:2]>/<sha>.gz     large payloads (engine logs) by the sha256 of their raw bytes
    tmp/                         writes in progress; a crash leaves debris here, never a partial record

A write goes to a temp file, is fsynced, then linked into place (link fails if the name exists, so
nothing is overwritten) and the folder is fsynced. A read recomputes the hash, so a damaged file is
reported instead of trusted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from apron.errors import BadInput, Failed

SCHEMA_VERSION = 1
KINDS = ("plan", "boot", "fix")  # fix: a correction rule applied between two boots (apron.boot.fix)


def canonical_bytes(document: dict) -> bytes:
    """Sorted keys, compact separators, UTF-8: one byte string per document."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_id(document: dict) -> str:
    return sha256_hex(canonical_bytes(document))


@dataclass(frozen=True)
class StoredRecord:
    id: str
    document: dict

    @property
    def kind(self) -> str:
        return self.document.get("kind", "?")


class RecordStore:
    def __init__(self, root: Path | str | None = None):
        if root is None:
            from apron.paths import records_dir

            root = records_dir()
        self.root = Path(root)

    # -- writing ---------------------------------------------------------------------------------
    def put(self, document: dict) -> str:
        """Store a record (adding schema_version) and return its id; storing it again is a no-op."""
        if document.get("kind") not in KINDS:
            raise ValueError(f"record kind {document.get('kind')!r} is not one of {KINDS}")
        document = {"schema_version": SCHEMA_VERSION, **document}
        data = canonical_bytes(document)
        rid = sha256_hex(data)
        self._write_once(self._record_path(rid), data)
        return rid

    def put_blob(self, data: bytes) -> str:
        sha = sha256_hex(data)
        self._write_once(self._blob_path(sha), gzip.compress(data, mtime=0))
        return sha

    def _write_once(self, path: Path, data: bytes) -> None:
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix=path.stem[:12] + ".")
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), 0o644)  # mkstemp's 0600 would hide records from a shared repo
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp_name, path)  # atomic, and refuses to replace an existing record
            except FileExistsError:
                pass
            _fsync_dir(path.parent)
        finally:
            os.unlink(tmp_name)

    # -- reading ---------------------------------------------------------------------------------
    def get(self, rid: str) -> StoredRecord:
        path = self._find(rid)
        data = path.read_bytes()
        if sha256_hex(data) != path.stem:
            raise Failed(f"record {path.stem} in {self.root} does not match its hash (damaged file {path})")
        try:
            document = json.loads(data)
        except ValueError as exc:
            raise Failed(f"record {path.stem} is not JSON ({exc})") from None
        return StoredRecord(path.stem, document)

    def get_blob(self, sha: str) -> bytes:
        path = self._blob_path(sha)
        if not path.exists():
            raise BadInput(f"no blob {sha} in {self.root}")
        data = gzip.decompress(path.read_bytes())
        if sha256_hex(data) != sha:
            raise Failed(f"blob {sha} in {self.root} does not match its hash (damaged file {path})")
        return data

    def ids(self) -> list[str]:
        folder = self.root / "records"
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("??/*.json"))

    def all(self) -> list[StoredRecord]:
        return [self.get(rid) for rid in self.ids()]

    def verify(self) -> list[str]:
        """Ids of records or blobs whose bytes do not match their names (empty when all is well)."""
        bad = []
        for rid in self.ids():
            try:
                self.get(rid)
            except Failed:
                bad.append(rid)
        for path in (self.root / "blobs").glob("??/*.gz"):
            try:
                self.get_blob(path.name[:-3])
            except (Failed, OSError, EOFError):
                bad.append(path.name[:-3])
        return bad

    def _find(self, rid: str) -> Path:
        rid = rid.strip().lower()
        if len(rid) < 4 or not all(c in "0123456789abcdef" for c in rid):
            raise BadInput(f"record id '{rid}' must be at least 4 hex characters")
        exact = self._record_path(rid) if len(rid) == 64 else None
        if exact is not None and exact.exists():
            return exact
        matches = sorted((self.root / "records" / rid[:2]).glob(f"{rid}*.json"))
        if not matches:
            raise BadInput(f"no record {rid} in {self.root} (see `apron records list`)")
        if len(matches) > 1:
            raise BadInput(f"record id {rid} is ambiguous in {self.root}: give more characters")
        return matches[0]

    def _record_path(self, rid: str) -> Path:
        return self.root / "records" / rid[:2] / f"{rid}.json"

    def _blob_path(self, sha: str) -> Path:
        return self.root / "blobs" / sha[:2] / f"{sha}.gz"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
