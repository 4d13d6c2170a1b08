"""Memory curation: edit one memory, invalidate it into the archive and restore it, clear the
observations derived from it or a bank's observations (docs/behaviour.md#memory-curation).

Every change is one transaction that holds the bank's shared write lock
(``writeclock.hold_bank_write_lock``) and stamps with the clock it returns, as retain does, and
writes a ``MemoryChange`` row per memory it edits or removes: staleness and a refresh's scope
check read those rows, so a page whose scope held the memory reads stale
(docs/behaviour.md#staleness). The embedder runs before the transaction opens. A memory keeps
its id through an edit, an invalidation and a restore.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction

from hindsight.banks.consolidation import consolidation_submit_after_retain
from hindsight.banks.models import (
    InvalidatedMemoryUnit,
    MemoryChange,
    MemoryColumns,
    MemoryUnit,
)
from hindsight.banks.selectors import bank_get
from hindsight.banks.services import (
    EmbeddingUnavailable,
    _vector_value,
    auto_consolidation_enabled,
)
from hindsight.banks.tokens import count_tokens_to_store
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.embeddings import EmbeddingError, get_embedder
from hindsight.infra.errors import BadRequest, NotFound
from hindsight.infra.vocabulary import (
    CURATED_FACT_TYPES,
    FactType,
    MemoryChangeKind,
    MemoryState,
    iso,
)

# The fields an edit may change (``PATCH …/memories/{id}``), as the request names them.
EDITABLE_FIELDS = ("text", "context", "occurred_start", "occurred_end", "mentioned_at",
                   "fact_type", "entities", "tags", "metadata")
# The fields copied between a memory and its archived self.
_ROW_FIELDS = (*MemoryColumns.column_names(), "created_at")


@dataclass(frozen=True)
class CurationResult:
    """What a ``PATCH`` did: which of edit, invalidate, restore (``action``: ``edit``,
    ``invalidate``, ``reason``, ``revert``, several joined by ``+``) and the observations it
    removed."""

    memory_id: str
    actions: tuple[str, ...]
    observations_removed: int


def memory_uuid(memory_id: str) -> UUID:
    try:
        return UUID(str(memory_id))
    except ValueError:
        raise BadRequest(f"Invalid memory_id: '{memory_id}' is not a valid UUID") from None


def _previous(row: MemoryUnit | InvalidatedMemoryUnit) -> dict[str, Any]:
    return {
        "text": row.text, "context": row.context, "tags": list(row.tags),
        "fact_type": row.fact_type, "occurred_start": iso(row.occurred_start),
        "occurred_end": iso(row.occurred_end), "mentioned_at": iso(row.mentioned_at),
        "entities": list(row.entities), "metadata": dict(row.metadata or {}),
        "source_memory_ids": [str(s) for s in row.source_memory_ids],
    }


def memory_change(row: MemoryUnit | InvalidatedMemoryUnit, *, kind: str, stamp: datetime,
                  reason: str | None = None) -> MemoryChange:
    """The change row of ``row`` (unsaved): what the memory is before ``kind`` happens."""
    return MemoryChange(
        bank_id=row.bank_id, memory_id=row.id, document_id=row.document_id, kind=kind,
        tags=list(row.tags), fact_type=row.fact_type, previous=_previous(row), reason=reason,
        changed_at=stamp,
    )


def _embed(text: str) -> list[float]:
    try:
        return get_embedder().embed([text])[0]
    except EmbeddingError as exc:
        raise EmbeddingUnavailable(f"embedding failed: {exc}") from exc


def _curatable(row: MemoryUnit | InvalidatedMemoryUnit, memory_id: str) -> None:
    if row.fact_type not in CURATED_FACT_TYPES:
        raise BadRequest(
            f"Memory '{memory_id}' is a {row.fact_type}; only world/experience facts can be "
            "curated. Observations are derived and regenerate from their sources.")


def _find(bank_id: str, uid: UUID, *, lock: bool = False
          ) -> tuple[MemoryUnit | None, InvalidatedMemoryUnit | None]:
    live_qs = MemoryUnit.objects.filter(bank_id=bank_id, id=uid).defer("search_vector")
    archived_qs = InvalidatedMemoryUnit.objects.filter(bank_id=bank_id, id=uid)
    if lock:
        live_qs, archived_qs = live_qs.select_for_update(), archived_qs.select_for_update()
    live = live_qs.first()
    return live, (None if live is not None else archived_qs.first())


def observations_drop(*, bank_id: str, source_ids: Sequence[UUID] | None, stamp: datetime
                      ) -> int:
    """Delete the observations derived from ``source_ids`` (every observation of the bank when
    None), recording each as a change, and set their other source facts waiting for
    consolidation again, so it builds what they said anew. Inside the caller's transaction,
    which holds the bank's write lock."""
    observations = MemoryUnit.objects.filter(bank_id=bank_id, fact_type=FactType.OBSERVATION)
    if source_ids is not None:
        observations = observations.filter(source_memory_ids__overlap=list(source_ids))
    rows = list(observations.select_for_update().defer("embedding", "search_vector"))
    if not rows:
        return 0
    MemoryChange.objects.bulk_create(
        [memory_change(row, kind=MemoryChangeKind.DELETED, stamp=stamp) for row in rows])
    others = {s for row in rows for s in row.source_memory_ids} - set(source_ids or ())
    MemoryUnit.objects.filter(id__in=[row.id for row in rows]).delete()
    requeue = MemoryUnit.objects.filter(bank_id=bank_id, fact_type__in=CURATED_FACT_TYPES)
    if source_ids is None:
        requeue.update(consolidated_at=None)
    elif others:
        requeue.filter(id__in=others).update(consolidated_at=None)
    return len(rows)


