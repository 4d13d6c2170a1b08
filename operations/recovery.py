"""Recovery: bring back what a lost worker or a lost message left behind — the beat's sweep
(``operations_recover``) and the fast path for a worker process known to be gone
(``operation_recover_lost``). A recovered job counts a failed attempt, recorded exactly as any
other (``operations.leases``: the lock order, the merge rule, the handler's hook).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value

from hindsight.infra.db import ClockTimestamp
from operations import dispatch
from operations.errors import WorkerLost
from operations.leases import (
    FailureRecord,
    operation_close_superseded,
    operation_lease_key,
    operation_record_attempt,
)
from operations.models import PROCESSING, Lease, Operation


@dataclass(frozen=True)
class RecoveryReport:
    recovered: list[FailureRecord]
    redispatched: list[uuid.UUID]


_STALE_SQL = """
SELECT id, COALESCE(dedupe_key, 'op:' || id::text) FROM operations_operation
 WHERE status = 'processing'
   AND COALESCE(heartbeat_at, updated_at) < clock_timestamp() - make_interval(secs => %s)
 ORDER BY COALESCE(heartbeat_at, updated_at)
 LIMIT %s
"""

_LOST_SQL = """
SELECT o.id FROM operations_operation o
 WHERE o.status = 'pending'
   AND (o.next_retry_at IS NULL OR o.next_retry_at <= clock_timestamp())
   AND (o.dispatched_at IS NULL
        OR o.dispatched_at < clock_timestamp() - make_interval(secs => %s))
   AND NOT EXISTS (SELECT 1 FROM operations_operation p
                    WHERE p.dedupe_key = o.dedupe_key AND p.status = 'processing')
 ORDER BY o.created_at
 LIMIT %s
"""


def operations_recover(*, limit: int | None = None) -> RecoveryReport:
    """Bring back what a whole-host loss or a lost message left behind; bounded batches.

    The backstop: a worker whose main process saw its child die recovers the job at once
    (``operation_recover_lost``); this sweep catches what nobody saw — a machine that is gone.
    Processing operations silent past ``recovery_threshold_seconds`` count a failed attempt
    ("worker lost") and go back to pending at once (or fail at the retry cap), under the same
    merge rule as any failed attempt; their key's fence is bumped so the silent worker, if it
    ever wakes, cannot write; one an edit superseded meanwhile ends ``cancelled`` instead, not
    an attempt. Pending, due operations whose message is not known to have been
    sent, or was sent more than ``redispatch_after_seconds`` ago while nothing of their key
    runs, are sent again.

    A key whose lease row is locked is skipped for this sweep: someone holds it right now (a
    job inside its fenced completion, an edit), which is no sign of a lost worker, and waiting
    for it while holding the operation row is how a sweep would deadlock with a finishing job.
    """
    cfg = settings.HINDSIGHT
    batch = limit or cfg.recovery_batch_size
    threshold = timedelta(seconds=cfg.recovery_threshold_seconds)
    message = f"worker lost: no heartbeat for more than {cfg.recovery_threshold_seconds:g}s"
    recovered: list[FailureRecord] = []
    with connection.cursor() as cursor:
        cursor.execute(_STALE_SQL, [cfg.recovery_threshold_seconds, batch])
        stale = [(row[0], row[1]) for row in cursor.fetchall()]
    for op_id, lease_key in stale:
        with transaction.atomic():
            held = list(
                Lease.objects.select_for_update(skip_locked=True)
                .filter(key=lease_key)
                .values_list("fence", flat=True)
            )
            if not held and Lease.objects.filter(key=lease_key).exists():
                continue  # locked by a live writer
            peek = Operation.objects.filter(id=op_id, status=PROCESSING).first()
            if peek is None or not _silent_since(peek, threshold):
                continue  # a heartbeat landed since the scan
            if held and held[0] != peek.fence:  # an edit superseded it: not an attempt
                superseded = operation_close_superseded(
                    operation_id=op_id, fence=peek.fence,
                    message=f"superseded: an edit took over its key, then {message}")
                if superseded is not None:
                    recovered.append(superseded)
                continue
            record = operation_record_attempt(
                peek,
                lock=lambda qs: qs.select_for_update(skip_locked=True).first(),
                exc=WorkerLost(message), message=message, retryable=True, delay_seconds=0.0,
                bump=True,
            )
            if record is not None:
                recovered.append(record)
    with connection.cursor() as cursor:
        cursor.execute(_LOST_SQL, [cfg.redispatch_after_seconds, batch])
        lost_ids = [row[0] for row in cursor.fetchall()]

    for op_id in lost_ids:
        dispatch.operation_send(operation_id=op_id)
    return RecoveryReport(recovered=recovered, redispatched=lost_ids)


def _silent_since(op: Operation, threshold: timedelta) -> bool:
    """No heartbeat for ``threshold``, on the database clock."""
    return op.heartbeat_at is None or Operation.objects.filter(
        id=op.id,
        heartbeat_at__lt=ExpressionWrapper(ClockTimestamp() - Value(threshold),
                                           output_field=DateTimeField()),
    ).exists()


_LOST_LEASE_WAIT = "5s"


def operation_recover_lost(
    *, operation_id: uuid.UUID | str, holder: str, cause: str
) -> FailureRecord | None:
    """Recover, at once, the job of a worker process known to be gone (the fast path).

    The caller saw the process die (a Celery worker's main process, on its child's
    ``WorkerLostError``; a threads-pool worker's peers, on its stale beacon) and names it by the
    ``holder`` it claimed with. Proof that the job is that process's: the lease names
    ``holder`` — the last claim of the key, which a later claim would have replaced (an edit's
    bump keeps it) — and the operation is processing. Under the lease's current fence the
    attempt is recorded exactly as the sweep would (counted, fence bumped, merge rule, the
    handler's in-transaction hook). Under an older fence an edit superseded the job before the
    process died: it ends ``cancelled``, not an attempt, as it would have when its write was
    refused (docs/behaviour.md#edits-during-a-running-refresh); the caller hands the key on. A
    slow but alive job is never touched, since its holder is not dead.

    Waits (bounded) for the lease row: a transaction the dead process left open is aborted by
    PostgreSQL within moments. ``None`` when there is nothing to recover.
    """
    lease_key = operation_lease_key(operation_id)
    if lease_key is None:
        return None
    message = f"worker lost: {cause}"
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{_LOST_LEASE_WAIT}'")
        lease = (
            Lease.objects.select_for_update()
            .filter(key=lease_key)
            .values_list("fence", "holder")
            .first()
        )
        if lease is None or lease[1] != holder:
            return None
        peek = Operation.objects.filter(id=operation_id, status=PROCESSING,
                                        fence__lte=lease[0]).first()
        if peek is None:
            return None  # finished, or never claimed by that process
        if peek.fence != lease[0]:
            return operation_close_superseded(
                operation_id=operation_id, fence=peek.fence,
                message=f"superseded: an edit took over its key, then its {message}",
            )
        return operation_record_attempt(
            peek,
            lock=lambda qs: qs.select_for_update().first(),
            exc=WorkerLost(message), message=message, retryable=True, delay_seconds=0.0,
            bump=True,
        )
