"""A retain's documents (docs/behaviour.md#documents): the ``Document`` row each retain item
with a ``document_id`` writes, and the facts a re-sent document replaces, both in the retain's
transaction (``hindsight.banks.services.memories_retain``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Q

from hindsight.banks.models import Document, MemoryChange, MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.infra.vocabulary import FactType, MemoryChangeKind, iso

# The reason a retain's replaced facts are recorded with (their document's history shows the
# retain that replaced them, not each fact).
REPLACED = "replaced by a retain of its document"
# How many events a document keeps (the oldest go first).
EVENTS_KEPT = 200


def document_event(kind: str, stamp: datetime, **counts: Any) -> dict[str, Any]:
    return {"kind": kind, "created_at": iso(stamp), **counts}


def append_event(document: Document, event: dict[str, Any]) -> None:
    document.events = [*(document.events or []), event][-EVENTS_KEPT:]


def document_memories_replace(*, bank_id: str, document_ids: Sequence[str],
                              stamp: datetime) -> dict[str, int]:
    """A retain's ``update_mode: replace``: delete the facts the documents stored before
    (observations are kept: consolidation owns them), each recorded as deleted. Inside the
    retain's transaction. Returns how many were deleted, per document."""
    rows = list(MemoryUnit.objects.filter(
        Q(bank_id=bank_id) & Q(document_id__in=list(document_ids))
        & ~Q(fact_type=FactType.OBSERVATION)).defer("embedding", "search_vector"))
    if not rows:
        return {}
    MemoryChange.objects.bulk_create([
        MemoryChange(bank_id=bank_id, memory_id=row.id, document_id=row.document_id,
                     kind=MemoryChangeKind.DELETED, tags=list(row.tags),
                     fact_type=row.fact_type, previous={"text": row.text}, reason=REPLACED,
                     changed_at=stamp)
        for row in rows])
    MemoryUnit.objects.filter(id__in=[row.id for row in rows]).delete()
    removed: dict[str, int] = {}
    for row in rows:
        removed[str(row.document_id)] = removed.get(str(row.document_id), 0) + 1
    return removed


def documents_record(*, bank_id: str, items: Sequence[RetainItem], added: dict[str, int],
                     removed: dict[str, int], stamp: datetime,
                     operation_id: str | None = None) -> None:
    """Write the ``Document`` row of every document ``items`` name, in the retain's
    transaction: ``replace`` (the default) starts the document over with the item's text,
    ``append`` adds it as one more chunk; a document sent by several items of one retain is
    their chunks in order. ``added`` / ``removed``: facts per document, for its history."""
    seen: dict[str, Document] = {}
    for item in items:
        doc_id = item.document_id
        if not doc_id:
            continue
        document = seen.get(doc_id)
        if document is None:
            document = (Document.objects.select_for_update()
                        .filter(bank_id=bank_id, document_id=doc_id).first())
            appending = item.update_mode == "append" and document is not None
            if document is None:
                document = Document(bank_id=bank_id, document_id=doc_id, created_at=stamp)
            if not appending:  # the document starts over: its text, tags and metadata
                document.chunks, document.tags, document.metadata = [], [], {}
            append_event(document, document_event(
                "append" if appending else "retain", stamp, operation_id=operation_id,
                facts_added=added.get(doc_id, 0), facts_removed=removed.get(doc_id, 0)))
            seen[doc_id] = document
        document.chunks = [*document.chunks, item.content]
        document.tags = list(dict.fromkeys([*document.tags, *item.tags]))
        document.metadata = {**(document.metadata or {}), **item.metadata}
        document.retain_params = {
            key: value for key, value in (
                ("context", item.context or None), ("timestamp", item.timestamp),
                ("strategy", item.strategy), ("tags", list(item.tags) or None),
                ("metadata", dict(item.metadata) or None),
                ("entities", list(item.entities) or None),
            ) if value is not None
        }
    for document in seen.values():
        document.content_hash = hashlib.sha256(document.original_text.encode()).hexdigest()
        document.updated_at = stamp
        document.save()


# --- chunk ids: upstream's (bank, document, index) joined by "_", each "_" and "~" inside a
# part escaped ("~5F", "~7E"), so every id splits back into exactly one triple.

_ESCAPES = {"~": "~7E", "_": "~5F"}


def _escape(part: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in part)


def _unescape(part: str) -> str:
    return part.replace("~5F", "_").replace("~7E", "~")


def chunk_id(bank_id: str, document_id: str, index: int) -> str:
    return f"{_escape(bank_id)}_{_escape(document_id)}_{index}"


def chunk_id_parse(value: str) -> tuple[str, str, int] | None:
    """``(bank_id, document_id, index)``, or None for a string that is no chunk id."""
    parts = value.split("_")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return _unescape(parts[0]), _unescape(parts[1]), int(parts[2])