def _consolidate_after(bank_id: str) -> None:
    """In the change's transaction: consolidation takes up the facts set waiting (as after a
    retain: only when the bank consolidates on its own and an LLM is configured)."""
    if auto_consolidation_enabled(bank_id=bank_id):
        consolidation_submit_after_retain(bank_id=bank_id)


def _apply_edit(row: MemoryUnit, edits: Mapping[str, Any], vector: list[float] | None,
                stamp: datetime) -> list[str]:
    fields = ["updated_at", "edited_at"]
    for name in EDITABLE_FIELDS:
        if name in edits:
            setattr(row, name, edits[name])
            fields.append(name)
    if vector is not None:
        row.embedding = _vector_value(vector)
        row.text_tokens = count_tokens_to_store([row.text])[0]
        row.consolidated_at = None
        fields += ["embedding", "text_tokens", "consolidated_at"]
    row.updated_at = row.edited_at = stamp
    return fields


def memory_update(*, bank_id: str, memory_id: str, edits: Mapping[str, Any],
                  state: str | None = None, reason: str | None = None) -> CurationResult:
    """``PATCH …/memories/{id}``: apply ``edits`` (only the fields given; a live memory only)
    and then the ``state`` change: ``invalidated`` moves a live memory to the archive (an
    archived one only has its ``reason`` replaced), ``valid`` moves an archived one back.

    A changed text is embedded again, and the observations derived from the memory are
    deleted and it waits for consolidation again, as after an invalidation. 404 for a memory
    the bank has in neither place; 400 for an observation or an edit of an archived memory.
    """
    bank_get(bank_id=bank_id)
    uid = memory_uuid(memory_id)
    live, archived = _find(bank_id, uid)
    row = live or archived
    if row is None:
        raise NotFound(f"Memory unit '{memory_id}' not found")
    _curatable(row, memory_id)
    if edits and live is None:
        raise BadRequest("Cannot edit an invalidated memory; revert it to 'valid' first.")
    new_text = edits.get("text")
    # The embedder runs before the transaction: the edited text, or the text coming back.
    vector = None
    if live is not None and new_text is not None and new_text != live.text:
        vector = _embed(new_text)
    elif archived is not None and state == MemoryState.VALID:
        vector = _embed(archived.text)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        live, archived = _find(bank_id, uid, lock=True)
        if live is None and archived is None:
            raise NotFound(f"Memory unit '{memory_id}' not found")
        actions: list[str] = []
        removed = 0
        reconsolidate = False
        if edits and live is not None:
            memory_change(live, kind=MemoryChangeKind.EDITED, stamp=stamp).save()
            if vector is not None:
                removed += observations_drop(bank_id=bank_id, source_ids=[uid], stamp=stamp)
                reconsolidate = True
            live.save(update_fields=_apply_edit(live, edits, vector, stamp))
            actions.append("edit")
        elif edits:
            raise BadRequest("Cannot edit an invalidated memory; revert it to 'valid' first.")
        if state == MemoryState.INVALIDATED and live is not None:
            removed += observations_drop(bank_id=bank_id, source_ids=[uid], stamp=stamp)
            _invalidate(live, reason=reason, stamp=stamp)
            actions.append("invalidate")
            reconsolidate = True
        elif state == MemoryState.INVALIDATED and archived is not None and reason is not None:
            archived.invalidation_reason = reason
            archived.save(update_fields=["invalidation_reason"])
            actions.append("reason")
        elif state == MemoryState.VALID and archived is not None:
            _restore(archived, vector=vector, stamp=stamp)
            actions.append("revert")
            reconsolidate = True
        if reconsolidate:
            _consolidate_after(bank_id)
    return CurationResult(memory_id=str(uid), actions=tuple(actions),
                          observations_removed=removed)


