"""Reads of the banks app: banks, their config and stats, the memory listing.

Recall lives in ``hindsight.banks.recall``, the tag registry in ``hindsight.banks.tags``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Q, Subquery

from hindsight.banks import bankconfig
from hindsight.banks.budget import bank_spend
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.operation_types import BankOperationType
from hindsight.infra.errors import NotFound
from hindsight.infra.tagscope import TagScope, scope_sql
from hindsight.infra.vocabulary import EXTRACTED_FACT_TYPES, FactType
from operations.models import COMPLETED, FAILED, PENDING, PROCESSING, Operation
from operations.selectors import operation_counts


def bank_get(*, bank_id: str) -> Bank:
    bank = Bank.objects.filter(id=bank_id).first()
    if bank is None:
        raise NotFound(f"Bank '{bank_id}' not found")
    return bank


def bank_exists(*, bank_id: str) -> bool:
    return Bank.objects.filter(id=bank_id).exists()


def bank_last_memory_write_at(*, bank_id: str) -> datetime | None:
    """``MAX(updated_at)`` of the bank's memories: exact, through the (bank, updated_at) index."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT updated_at FROM banks_memoryunit WHERE bank_id = %s "
            "ORDER BY updated_at DESC LIMIT 1",
            [bank_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def bank_last_memory_write_subquery(*, bank_id: str) -> Subquery:
    """``bank_last_memory_write_at`` as a subquery, for a statement that reads it beside its own
    rows (the same backward probe of the (bank, updated_at) index)."""
    newest = MemoryUnit.objects.filter(bank_id=bank_id).order_by("-updated_at")
    return Subquery(newest.values("updated_at")[:1])


def bank_last_memory_write_at_many(*, bank_ids: Iterable[str]) -> dict[str, datetime | None]:
    """``bank_last_memory_write_at`` of many banks in one query (one index probe per bank)."""
    ids = sorted(set(bank_ids))
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.id, (SELECT m.updated_at FROM banks_memoryunit m WHERE m.bank_id = b.id "
            "ORDER BY m.updated_at DESC LIMIT 1) FROM unnest(%s::text[]) AS b(id)",
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
MEMORY_STATES = ("valid", "invalidated")


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

    Filters this service has no data for select nothing rather than being ignored: no memory is
    ever invalidated (``state=invalidated``), and entities are kept as text, not as linked entity rows
    (``entity_id``).
    """
    bank_get(bank_id=bank_id)
    qs = MemoryUnit.objects.filter(bank_id=bank_id).defer("embedding", "search_vector")
    if state == "invalidated" or entity_id:
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
        where, params = scope_sql(scope, alias="banks_memoryunit")
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
