"""Reads of the banks app: banks, their config and stats, the memory listing.

Recall lives in ``hindsight.banks.recall``, the tag registry in ``hindsight.banks.tags``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, F, Max, Min, Q, Subquery
from django.db.models.functions import Greatest

from hindsight.banks import bankconfig
from hindsight.banks.budget import bank_spend
from hindsight.banks.documentrows import REPLACED
from hindsight.banks.models import (
    Bank,
    Document,
    InvalidatedMemoryUnit,
    MemoryChange,
    MemoryUnit,
)
from hindsight.banks.operation_types import BankOperationType
from hindsight.infra.errors import NotFound
from hindsight.infra.tagscope import TagScope, includes_untagged, scope_sql
from hindsight.infra.vocabulary import (
    EXTRACTED_FACT_TYPES,
    FactType,
    MemoryChangeKind,
    MemoryState,
    iso,
)
from operations.models import COMPLETED, FAILED, PENDING, PROCESSING, Operation
from operations.selectors import operation_counts


def bank_get(*, bank_id: str) -> Bank:
    bank = Bank.objects.filter(id=bank_id).first()
    if bank is None:
        raise NotFound(f"Bank '{bank_id}' not found")
    return bank


def bank_exists(*, bank_id: str) -> bool:
    return Bank.objects.filter(id=bank_id).exists()


# The newest memory write of a bank ``b``: a memory's ``updated_at``, or a curation change's
# ``changed_at`` (an edit, invalidation, restore or deletion; docs/behaviour.md#staleness),
# each through its (bank, stamp) index backwards.
_LAST_WRITE_SQL = (
    "GREATEST((SELECT m.updated_at FROM banks_memoryunit m WHERE m.bank_id = {bank} "
    "ORDER BY m.updated_at DESC LIMIT 1), (SELECT c.changed_at FROM banks_memorychange c "
    "WHERE c.bank_id = {bank} ORDER BY c.changed_at DESC LIMIT 1))"
)


def bank_last_memory_write_at(*, bank_id: str) -> datetime | None:
    """The bank's last memory write, exact: the newest ``updated_at`` of its memories or
    ``changed_at`` of its curation changes, whichever is later."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_LAST_WRITE_SQL.format(bank='%s')}", [bank_id, bank_id])
        row = cursor.fetchone()
    return row[0] if row else None


def bank_last_memory_write_subquery(*, bank_id: str) -> Greatest:
    """``bank_last_memory_write_at`` as an expression, for a statement that reads it beside its
    own rows (the same backward probes of the two (bank, stamp) indexes)."""
    newest = MemoryUnit.objects.filter(bank_id=bank_id).order_by("-updated_at")
    changed = MemoryChange.objects.filter(bank_id=bank_id).order_by("-changed_at")
    return Greatest(Subquery(newest.values("updated_at")[:1]),
                    Subquery(changed.values("changed_at")[:1]))


def bank_last_memory_write_at_many(*, bank_ids: Iterable[str]) -> dict[str, datetime | None]:
    """``bank_last_memory_write_at`` of many banks in one query (two index probes per bank)."""
    ids = sorted(set(bank_ids))
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT b.id, {_LAST_WRITE_SQL.format(bank='b.id')} FROM unnest(%s::text[]) AS b(id)",
            [ids],
        )
        return {row[0]: row[1] for row in cursor.fetchall()}