def _invalidate(live: MemoryUnit, *, reason: str | None, stamp: datetime) -> None:
    InvalidatedMemoryUnit.objects.create(
        id=live.id, bank_id=live.bank_id, updated_at=live.updated_at,
        invalidation_reason=reason, invalidated_at=stamp,
        **{name: getattr(live, name) for name in _ROW_FIELDS},
    )
    memory_change(live, kind=MemoryChangeKind.INVALIDATED, stamp=stamp, reason=reason).save()
    MemoryUnit.objects.filter(id=live.id).delete()


def _restore(archived: InvalidatedMemoryUnit, *, vector: list[float] | None,
             stamp: datetime) -> None:
    values = {name: getattr(archived, name) for name in _ROW_FIELDS}
    values["consolidated_at"] = None  # consolidated again from scratch
    MemoryUnit.objects.create(
        id=archived.id, bank_id=archived.bank_id, updated_at=stamp,
        embedding=_vector_value(vector) if vector is not None else None,
        text_tokens=count_tokens_to_store([archived.text])[0], **values,
    )
    memory_change(archived, kind=MemoryChangeKind.RESTORED, stamp=stamp).save()
    archived.delete()


def memory_observations_clear(*, bank_id: str, memory_id: str) -> int:
    """``DELETE …/memories/{id}/observations``: delete the observations derived from the
    memory and set it waiting for consolidation again (queued when the bank consolidates on its
    own). The memory itself stays. Returns how many observations were deleted."""
    bank_get(bank_id=bank_id)
    uid = memory_uuid(memory_id)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        if not MemoryUnit.objects.filter(bank_id=bank_id, id=uid).exists():
            raise NotFound(f"Memory unit '{memory_id}' not found")
        deleted = observations_drop(bank_id=bank_id, source_ids=[uid], stamp=stamp)
        MemoryUnit.objects.filter(bank_id=bank_id, id=uid,
                                  fact_type__in=CURATED_FACT_TYPES).update(consolidated_at=None)
        _consolidate_after(bank_id)
    return deleted


def bank_observations_clear(*, bank_id: str) -> int:
    """``DELETE …/observations``: delete every observation of the bank and set its facts
    waiting for consolidation again (nothing is queued: the next consolidation rebuilds them).
    Returns how many observations were deleted."""
    bank_get(bank_id=bank_id)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        return observations_drop(bank_id=bank_id, source_ids=None, stamp=stamp)


def memories_remove(*, bank_id: str, rows: Iterable[MemoryUnit | InvalidatedMemoryUnit],
                    stamp: datetime) -> int:
    """Delete ``rows`` (live or archived), recording each as deleted; the observations derived
    from the live ones go too. Inside the caller's transaction, which holds the bank's write
    lock. Returns how many memories were deleted (observations not counted)."""
    rows = list(rows)
    if not rows:
        return 0
    MemoryChange.objects.bulk_create(
        [memory_change(row, kind=MemoryChangeKind.DELETED, stamp=stamp) for row in rows])
    live_ids = [row.id for row in rows if isinstance(row, MemoryUnit)]
    archived_ids = [row.id for row in rows if isinstance(row, InvalidatedMemoryUnit)]
    if live_ids:
        observations_drop(bank_id=bank_id, source_ids=live_ids, stamp=stamp)
        MemoryUnit.objects.filter(bank_id=bank_id, id__in=live_ids).delete()
    if archived_ids:
        InvalidatedMemoryUnit.objects.filter(bank_id=bank_id, id__in=archived_ids).delete()
    return len(rows)


# A bank emptied: one change per (tags, fact type) it held (what staleness reads), under no
# memory's id.
CLEARED_MEMORY_ID = UUID(int=0)
CLEARED = "the bank's memories were cleared"


def bank_memories_clear(*, bank_id: str, fact_type: str | None = None) -> int:
    """``DELETE …/memories``: delete the bank's memories (of one fact type when given), the
    invalidated ones too, and the observations built on deleted facts; the bank, its config,
    its documents and its mental models stay. Returns how many memories were deleted."""
    bank_get(bank_id=bank_id)
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        live = MemoryUnit.objects.filter(bank_id=bank_id)
        archived = InvalidatedMemoryUnit.objects.filter(bank_id=bank_id)
        if fact_type is not None:
            live, archived = live.filter(fact_type=fact_type), archived.filter(fact_type=fact_type)
        scopes = live.values_list("tags", "fact_type").distinct().order_by()
        MemoryChange.objects.bulk_create([
            MemoryChange(bank_id=bank_id, memory_id=CLEARED_MEMORY_ID, kind=MemoryChangeKind.DELETED,
                         tags=list(tags), fact_type=kind, reason=CLEARED, changed_at=stamp)
            for tags, kind in scopes])
        if fact_type in CURATED_FACT_TYPES:
            ids = list(live.values_list("id", flat=True))
            observations_drop(bank_id=bank_id, source_ids=ids, stamp=stamp)
        deleted, _ = live.delete()
        archived.delete()
    return deleted
