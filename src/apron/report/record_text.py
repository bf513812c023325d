"""`apron records show ID`: one readable view per record kind (the --json form is the document)."""

from __future__ import annotations

from apron.records.documents import BootRecord, FixRecord, PlanRecord, RecordDocument, UnreadRecord
from apron.records.report import render_boot, render_fields, render_fix
from apron.records.store import StoredRecord
from apron.report.card import render_card


def render_record(record: StoredRecord[RecordDocument]) -> str:
    """Plans as the plan card, boots and fixes as their summaries; a kind registered later (probe
    records and any other RecordDocument) as its fields, one a line."""
    document = record.document
    if isinstance(document, PlanRecord):
        return f"plan {record.id}\n\n" + render_card(document.plan)
    if isinstance(document, BootRecord):
        return render_boot(record.id, document)
    if isinstance(document, FixRecord):
        return render_fix(record.id, document)
    if isinstance(document, UnreadRecord):
        return f"{document.kind} {record.id}\n  not read: {document.reason}"
    return render_fields(record.id, record.kind, record.raw)