def bank_list(*, q: str | None = None, limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    banks = Bank.objects.all()
    if q:
        banks = banks.filter(Q(id__icontains=q) | Q(name__icontains=q))
    total = banks.count()
    page = list(
        banks.order_by("id")
        .annotate(
            fact_count=Count("memories", filter=~Q(memories__fact_type=FactType.OBSERVATION)),
            last_write_at=Max("memories__updated_at"),
            last_document_at=Max("memories__created_at", filter=Q(memories__document_id__isnull=False)),
        )[offset: offset + limit]
    )
    return [
        {"bank": b, "fact_count": b.fact_count, "last_write_at": b.last_write_at,
         "last_document_at": b.last_document_at}
        for b in page
    ], total


DISPOSITION_TRAITS = ("skepticism", "literalism", "empathy")


def bank_disposition(*, bank: Bank) -> dict[str, int]:
    """The bank's disposition: its ``disposition_*`` config overrides, else what the bank row
    holds (rows written before the config became the disposition's home), else 3."""
    config = bank.config or {}
    legacy = bank.disposition or {}
    return {
        trait: config.get(f"disposition_{trait}", legacy.get(trait, 3))
        for trait in DISPOSITION_TRAITS
    }


def bank_mission(*, bank: Bank) -> str:
    """The bank's mission: its ``reflect_mission`` override, else what the bank row holds."""
    override = (bank.config or {}).get("reflect_mission")
    return override if override is not None else bank.mission or ""


def bank_config_resolved(*, bank: Bank) -> dict[str, Any]:
    """The bank's config: the defaults, then its overrides, its disposition and mission."""
    config = bankconfig.resolved(dict(bank.config or {}))
    config.update({f"disposition_{t}": v for t, v in bank_disposition(bank=bank).items()})
    config["reflect_mission"] = bank_mission(bank=bank) or None
    return config


def bank_stats(*, bank_id: str) -> dict[str, Any]:
    """Upstream's ``BankStatsResponse``; computed on every call (never cached)."""
    bank_get(bank_id=bank_id)
    memories = MemoryUnit.objects.filter(bank_id=bank_id)
    by_type = {
        row["fact_type"]: row["n"]
        for row in memories.values("fact_type").annotate(n=Count("id")).order_by()
    }
    given_up_at = consolidation_failed_at(bank_id=bank_id)
    waiting = Q(consolidated_at__isnull=True, fact_type__in=EXTRACTED_FACT_TYPES)
    failed = waiting & Q(created_at__lte=given_up_at) if given_up_at else Q(pk__in=[])
    aggregates = memories.aggregate(
        documents=Count("document_id", distinct=True),
        last_consolidated_at=Max("consolidated_at"),
        pending_consolidation=Count("id", filter=waiting),
        failed_consolidation=Count("id", filter=failed),
    )
    operations_by_status = operation_counts(bank_id=bank_id)
    spend = bank_spend(bank_id=bank_id)
    return {
        "bank_id": bank_id,
        "total_nodes": sum(by_type.values()),
        "total_links": 0,
        "total_documents": aggregates["documents"],
        "nodes_by_fact_type": by_type,
        "links_by_link_type": {},
        "links_by_fact_type": {},
        "links_breakdown": {},
        "pending_operations": operations_by_status.get(PENDING, 0)
        + operations_by_status.get(PROCESSING, 0),
        "failed_operations": operations_by_status.get(FAILED, 0),
        "operations_by_status": operations_by_status,
        "last_consolidated_at": aggregates["last_consolidated_at"],
        "last_memory_write_at": bank_last_memory_write_at(bank_id=bank_id),
        "pending_consolidation": aggregates["pending_consolidation"]
        - aggregates["failed_consolidation"],
        "failed_consolidation": aggregates["failed_consolidation"],
        "total_observations": by_type.get(FactType.OBSERVATION, 0),
        "llm_tokens_last_24h": spend.spent,
        "llm_token_budget_per_day": spend.budget,
    }


def consolidation_failed_at(*, bank_id: str) -> datetime | None:
    """When the bank's consolidation last failed for good, if no consolidation has completed
    since: the facts that were waiting then are the ones it gave up on (upstream's
    ``failed_consolidation``); the next consolidation (a retain, ``POST …/consolidate``) takes
    them up again."""
    last = (
        Operation.objects.filter(bank_id=bank_id, operation_type=BankOperationType.CONSOLIDATION,
                                 status__in=(COMPLETED, FAILED))
        .order_by("-completed_at", "-id")
        .values_list("status", "completed_at")
        .first()
    )
    return last[1] if last is not None and last[0] == FAILED else None


# --- memory listing ----------------------------------------------------------------------------

TIME_FIELDS = ("created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end")
CONSOLIDATION_STATES = ("pending", "done", "failed")


def memories_list(
    *,
    bank_id: str,
    fact_type: str | None = None,
    q: str | None = None,
    document_id: str | None = None,
    scope: TagScope | None = None,
    consolidation_state: str | None = None,
    state: str | None = None,
    entity_id: str | None = None,
    time_field: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[MemoryUnit], int]:
    """A page of the bank's memories, newest first, and the total the filters select.

    ``state=invalidated`` reads the curation archive instead of the live memories
    (docs/behaviour.md#memory-curation). A filter this service has no data for selects nothing
    rather than being ignored: entities are kept as text, not as linked entity rows
    (``entity_id``).
    """
    bank_get(bank_id=bank_id)
    qs: Any
    if state == MemoryState.INVALIDATED:
        qs = InvalidatedMemoryUnit.objects.filter(bank_id=bank_id)
        table = InvalidatedMemoryUnit._meta.db_table
    else:
        qs = MemoryUnit.objects.filter(bank_id=bank_id).defer("embedding", "search_vector")
        table = MemoryUnit._meta.db_table
    if entity_id:
        qs = qs.none()
    if fact_type:
        qs = qs.filter(fact_type=fact_type)
    if q:
        qs = qs.filter(Q(text__icontains=q) | Q(context__icontains=q))
    if document_id:
        qs = qs.filter(document_id=document_id)
    if consolidation_state == "pending":
        qs = qs.filter(consolidated_at__isnull=True)
    elif consolidation_state == "done":
        qs = qs.filter(consolidated_at__isnull=False)
    elif consolidation_state == "failed":
        given_up_at = consolidation_failed_at(bank_id=bank_id)
        qs = (qs.filter(consolidated_at__isnull=True, fact_type__in=EXTRACTED_FACT_TYPES,
                        created_at__lte=given_up_at) if given_up_at else qs.none())
    if scope is not None:
        where, params = scope_sql(scope, alias=table)
        if where != "TRUE":
            qs = qs.extra(where=[where], params=params)
    order_field = time_field or ("created_at" if (start or end) else None)
    if order_field:
        qs = qs.filter(**{f"{order_field}__isnull": False})
        if start:
            qs = qs.filter(**{f"{order_field}__gte": start})
        if end:
            qs = qs.filter(**{f"{order_field}__lt": end})
    total = qs.count()
    order = order_field or "created_at"
    page = list(qs.order_by(f"-{order}", "-id")[offset: offset + limit])
    return page, total


# --- one memory: its detail and its history ----------------------------------------------------


def memory_get(*, bank_id: str, memory_id: Any) -> MemoryUnit | InvalidatedMemoryUnit | None:
    """The memory, live or in the curation archive (an ``InvalidatedMemoryUnit``); None when the
    bank has it in neither place."""
    live = (MemoryUnit.objects.filter(bank_id=bank_id, id=memory_id)
            .defer("embedding", "search_vector").first())
    if live is not None:
        return live
    return InvalidatedMemoryUnit.objects.filter(bank_id=bank_id, id=memory_id).first()


def memory_sources(*, bank_id: str, memory: MemoryUnit | InvalidatedMemoryUnit
                   ) -> list[MemoryUnit]:
    """The live memories an observation was built from, the most recently mentioned first."""
    if memory.fact_type != FactType.OBSERVATION or not memory.source_memory_ids:
        return []
    return list(MemoryUnit.objects.filter(bank_id=bank_id, id__in=memory.source_memory_ids)
                .defer("embedding", "search_vector")
                .order_by(F("mentioned_at").desc(nulls_last=True), "id"))


def memory_changes(*, bank_id: str, memory_id: Any) -> list[MemoryChange]:
    """The curation changes of one memory, oldest first."""
    return list(MemoryChange.objects.filter(bank_id=bank_id, memory_id=memory_id)
                .order_by("changed_at", "id"))


# --- documents (docs/behaviour.md#documents) ---------------------------------------------------

DOCUMENT_TIME_FIELDS = ("created_at", "updated_at")


def documents_list(*, bank_id: str, q: str | None = None, tags: list[str] | None = None,
                   tags_match: str = "any_strict", time_field: str | None = None,
                   start: datetime | None = None, end: datetime | None = None,
                   limit: int = 100, offset: int = 0) -> tuple[list[Document], int]:
    """A page of the bank's documents, the last written first, each with ``memory_unit_count``
    (its facts), and the total the filters select. ``q``: a substring of the id or the text.

    A document only memories name (a bank transfer brings no document rows) is listed too,
    untagged and without a text, its times its memories' (``document_get`` reads it so)."""
    bank_get(bank_id=bank_id)
    order = time_field or "updated_at"
    if order not in DOCUMENT_TIME_FIELDS:
        raise ValueError(f"time_field must be one of {DOCUMENT_TIME_FIELDS}")
    rows_where = ["d.bank_id = %s"]
    rows_params: list[Any] = [bank_id]
    named_where = ["m.bank_id = %s", "m.document_id IS NOT NULL"]
    named_params: list[Any] = [bank_id]
    if q:
        pattern = f"%{_like(q)}%"
        rows_where.append("(d.document_id ILIKE %s OR array_to_string(d.chunks, ' ') ILIKE %s)")
        rows_params += [pattern, pattern]
        named_where.append("m.document_id ILIKE %s")
        named_params.append(pattern)
    untagged = True
    if tags or tags_match == "exact":
        scope = TagScope(tags=tuple(tags or ()), tags_match=tags_match)
        where, where_params = scope_sql(scope, alias="d")
        rows_where.append(where)
        rows_params += where_params
        untagged = includes_untagged(scope)
    window: list[str] = []
    window_params: list[Any] = []
    if start:
        window.append(f"{order} >= %s")
        window_params.append(start)
    if end:
        window.append(f"{order} < %s")
        window_params.append(end)
    branches = [f"SELECT d.document_id, d.created_at, d.updated_at FROM banks_document d "
                f"WHERE {' AND '.join(rows_where)}"]
    params: list[Any] = [*rows_params]
    if untagged:
        branches.append(
            "SELECT m.document_id, min(m.created_at), max(m.updated_at) FROM banks_memoryunit m "
            f"WHERE {' AND '.join(named_where)} AND NOT EXISTS (SELECT 1 FROM banks_document d "
            "WHERE d.bank_id = m.bank_id AND d.document_id = m.document_id) "
            "GROUP BY m.document_id")
        params += named_params
    sql = (f"SELECT document_id, created_at, updated_at, count(*) OVER () FROM "
           f"({' UNION ALL '.join(branches)}) AS u (document_id, created_at, updated_at)"
           f"{' WHERE ' + ' AND '.join(window) if window else ''} "
           f"ORDER BY {order} DESC, document_id DESC LIMIT %s OFFSET %s")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *window_params, limit, offset])
        listed = cursor.fetchall()
    total = listed[0][3] if listed else (
        0 if offset == 0 else documents_list(bank_id=bank_id, q=q, tags=tags,
                                             tags_match=tags_match, time_field=time_field,
                                             start=start, end=end, limit=1, offset=0)[1])
    rows = {d.document_id: d for d in Document.objects.filter(
        bank_id=bank_id, document_id__in=[r[0] for r in listed])}
    page = [rows.get(doc) or Document(bank_id=bank_id, document_id=doc, created_at=created,
                                      updated_at=updated)
            for doc, created, updated, _ in listed]
    counts = _document_fact_counts(bank_id, [d.document_id for d in page])
    for document in page:
        document.memory_unit_count = sum(counts.get(document.document_id, {}).values())
    return page, total


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _document_fact_counts(bank_id: str, document_ids: list[str]) -> dict[str, dict[str, int]]:
    """Per document, its live memories per fact type."""
    counts: dict[str, dict[str, int]] = {}
    rows = (MemoryUnit.objects.filter(bank_id=bank_id, document_id__in=document_ids)
            .values("document_id", "fact_type").annotate(n=Count("id")).order_by())
    for row in rows:
        counts.setdefault(str(row["document_id"]), {})[row["fact_type"]] = row["n"]
    return counts


