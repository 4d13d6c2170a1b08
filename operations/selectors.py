"""Reads of operations: one, a filtered page, counts per status (bank stats) and the queue's
gauges (``/metrics``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count

from operations.models import STATUSES, Operation


def operation_get(*, bank_id: str, operation_id: uuid.UUID | str) -> Operation | None:
    """The bank's operation, or None (another bank's operation is unknown here)."""
    return Operation.objects.filter(bank_id=bank_id, id=operation_id).first()


def operations_bank_exists(*, bank_id: str) -> bool:
    """Whether the bank operations are scoped to exists (the row ``Operation.bank`` refers to).

    The engine knows banks only as its foreign key's target, never the banks app itself.
    """
    bank_model = Operation._meta.get_field("bank").related_model
    return bank_model._default_manager.filter(pk=bank_id).exists()


def operations_list(
    *,
    bank_id: str,
    status: str | None = None,
    operation_type: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[int, list[Operation]]:
    """``(total, page)``, most recent first."""
    qs = Operation.objects.filter(bank_id=bank_id)
    if status:
        qs = qs.filter(status=status)
    if operation_type:
        qs = qs.filter(operation_type=operation_type)
    total = qs.count()
    page = list(qs.order_by("-created_at", "-id")[offset : offset + limit])
    return total, page


def operation_counts(*, bank_id: str) -> dict[str, int]:
    """Operations of the bank per status; every status present (0 when none)."""
    counts = dict.fromkeys(STATUSES, 0)
    rows = (
        Operation.objects.filter(bank_id=bank_id)
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    for status, n in rows:
        counts[status] = n
    return counts


@dataclass(frozen=True)
class QueueGauges:
    """The queue as a scrape sees it (database time)."""

    # (status, operation_type) → count, for the statuses still in the queue.
    depth: dict[tuple[str, str], int]
    # operation_type → pending operations parked until a future ``next_retry_at``.
    parked: dict[str, int]
    # Seconds since the oldest due (not parked) pending operation was created; 0 when none.
    oldest_pending_age_seconds: float


_QUEUE_GAUGES_SQL = """
SELECT status, operation_type, COUNT(*),
       COUNT(*) FILTER (WHERE status = 'pending' AND next_retry_at > clock_timestamp()),
       EXTRACT(EPOCH FROM clock_timestamp() - MIN(created_at) FILTER (
           WHERE status = 'pending'
             AND (next_retry_at IS NULL OR next_retry_at <= clock_timestamp())))
  FROM operations_operation
 WHERE status IN ('pending', 'processing')
 GROUP BY status, operation_type
"""


def operations_queue_gauges() -> QueueGauges:
    """Queue depth by status and type, parked operations, the oldest due pending's age: one
    query over the operations still queued (completed ones are not read)."""
    depth: dict[tuple[str, str], int] = {}
    parked: dict[str, int] = {}
    oldest = 0.0
    with connection.cursor() as cursor:
        cursor.execute(_QUEUE_GAUGES_SQL)
        for status, operation_type, count, parked_count, age in cursor.fetchall():
            depth[(status, operation_type)] = int(count)
            if parked_count:
                parked[operation_type] = parked.get(operation_type, 0) + int(parked_count)
            if age is not None:
                oldest = max(oldest, float(age))
    return QueueGauges(depth=depth, parked=parked, oldest_pending_age_seconds=oldest)
