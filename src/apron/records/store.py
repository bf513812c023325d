"""A content-addressed record store: a record's id is the sha256 of its canonical JSON.

Layout under the store folder (the user's data dir by default, or a folder kept in git):
    records/<id[:2]>/<id>.json   one record, canonical JSON, never overwritten
    blobs/<sha[:2]>/<sha>.gz     large payloads (engine logs) by the sha256 of their raw bytes
    rules/<rule>.json            each correction rule's status per release (apron.rules.status)
    tmp/                         writes in progress; a crash leaves debris here, never a partial record

Everything that reads or writes records comes through `RecordStore`: a write goes through
apron.paths.write_atomic (linked into place, so nothing is overwritten), and every read recomputes the
hash, so a damaged file is reported instead of trusted. Records go in and come out as the typed
documents of apron.records.documents.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any, Generic, TypeVar

from apron.errors import BadInput, Failed
from apron.frozen import frozen
from apron.paths import write_atomic
from apron.records.documents import RecordDocument, document_from_json

SCHEMA_VERSION = 1
MIN_PREFIX = 4
D = TypeVar("D", bound=RecordDocument)


def canonical_bytes(document: dict[str, Any]) -> bytes:
    """Sorted keys, compact separators, UTF-8: one byte string per document."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_id(document: dict[str, Any]) -> str:
    return sha256_hex(canonical_bytes(document))


@frozen
class StoredRecord(Generic[D]):
    id: str
    document: D
    raw: dict[str, Any]  # the JSON as stored (hash verified), for `records show --json`

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind"))


class RecordStore:
    def __init__(self, root: Path | str | None = None):
        if root is None:
            from apron.paths import records_dir

            root = records_dir()
        self.root = Path(root)

    @property
    def rules_dir(self) -> Path:
        """Where rule statuses live: beside the boot records that prove them."""
        return self.root / "rules"

    # -- writing ---------------------------------------------------------------------------------
    def put(self, document: RecordDocument) -> str:
        """Store a record (adding schema_version) and return its id; storing it again is a no-op."""
        data = canonical_bytes({"schema_version": SCHEMA_VERSION, **document.to_json()})
        rid = sha256_hex(data)
        self._write_once(self._record_path(rid), data)
        return rid

    def put_blob(self, data: bytes) -> str:
        sha = sha256_hex(data)
        self._write_once(self._blob_path(sha), gzip.compress(data, mtime=0))
        return sha

    def _write_once(self, path: Path, data: bytes) -> None:
        if not path.exists():
            write_atomic(path, data, overwrite=False, temp_dir=self.root / "tmp")

    # -- reading ---------------------------------------------------------------------------------
    def get(self, rid: str) -> StoredRecord[RecordDocument]:
        """The record with this id (or unique id prefix of 4+ hex characters), hash verified."""
        return self._read(self._find(rid))

    def get_as(self, rid: str, kind: type[D]) -> StoredRecord[D]:
        """As `get`, for a record that must be of this kind (BadInput naming both kinds otherwise)."""
        record = self.get(rid)
        if not isinstance(record.document, kind):
            raise BadInput(f"record {record.id[:12]} is a {record.kind}, not a {kind.KIND}")
        return StoredRecord(record.id, record.document, record.raw)

    def find(self, kind: type[D], prefix: str = "", **fields: object) -> list[StoredRecord[D]]:
        """Records of this kind whose id starts with PREFIX and whose top-level fields equal FIELDS."""
        out = []
        for rid in self.ids(prefix):
            record = self.get(rid)
            document = record.document
            if isinstance(document, kind) and all(document.field_value(k) == v for k, v in fields.items()):
                out.append(StoredRecord(record.id, document, record.raw))
        return out

    def get_blob(self, sha: str) -> bytes:
        path = self._blob_path(sha)
        if not path.exists():
            raise BadInput(f"no blob {sha} in {self.root}")
        data = gzip.decompress(path.read_bytes())
        if sha256_hex(data) != sha:
            raise Failed(f"blob {sha} in {self.root} does not match its hash (damaged file {path})")
        return data

    def ids(self, prefix: str = "") -> list[str]:
        folder = self.root / "records"
        if not folder.is_dir():
            return []
        pattern = f"{prefix[:2]}/{prefix}*.json" if len(prefix) >= 2 else f"{prefix}?/*.json" if prefix else "??/*.json"
        return sorted(p.stem for p in folder.glob(pattern))

    def all(self) -> list[StoredRecord[RecordDocument]]:
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

    def _read(self, path: Path) -> StoredRecord[RecordDocument]:
        data = path.read_bytes()
        if sha256_hex(data) != path.stem:
            raise Failed(f"record {path.stem} in {self.root} does not match its hash (damaged file {path})")
        try:
            raw = json.loads(data)
            return StoredRecord(path.stem, document_from_json(raw, SCHEMA_VERSION), raw)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Failed(f"record {path.stem} in {self.root} is not a record Apron reads ({exc})") from None

    def _find(self, rid: str) -> Path:
        rid = rid.strip().lower()
        if len(rid) < MIN_PREFIX or not all(c in "0123456789abcdef" for c in rid):
            raise BadInput(f"record id '{rid}' must be at least {MIN_PREFIX} hex characters")
        exact = self._record_path(rid) if len(rid) == 64 else None
        if exact is not None and exact.exists():
            return exact
        matches = self.ids(rid)
        if not matches:
            raise BadInput(f"no record {rid} in {self.root} (see `apron records list`)")
        if len(matches) > 1:
            shown = ", ".join(f"{m[:12]} ({self._kind_of(m)})" for m in matches[:6])
            more = f" and {len(matches) - 6} more" if len(matches) > 6 else ""
            raise BadInput(
                f"record id {rid} is ambiguous in {self.root}: it starts {shown}{more}; give more characters"
            )
        return self._record_path(matches[0])

    def _kind_of(self, rid: str) -> str:
        try:
            return str(json.loads(self._record_path(rid).read_bytes()).get("kind"))
        except (OSError, ValueError):
            return "unreadable"

    def _record_path(self, rid: str) -> Path:
        return self.root / "records" / rid[:2] / f"{rid}.json"

    def _blob_path(self, sha: str) -> Path:
        return self.root / "blobs" / sha[:2] / f"{sha}.gz"
