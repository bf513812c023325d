"""Each rule's status per engine version: untested, hypothesis, or proven.

A rule is a hypothesis on a release once a failed boot (its record, or a log's content id) motivated
applying it there. It is proven on that release only when a second boot with the correction came
up healthy and answered: the proof names the failed record and the corrected healthy one. Proof never
carries to another release: the engine changed, the rule must be shown again.

One JSON file per rule under records/rules/ (the record store's rules folder), written like every
file Apron keeps (apron.paths.write_atomic), updated under an exclusive lock so two boots promoting at
once both land.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from apron.errors import BadInput
from apron.frozen import frozen
from apron.paths import write_atomic

SCHEMA = "apron.rule-status/1"
STATUSES = ("untested", "hypothesis", "proven")


@frozen
class Proof:
    failed_id: str
    healthy_id: str
    proven_at: str

    def to_json(self) -> dict[str, Any]:
        return {"failed_id": self.failed_id, "healthy_id": self.healthy_id, "proven_at": self.proven_at}


@frozen
class RuleStatus:
    rule_id: str
    engine_version: str
    status: str
    motivated_by: tuple[str, ...] = ()  # failed boot records (or log ids) that called for the rule
    proofs: tuple[Proof, ...] = ()

    @property
    def is_proven(self) -> bool:
        return self.status == "proven"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule_id,
            "engine_version": self.engine_version,
            "status": self.status,
            "motivated_by": list(self.motivated_by),
            "proofs": [p.to_json() for p in self.proofs],
        }

    def evidence(self) -> str:
        if self.proofs:
            first = self.proofs[0]
            more = f" (+{len(self.proofs) - 1} more)" if len(self.proofs) > 1 else ""
            return f"failed {first.failed_id} -> healthy {first.healthy_id}{more}"
        if self.motivated_by:
            return f"motivated by {self.motivated_by[0]}" + (
                f" (+{len(self.motivated_by) - 1} more)" if len(self.motivated_by) > 1 else ""
            )
        return "no boot has tried it on this release"


def _version(engine_version: str) -> str:
    version = str(engine_version).strip().removeprefix("vllm==").removeprefix("v")
    if not version:
        raise BadInput("an engine version is required for a rule status")
    return version


def _record_id(value: str, what: str) -> str:
    value = str(value or "").strip()
    if not value or any(c in value for c in "\n\r"):
        raise BadInput(f"{what} must be a non-empty record id")
    return value


class StatusStore:
    def __init__(self, root: Path | str | None = None):
        if root is None:
            from apron.paths import records_dir

            root = records_dir() / "rules"
        self.root = Path(root)

    # ------------------------------------------------------------------ reading

    def status(self, rule_id: str, engine_version: str) -> RuleStatus:
        version = _version(engine_version)
        entry = self._read(rule_id).get("versions", {}).get(version)
        return _from_entry(rule_id, version, entry)

    def statuses(self, rule_id: str) -> dict[str, RuleStatus]:
        versions = self._read(rule_id).get("versions", {})
        return {v: _from_entry(rule_id, v, e) for v, e in sorted(versions.items())}

    # ------------------------------------------------------------------ writing

    def note_hypothesis(self, rule_id: str, engine_version: str, motivating_id: str) -> RuleStatus:
        """A failed boot called for this rule on this release (a proven rule stays proven)."""
        version, motivating_id = _version(engine_version), _record_id(motivating_id, "the motivating id")
        with self._update(rule_id) as document:
            entry = document["versions"].setdefault(version, {"status": "hypothesis", "motivated_by": [], "proofs": []})
            if motivating_id not in entry["motivated_by"]:
                entry["motivated_by"].append(motivating_id)
        return self.status(rule_id, version)

    def promote(self, rule_id: str, engine_version: str, failed_id: str, healthy_id: str) -> RuleStatus:
        """The corrected boot on this release came up healthy and answered: the rule is proven here."""
        version = _version(engine_version)
        failed_id, healthy_id = _record_id(failed_id, "failed_id"), _record_id(healthy_id, "healthy_id")
        if failed_id == healthy_id:
            raise BadInput("a proof needs two boots: failed_id and healthy_id are the same record")
        with self._update(rule_id) as document:
            entry = document["versions"].setdefault(version, {"status": "hypothesis", "motivated_by": [], "proofs": []})
            entry["status"] = "proven"
            if failed_id not in entry["motivated_by"]:
                entry["motivated_by"].append(failed_id)
            if not any(p["failed_id"] == failed_id and p["healthy_id"] == healthy_id for p in entry["proofs"]):
                entry["proofs"].append({"failed_id": failed_id, "healthy_id": healthy_id, "proven_at": _now()})
        return self.status(rule_id, version)

    # ------------------------------------------------------------------ files

    def path(self, rule_id: str) -> Path:
        if not rule_id or "/" in rule_id or rule_id.startswith("."):
            raise BadInput(f"rule id {rule_id!r} is not valid")
        return self.root / f"{rule_id}.json"

    def _read(self, rule_id: str) -> dict[str, Any]:
        path = self.path(rule_id)
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            return {"schema": SCHEMA, "rule": rule_id, "versions": {}}
        except (OSError, ValueError) as exc:
            raise BadInput(f"rule status {path}: unreadable ({exc}); move it aside") from None
        if not isinstance(document, dict):
            raise BadInput(f"rule status {path}: not a JSON object; move it aside")
        if document.get("schema") != SCHEMA:
            raise BadInput(f"rule status {path}: schema {document.get('schema')!r} is not {SCHEMA}")
        return document

    @contextlib.contextmanager
    def _update(self, rule_id: str) -> Iterator[dict[str, Any]]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{rule_id}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            document = self._read(rule_id)
            document.setdefault("versions", {})
            yield document
            _write(self.path(rule_id), document)


def _from_entry(rule_id: str, version: str, entry: dict[str, Any] | None) -> RuleStatus:
    if not entry:
        return RuleStatus(rule_id, version, "untested")
    proofs = tuple(Proof(p["failed_id"], p["healthy_id"], p.get("proven_at", "")) for p in entry.get("proofs", []))
    status = entry.get("status", "hypothesis")
    if status not in STATUSES or (status == "proven" and not proofs):
        status = "hypothesis"  # a file that claims proof without the two records is not proof
    return RuleStatus(rule_id, version, status, tuple(entry.get("motivated_by", [])), proofs)


def _write(path: Path, document: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
