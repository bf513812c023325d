"""The JSON documents `apron records list/show/compare --json` print, built once for the CLI and the
MCP tools so both hand out the same documents."""

from __future__ import annotations

from typing import Any

from apron.records.documents import BootRecord, FixRecord, PlanRecord, RecordDocument, compare
from apron.records.report import summary_row
from apron.records.store import RecordStore, StoredRecord


def list_rows(store: RecordStore, kind: str | None = None, *, with_settled: bool = True) -> list[dict[str, Any]]:
    """Every record's summary, plans first, then by creation time. Without WITH_SETTLED, a fix's
    hypothesis record that a later fix record settles (names it in `settles`) is left out: the settled
    one says how the corrected boot went."""
    records = store.all()
    hidden = set() if with_settled else settled_hypotheses(records)
    rows = [summary_row(r) for r in records if r.id not in hidden]
    rows = [r for r in rows if kind is None or r["kind"] == kind]
    rows.sort(key=lambda r: (r["kind"] != "plan", r["created_at"] or "", r["id"]))
    return rows


def settled_hypotheses(records: list[StoredRecord[RecordDocument]]) -> set[str]:
    """The ids of hypothesis fix records a settled fix record names."""
    return {r.document.settles for r in records if isinstance(r.document, FixRecord) and r.document.settles}


def show_document(store: RecordStore, record_id: str) -> dict[str, Any]:
    record = store.get(record_id)
    return {"id": record.id, **record.raw}


def newest_boot(store: RecordStore) -> str:
    """The id of the boot record made last (BadInput when the store holds none)."""
    from apron.errors import BadInput

    boots = store.find(BootRecord)
    if not boots:
        raise BadInput(f"no boot records in {store.root}: boot a plan first (apron boot ... --on local)")
    return max(boots, key=lambda r: (r.document.created_at, r.id)).id


def compare_document(store: RecordStore, record_id: str) -> dict[str, Any]:
    """Predicted (the linked plan) beside measured (the boot)."""
    boot = store.get_as(record_id, BootRecord).document
    return compare(store.get_as(boot.plan_id, PlanRecord).document.plan, boot)
