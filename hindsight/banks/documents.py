"""Documents: what a retain with a ``document_id`` wrote, kept as a ``Document`` row beside its
memories; its update (tags), deletion (its memories with it) and reprocessing
(docs/behaviour.md#documents).

A retain records its documents in its own transaction (``hindsight.banks.documentrows``). Every
memory a document change removes or re-tags is recorded as a ``MemoryChange``
(``hindsight.banks.curation``), so the pages whose scope held it read stale.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from hindsight.banks.curation import memories_remove, memory_change, observations_drop
from hindsight.banks.documentrows import append_event, document_event
from hindsight.banks.models import Document, InvalidatedMemoryUnit, MemoryChange, MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.selectors import bank_get
from hindsight.banks.services import retain_submit_async
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.errors import NotFound
from hindsight.infra.vocabulary import FactType, MemoryChangeKind


def _document_or_404(bank_id: str, document_id: str, *, lock: bool = False) -> Document | None:
    """The document's row; None when only memories name it (retained before documents were
    kept, or brought by a bank transfer); 404 when nothing does."""
    qs = Document.objects.filter(bank_id=bank_id, document_id=document_id)
    document = (qs.select_for_update() if lock else qs).first()
    if document is None and not (
            MemoryUnit.objects.filter(bank_id=bank_id, document_id=document_id).exists()
            or InvalidatedMemoryUnit.objects.filter(bank_id=bank_id,
                                                    document_id=document_id).exists()):
        raise NotFound("Document not found")
    return document


def document_delete(*, bank_id: str, document_id: str) -> int:
    """``DELETE …/documents/{id}``: the document and its memories (live and invalidated), and
    the observations built on them; each memory recorded as deleted. Returns how many
    memories went."""
    bank_get(bank_id=bank_id)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        document = _document_or_404(bank_id, document_id, lock=True)
        live = MemoryUnit.objects.filter(bank_id=bank_id, document_id=document_id).exclude(
            fact_type=FactType.OBSERVATION).defer("embedding", "search_vector")
        archived = InvalidatedMemoryUnit.objects.filter(bank_id=bank_id, document_id=document_id)
        deleted = memories_remove(bank_id=bank_id, rows=[*live.select_for_update(),
                                                         *archived.select_for_update()],
                                  stamp=stamp)
        if document is not None:
            document.delete()
    return deleted


def document_update(*, bank_id: str, document_id: str, tags: list[str] | None,
                    observation_scopes: Any = None) -> None:
    """``PATCH …/documents/{id}``: new ``tags`` go to the document and to every memory of it
    (each recorded as edited; the observations built on them are deleted and their sources wait
    for consolidation again, as a re-tag moves them to another scope). Only when the tag set
    changes. ``observation_scopes`` is kept in the retain parameters."""
    bank_get(bank_id=bank_id)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        document = _document_or_404(bank_id, document_id, lock=True)
        if document is None:
            document = Document(bank_id=bank_id, document_id=document_id, created_at=stamp)
        changed = tags is not None and list(tags) != list(document.tags)
        if changed:
            assert tags is not None
            rows = list(MemoryUnit.objects.select_for_update()
                        .filter(bank_id=bank_id, document_id=document_id)
                        .exclude(fact_type=FactType.OBSERVATION)
                        .defer("embedding", "search_vector"))
            MemoryChange.objects.bulk_create(
                [memory_change(row, kind=MemoryChangeKind.EDITED, stamp=stamp) for row in rows])
            observations_drop(bank_id=bank_id, source_ids=[row.id for row in rows], stamp=stamp)
            MemoryUnit.objects.filter(id__in=[row.id for row in rows]).update(
                tags=list(tags), updated_at=stamp, consolidated_at=None)
            document.tags = list(tags)
            append_event(document, document_event("retag", stamp))
        if observation_scopes is not None:
            document.retain_params = {**(document.retain_params or {}),
                                      "observation_scopes": observation_scopes}
        document.updated_at = stamp
        document.save()


def document_reprocess(*, bank_id: str, document_id: str) -> tuple[str, int]:
    """``POST …/documents/{id}/reprocess``: retain the document's text again with the
    parameters it was retained with, as an async retain that replaces its memories. Returns the
    operation id and the number of items. 404 without a kept text."""
    bank_get(bank_id=bank_id)
    document = Document.objects.filter(bank_id=bank_id, document_id=document_id).first()
    if document is None or not document.chunks:
        raise NotFound("Document not found")
    params = document.retain_params or {}
    items = [
        RetainItem(content=chunk, context=params.get("context") or "",
                   tags=list(params.get("tags") or []), timestamp=params.get("timestamp"),
                   metadata=dict(params.get("metadata") or {}), document_id=document_id,
                   entities=list(params.get("entities") or []), strategy=params.get("strategy"),
                   update_mode="replace" if index == 0 else "append")
        for index, chunk in enumerate(document.chunks)
    ]
    queued = retain_submit_async(bank_id=bank_id, items=items)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        row = Document.objects.select_for_update().filter(pk=document.pk).first()
        if row is not None:  # the history names the reprocess (its retain follows)
            append_event(row, document_event("reprocess", stamp,
                                             operation_id=queued.operation_id))
            row.save(update_fields=["events"])
    return queued.operation_id, len(items)
