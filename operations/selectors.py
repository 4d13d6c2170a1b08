"""Reads of operations: one, a filtered page, and counts per status (bank stats) — each as a
client should see it.

An operation whose work another operation carries (``result_metadata.superseded_by``: a failed
or lost attempt merged into the follower queued behind it, a retry folded into the pending one)
reports the status of that work, not of its own closed row: ``pending``/``processing`` while the
carrier is queued or runs, ``completed`` when it completed, ``failed``/``cancelled`` only when
the carrier ended so. A chain (the carrier was merged on in turn) resolves to its end; a carrier
that was deleted leaves the last one still there. This module is the one place that resolves
it (one recursive query per read, bounded depth).

The queue's gauges for ``/metrics`` are read here too (``operations_queue_gauges``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection

from operations.models import STATUSES, SUPERSEDED_BY, Operation


@dataclass(frozen=True)
class OperationReport:
    """An operation as a client reads it: its own row and the row whose state it reports."""

    operation: Operation
    # Itself, unless its work moved to another operation (the end of the chain).
    carrier: Operation

    @property
    def carried(self) -> bool:
        return self.carrier.id != self.operation.id

    @property
    def superseded_by(self) -> str | None:
        """The operation it was merged into, as recorded (the chain's first hop)."""
        value = (self.operation.result_metadata or {}).get(SUPERSEDED_BY)
        return value if isinstance(value, str) else None

    @property
    def status(self) -> str:
        return self.carrier.status


_MAX_CHAIN = 32


def _ref(alias: str) -> str:
    # The recorded carrier id as a uuid; anything else a handler may have put there is ignored.
    value = f"{alias}.result_metadata->>'{SUPERSEDED_BY}'"
    return (f"(CASE WHEN {value} ~* '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-"
            f"[0-9a-f]{{12}}$' THEN ({value})::uuid END)")


# ``ends``: for every superseded operation of the bank (or only ``origin``), the last operation
# of its chain that still exists. Parameters: bank, origin (uuid or NULL).
_ENDS_CTE = f"""
WITH RECURSIVE walk(origin, next_id, depth) AS (
    SELECT o.id, {_ref("o")}, 1
      FROM operations_operation o
     WHERE o.bank_id = %(bank)s AND {_ref("o")} IS NOT NULL
       AND (%(origin)s::uuid IS NULL OR o.id = %(origin)s::uuid)
  UNION ALL
    SELECT w.origin, {_ref("n")}, w.depth + 1
      FROM walk w JOIN operations_operation n ON n.id = w.next_id AND n.bank_id = %(bank)s
     WHERE {_ref("n")} IS NOT NULL AND w.depth < {_MAX_CHAIN}
), ends AS (
    SELECT DISTINCT ON (w.origin) w.origin, c.id AS carrier_id, c.status AS carrier_status
      FROM walk w JOIN operations_operation c ON c.id = w.next_id AND c.bank_id = %(bank)s
     ORDER BY w.origin, w.depth DESC
)
"""


def _carrier_ids(*, bank_id: str, origin: uuid.UUID | None = None) -> dict[uuid.UUID, uuid.UUID]:
    with connection.cursor() as cursor:
        cursor.execute(_ENDS_CTE + "SELECT origin, carrier_id FROM ends",
                       {"bank": bank_id, "origin": origin})
        return {row[0]: row[1] for row in cursor.fetchall()}


def _reports(page: list[Operation], carriers: dict[uuid.UUID, uuid.UUID]) -> list[OperationReport]:
    wanted = {carriers[op.id] for op in page if op.id in carriers}
    rows = Operation.objects.in_bulk(list(wanted)) if wanted else {}
    return [OperationReport(op, rows.get(carriers.get(op.id), op)) for op in page]


def operation_get(*, bank_id: str, operation_id: uuid.UUID | str) -> Operation | None:
    """The bank's operation row, or None (another bank's operation is unknown here)."""
    return Operation.objects.filter(bank_id=bank_id, id=operation_id).first()


def operation_report(*, bank_id: str, operation_id: uuid.UUID | str) -> OperationReport | None:
    """The bank's operation as a client reads it (its carrier resolved), or None."""
    op = operation_get(bank_id=bank_id, operation_id=operation_id)
    if op is None:
        return None
    if (op.result_metadata or {}).get(SUPERSEDED_BY) is None:
        return OperationReport(op, op)
    return _reports([op], _carrier_ids(bank_id=bank_id, origin=op.id))[0]


def operations_bank_exists(*, bank_id: str) -> bool:
    """Whether the bank operations are scoped to exists (the row ``Operation.bank`` refers to).

    The engine knows banks only as its foreign key's target, never the banks app itself.
    """
    bank_model = Operation._meta.get_field("bank").related_model
    return bank_model._default_manager.filter(pk=bank_id).exists()


_LIST_WHERE = """
  FROM operations_operation o LEFT JOIN ends e ON e.origin = o.id
 WHERE o.bank_id = %(bank)s
   AND (%(status)s::text IS NULL OR COALESCE(e.carrier_status, o.status) = %(status)s::text)
   AND (%(type)s::text IS NULL OR o.operation_type = %(type)s::text)
"""


def operations_list(
    *,
    bank_id: str,
    status: str | None = None,
    operation_type: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[int, list[OperationReport]]:
    """``(total, page)``, most recent first; ``status`` filters on the reported status."""
    params: dict[str, Any] = {"bank": bank_id, "origin": None, "status": status or None,
                              "type": operation_type or None, "limit": limit, "offset": offset}
    with connection.cursor() as cursor:
        cursor.execute(_ENDS_CTE + "SELECT count(*)" + _LIST_WHERE, params)
        (total,) = cursor.fetchone()
        cursor.execute(
            _ENDS_CTE + "SELECT o.id, e.carrier_id" + _LIST_WHERE
            + " ORDER BY o.created_at DESC, o.id DESC LIMIT %(limit)s OFFSET %(offset)s",
            params,
        )
        rows = cursor.fetchall()
    ops = Operation.objects.in_bulk([row[0] for row in rows])
    page = [ops[row[0]] for row in rows if row[0] in ops]
    carriers = {row[0]: row[1] for row in rows if row[1] is not None}
    return int(total), _reports(page, carriers)


def operation_counts(*, bank_id: str) -> dict[str, int]:
    """Operations of the bank per reported status; every status present (0 when none)."""
    counts = dict.fromkeys(STATUSES, 0)
    with connection.cursor() as cursor:
        cursor.execute(
            _ENDS_CTE + "SELECT COALESCE(e.carrier_status, o.status), count(*)"
            " FROM operations_operation o LEFT JOIN ends e ON e.origin = o.id"
            " WHERE o.bank_id = %(bank)s GROUP BY 1",
            {"bank": bank_id, "origin": None},
        )
        for status, n in cursor.fetchall():
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