def document_get(*, bank_id: str, document_id: str) -> Document:
    """The document with ``nodes_by_fact_type`` and ``memory_unit_count``; a document only
    memories name (retained before documents were kept, or brought by a transfer) reads as one
    without text. 404 when nothing names it."""
    bank_get(bank_id=bank_id)
    document = Document.objects.filter(bank_id=bank_id, document_id=document_id).first()
    counts = _document_fact_counts(bank_id, [document_id]).get(document_id, {})
    if document is None:
        named = MemoryUnit.objects.filter(bank_id=bank_id, document_id=document_id)
        span = named.aggregate(first=Min("created_at"), last=Max("updated_at"))
        if span["first"] is None and not InvalidatedMemoryUnit.objects.filter(
                bank_id=bank_id, document_id=document_id).exists():
            raise NotFound("Document not found")
        document = Document(bank_id=bank_id, document_id=document_id,
                            created_at=span["first"], updated_at=span["last"])
    document.nodes_by_fact_type = counts
    document.memory_unit_count = sum(counts.values())
    return document


def document_history(*, bank_id: str, document_id: str) -> list[dict[str, Any]]:
    """The document's events, newest first: each retain, append, re-tag and reprocess it
    recorded, and each curation change of one of its facts."""
    document = document_get(bank_id=bank_id, document_id=document_id)
    events: list[dict[str, Any]] = [dict(e) for e in (document.events or [])]
    changes = MemoryChange.objects.filter(bank_id=bank_id, document_id=document_id).exclude(
        reason=REPLACED)
    for change in changes.order_by("changed_at", "id"):
        events.append({"kind": change.kind, "created_at": iso(change.changed_at),
                       "fact_id": str(change.memory_id),
                       "facts_removed": int(change.kind == MemoryChangeKind.DELETED)})
    events.sort(key=lambda e: e.get("created_at") or "", reverse=True)
    return events
