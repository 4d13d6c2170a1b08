"""Writes of the operations engine: submit (coalescing), claim, heartbeat, finish, retry, park,
release, cancel, delete, recovery, and the lease fence.

Every state change is a compare-and-set on the row's current status (and, for a running job,
its fence), in a short transaction; no network I/O happens inside one. Publishing to the broker
happens after commit (``operations.dispatch``). Times come from the database clock
(``clock_timestamp()``), so parking and recovery are decided on one clock.

Lock order — one for every transaction that locks more than one of these rows, so two of them
can queue behind each other but never deadlock:

1. the key's ``Lease`` row (claim, heartbeat, a failed attempt, recovery, ``Job.finishing`` /
   ``Job.check_fence``, and every edit's ``lease_bump``);
2. the row the handler writes (for a refresh, the ``MentalModel`` row);
3. ``Operation`` rows of the key: the running one before its pending follower.

A path that needs the lease key of an operation reads it first without a lock (``dedupe_key``
never changes), locks the lease, then locks and re-checks the operation.

A failed attempt (and a recovered one) is recorded in one transaction in exactly that order:
the lease; then the handler's ``on_attempt_failed_in_transaction`` hook (its own rows, level 2,
and — for a pause — the key's operations through ``operations_cancel_parked``, which locks the
running one before the pending one); then the running operation and its follower. While the
lease carries the running job's fence nothing else can change that operation, so it is read
without a lock before the hook and locked after it.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest

from hindsight.db import ClockTimestamp
from hindsight.errors import Conflict, NotFound
from operations import dispatch, registry
from operations.dispatch import operation_send_on_commit
from operations.errors import OperationFailure, WorkerLost
from operations.hooks import call_hook_in_transaction, call_on_cancelled
from operations.jobs import Job
from operations.models import (
    CANCELLED,
    FAILED,
    PENDING,
    PROCESSING,
    SUPERSEDED_BY,
    TERMINAL_STATUSES,
    Lease,
    Operation,
    lease_key_for,
)
from operations.selectors import operation_report

log = logging.getLogger(__name__)

_SUBMIT_ATTEMPTS = 100


@dataclass(frozen=True)
class SubmitResult:
    operation: Operation
    created: bool


@dataclass(frozen=True)
class FailureRecord:
    """How a failed attempt was recorded."""

    operation: Operation
    final: bool
    # The operation that carries the retry: the same one, a pending follower of its key, or None.
    retried_as: uuid.UUID | None
    # The job had lost its fence (an edit or a newer claim took the key over): it ended
    # ``cancelled`` and its failure was not recorded as an attempt.
    superseded: bool = False


def _without_superseded_by(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (metadata or {}).items() if k != SUPERSEDED_BY}


def _db_now_plus(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(
        ClockTimestamp() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def _merge(base: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Key by key; a non-null new value wins, a null one keeps what was there."""
    merged = dict(base or {})
    for key, value in (new or {}).items():
        if value is not None:
            merged[key] = value
    return merged


# --------------------------------------------------------------------------------------------
# Submit (coalescing by the database)
# --------------------------------------------------------------------------------------------

_INSERT_SQL = """
INSERT INTO operations_operation
    (id, bank_id, operation_type, dedupe_key, mental_model_id, status, automatic, payload,
     next_retry_at, retry_count, error_message, result_metadata, details, dispatched_at,
     heartbeat_at, fence, created_at, updated_at, completed_at)
VALUES
    (%s, %s, %s, %s, %s, 'pending', %s, %s::jsonb,
     CASE WHEN %s AND %s::timestamptz > clock_timestamp() THEN %s::timestamptz END,
     0, NULL, %s::jsonb, %s::jsonb, NULL, NULL, 0, clock_timestamp(), clock_timestamp(), NULL)
ON CONFLICT DO NOTHING
RETURNING id, next_retry_at
"""


def operation_submit(
    *,
    bank_id: str,
    operation_type: str,
    dedupe_key: str | None = None,
    mental_model_id: str | None = None,
    automatic: bool = False,
    payload: dict[str, Any] | None = None,
    not_before: datetime | None = None,
    details: dict[str, Any] | None = None,
    result_metadata: dict[str, Any] | None = None,
    operation_id: uuid.UUID | str | None = None,
) -> SubmitResult:
    """Queue an operation, or fold the request into the key's pending one.

    Coalescing is the database's: ``INSERT … ON CONFLICT DO NOTHING`` against the partial
    unique index on pending ``dedupe_key``; on conflict the pending row is locked and the
    request folded into it; if it was claimed in between (no pending row), try again. A
    request never folds into a *processing* operation: it queues one behind it.

    Folding: ``payload`` (and ``result_metadata``) merge key by key, non-null new values
    winning; a manual request makes the operation manual and releases its park; an automatic
    request leaves a park as it is. An automatic request with ``not_before`` in the future
    creates a *parked* operation (pending, ``next_retry_at = not_before``, not sent).
    ``operation_id`` makes a keyless submit idempotent (a repeat returns the same operation).
    """
    payload = payload or {}
    new_id = uuid.UUID(str(operation_id)) if operation_id is not None else None
    with transaction.atomic():
        for _ in range(_SUBMIT_ATTEMPTS):
            candidate = new_id or uuid.uuid4()
            with connection.cursor() as cursor:
                cursor.execute(
                    _INSERT_SQL,
                    [
                        candidate, bank_id, operation_type, dedupe_key, mental_model_id,
                        automatic, json.dumps(payload),
                        bool(automatic and not_before is not None), not_before, not_before,
                        json.dumps(result_metadata or {}),
                        json.dumps(details) if details is not None else None,
                    ],
                )
                row = cursor.fetchone()
            if row is not None:
                operation = Operation.objects.get(id=row[0])
                if row[1] is None:
                    operation_send_on_commit(operation_id=operation.id)
                return SubmitResult(operation, True)

            if new_id is not None:
                existing = Operation.objects.filter(id=new_id).first()
                if existing is not None:
                    if existing.bank_id != bank_id or existing.operation_type != operation_type:
                        raise Conflict(f"Operation {new_id} already exists for another request")
                    return SubmitResult(existing, False)
            if dedupe_key is None:
                continue  # a uuid collision: draw another
            pending = (
                Operation.objects.select_for_update()
                .filter(dedupe_key=dedupe_key, status=PENDING)
                .first()
            )
            if pending is None:
                continue  # claimed between our insert and this read: queue a new one
            return SubmitResult(
                _fold(pending, automatic=automatic, payload=payload,
                      mental_model_id=mental_model_id, details=details,
                      result_metadata=result_metadata),
                False,
            )
    raise RuntimeError(f"could not submit {operation_type} for {dedupe_key!r}: too much contention")


def _fold(
    pending: Operation,
    *,
    automatic: bool,
    payload: dict[str, Any],
    mental_model_id: str | None,
    details: dict[str, Any] | None,
    result_metadata: dict[str, Any] | None,
) -> Operation:
    fields = ["payload", "updated_at"]
    pending.payload = _merge(pending.payload, payload)
    release = False
    if not automatic:
        if pending.automatic:
            pending.automatic = False
            fields.append("automatic")
        if pending.next_retry_at is not None:
            # A manual request runs now, whatever held the pending operation back.
            pending.next_retry_at = None
            fields.append("next_retry_at")
            release = True
    if mental_model_id and not pending.mental_model_id:
        pending.mental_model_id = mental_model_id
        fields.append("mental_model_id")
    if details is not None and pending.details is None:
        pending.details = details
        fields.append("details")
    if result_metadata:
        pending.result_metadata = _merge(pending.result_metadata, result_metadata)
        fields.append("result_metadata")
    pending.updated_at = ClockTimestamp()
    pending.save(update_fields=fields)
    pending.refresh_from_db()
    if release:
        operation_send_on_commit(operation_id=pending.id)
    return pending


# --------------------------------------------------------------------------------------------
# Claim, heartbeat, finish (used by the engine)
# --------------------------------------------------------------------------------------------

BUSY = "busy"

_BUMP_SQL = """
INSERT INTO operations_lease (key, fence, holder, heartbeat_at)
VALUES (%s, 1, %s, clock_timestamp())
ON CONFLICT (key) DO UPDATE
   SET fence = operations_lease.fence + 1, holder = EXCLUDED.holder,
       heartbeat_at = EXCLUDED.heartbeat_at
RETURNING fence
"""

# The lease first (the global lock order), then the compare-and-set on the operation; both in
# one transaction, so a claim that finds nothing claimable (or another job of its key running:
# the processing index refuses) undoes the fence increment with it.
_CLAIM_SQL = """
UPDATE operations_operation
   SET status = 'processing', fence = %s,
       heartbeat_at = clock_timestamp(), updated_at = clock_timestamp(), next_retry_at = NULL
 WHERE id = %s AND status = 'pending'
   AND (next_retry_at IS NULL OR next_retry_at <= clock_timestamp())
RETURNING *
"""


class _NotClaimable(Exception):
    """Rolls the claim's transaction (the fence increment) back."""


def _lease_key_of(operation_id: uuid.UUID | str) -> str | None:
    """The operation's lease key, read without a lock (``dedupe_key`` never changes)."""
    row = Operation.objects.filter(id=operation_id).values_list("id", "dedupe_key").first()
    if row is None:
        return None
    op_id, dedupe_key = row
    return lease_key_for(dedupe_key=dedupe_key, operation_id=op_id)


def operation_claim(*, operation_id: uuid.UUID | str, holder: str) -> Operation | str | None:
    """Compare-and-set pending → processing and take a new fence on the key's lease.

    Returns the claimed operation; ``None`` when it is not claimable (gone, not pending,
    parked); ``BUSY`` when another operation of its key is processing (the database's
    one-running-job guarantee, which holds even when Redis lost the lock).
    """
    lease_key = _lease_key_of(operation_id)
    if lease_key is None:
        return None
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(_BUMP_SQL, [lease_key, holder])
                (fence,) = cursor.fetchone()
            rows = list(Operation.objects.raw(_CLAIM_SQL, [fence, operation_id]))
            if not rows:
                raise _NotClaimable
    except _NotClaimable:
        return None
    except IntegrityError:
        return BUSY
    return rows[0]


def operation_heartbeat(*, operation_id: uuid.UUID | str, fence: int, key: str) -> bool:
    """Stamp ``heartbeat_at``; False when the operation is no longer ours.

    Lease before operation (the lock order): a heartbeat landing while the job's own
    completion holds the lease waits for it, then finds the operation done.
    """
    with transaction.atomic():
        Lease.objects.filter(key=key, fence=fence).update(heartbeat_at=ClockTimestamp())
        alive = Operation.objects.filter(id=operation_id, status=PROCESSING, fence=fence).update(
            heartbeat_at=ClockTimestamp()
        )
    return alive == 1


def backoff_seconds(retry_count: int) -> float:
    """Exponential backoff with "equal jitter", capped: it never shrinks from one retry to the next.

    Retry ``n`` (0-based) waits ``min(cap, d/2 + U(0, d/2))`` with ``d = base × 2^n``: the
    ranges ``[d/2, d]`` of consecutive retries touch but do not overlap.
    """
    cfg = settings.HINDSIGHT
    span = cfg.worker_retry_backoff_seconds * (2 ** min(retry_count, 30))
    return min(cfg.worker_retry_backoff_max_seconds, span / 2 + random.uniform(0, span / 2))


def _fail_locked(
    op: Operation,
    *,
    message: str,
    retryable: bool,
    delay_seconds: float | None,
    details: dict[str, Any] | None,
    result_metadata: dict[str, Any] | None,
) -> FailureRecord:
    """Record a failed attempt of ``op`` (locked, processing). The merge rule lives here.

    Retry while ``retry_count < worker_max_retries``: back to pending with ``retry_count + 1``
    and ``next_retry_at = now + backoff``. If the key already has a pending operation the
    failing one cannot go back to pending (one pending per key), so the *follower carries the
    retry*: it inherits ``retry_count + 1`` (if higher than its own), becomes manual if either
    was manual, and takes the failing payload under its own; the failing operation closes
    ``failed`` with a message naming the follower and ``result_metadata.superseded_by`` = the
    follower's id (reads resolve it: ``operations.selectors``). When it may run: if both are
    automatic, at the later of its own park (the rate floor) and the backoff; if either is
    manual, after the backoff alone — a manual request ignores the rate floor (OP-6), so a manual job's retry
    landing on a parked automatic follower releases that park instead of inheriting it.
    """
    if details is not None:
        op.details = details
    if result_metadata is not None:
        op.result_metadata = result_metadata
    can_retry = not _attempt_is_final(op, retryable=retryable)
    delay = backoff_seconds(op.retry_count) if delay_seconds is None else delay_seconds
    common = ["status", "error_message", "details", "result_metadata", "updated_at",
              "heartbeat_at"]
    op.updated_at = ClockTimestamp()
    op.heartbeat_at = None
    attempt = op.retry_count + 1

    if can_retry and op.dedupe_key:
        follower = (
            Operation.objects.select_for_update()
            .filter(dedupe_key=op.dedupe_key, status=PENDING)
            .exclude(id=op.id)
            .first()
        )
        if follower is not None:
            follower.retry_count = max(follower.retry_count, op.retry_count + 1)
            wait_until = _db_now_plus(delay)
            if follower.automatic and op.automatic:
                follower.next_retry_at = (
                    Greatest(Coalesce("next_retry_at", wait_until), wait_until) if delay > 0
                    else follower.next_retry_at
                )
            else:
                # Manual: only the backoff holds it back (a park it had was an automatic
                # trigger's rate floor, which a manual request does not wait for).
                follower.next_retry_at = wait_until if delay > 0 else None
            follower.automatic = follower.automatic and op.automatic
            follower.payload = _merge(op.payload, follower.payload)
            follower.updated_at = ClockTimestamp()
            follower.save(update_fields=["retry_count", "next_retry_at", "automatic", "payload",
                                         "updated_at"])
            follower.refresh_from_db()
            op.status = FAILED
            op.completed_at = ClockTimestamp()
            op.error_message = (
                f"{message} (attempt {attempt}; retried as operation {follower.id}, "
                "which was already queued for the same key)"
            )
            op.result_metadata = {**(op.result_metadata or {}), SUPERSEDED_BY: str(follower.id)}
            op.save(update_fields=[*common, "completed_at"])
            op.refresh_from_db()
            if follower.next_retry_at is None:
                operation_send_on_commit(operation_id=follower.id)
            return FailureRecord(op, final=False, retried_as=follower.id)

    if can_retry:
        op.status = PENDING
        op.retry_count += 1
        op.error_message = message
        op.next_retry_at = _db_now_plus(delay) if delay > 0 else None
        op.dispatched_at = None
        op.save(update_fields=[*common, "retry_count", "next_retry_at", "dispatched_at"])
        op.refresh_from_db()
        if op.next_retry_at is None:
            operation_send_on_commit(operation_id=op.id)
        return FailureRecord(op, final=False, retried_as=op.id)

    op.status = FAILED
    op.completed_at = ClockTimestamp()
    op.error_message = message
    op.save(update_fields=[*common, "completed_at"])
    op.refresh_from_db()
    if op.dedupe_key is None:
        Lease.objects.filter(key=op.lease_key).delete()
    return FailureRecord(op, final=True, retried_as=None)


def _attempt_is_final(op: Operation, *, retryable: bool) -> bool:
    """The one rule: an attempt is the last when it may not be retried or the cap is reached."""
    return not (retryable and op.retry_count < settings.HINDSIGHT.worker_max_retries)


class _Moved(Exception):
    """The operation changed between the unlocked read and its lock: undo the savepoint."""


def _record_attempt(
    peek: Operation,
    *,
    lock: Callable[[QuerySet[Operation]], Operation | None],
    exc: BaseException,
    message: str,
    retryable: bool,
    delay_seconds: float | None,
    details: dict[str, Any] | None = None,
    result_metadata: dict[str, Any] | None = None,
    bump: bool = False,
) -> FailureRecord | None:
    """Record a failed attempt of ``peek`` with the handler's bookkeeping, in one savepoint.

    The caller holds the key's lease row; ``peek`` was read without a lock. Order (module
    docstring): [bump the lease], the handler's ``on_attempt_failed_in_transaction`` (its rows),
    then the operation row — locked by ``lock(queryset)`` and re-checked; if it moved meanwhile
    everything here is undone and ``None`` returned.
    """
    final = _attempt_is_final(peek, retryable=retryable)
    try:
        with transaction.atomic():
            if bump:
                lease_bump(key=peek.lease_key)
            handler = registry.get_handler(peek.operation_type)
            if handler is not None:
                call_hook_in_transaction(
                    handler, "on_attempt_failed_in_transaction",
                    Job(peek, fence=peek.fence, key=peek.lease_key), exc, final=final,
                )
            op = lock(Operation.objects.filter(id=peek.id, status=PROCESSING, fence=peek.fence))
            if op is None or op.heartbeat_at != peek.heartbeat_at:
                raise _Moved
            record = _fail_locked(op, message=message, retryable=retryable,
                                  delay_seconds=delay_seconds, details=details,
                                  result_metadata=result_metadata)
    except _Moved:
        return None
    return record


def operation_record_failure(
    *,
    operation_id: uuid.UUID | str,
    fence: int,
    message: str,
    retryable: bool = True,
    details: dict[str, Any] | None = None,
    result_metadata: dict[str, Any] | None = None,
    exc: BaseException | None = None,
) -> FailureRecord | None:
    """Record a failed attempt of a running job; None if the job no longer owns the op.

    The handler's ``on_attempt_failed_in_transaction(job, exc, final=)`` runs in the same
    transaction (a final failure and, say, a paused model commit together or not at all).

    A job whose key's lease no longer carries its fence was superseded (an edit bumped it, or
    recovery handed the key on): its failure is not an attempt — it ends ``cancelled``, with no
    retry and nothing pushed onto the operation queued behind it. Lock order: the lease, the
    handler's rows, then the operation, then its follower (module docstring).
    """
    lease_key = _lease_key_of(operation_id)
    if lease_key is None:
        return None
    with transaction.atomic():
        lease_fence = (
            Lease.objects.select_for_update()
            .filter(key=lease_key)
            .values_list("fence", flat=True)
            .first()
        )
        if lease_fence != fence:
            op = (
                Operation.objects.select_for_update()
                .filter(id=operation_id, status=PROCESSING, fence=fence)
                .first()
            )
            if op is None:
                return None
            op.status = CANCELLED
            op.completed_at = ClockTimestamp()
            op.updated_at = ClockTimestamp()
            op.heartbeat_at = None
            op.error_message = (
                f"superseded: an edit or a newer claim took over its key before it failed "
                f"({message})"
            )
            op.save(update_fields=["status", "completed_at", "updated_at", "heartbeat_at",
                                   "error_message"])
            op.refresh_from_db()
            return FailureRecord(op, final=False, retried_as=None, superseded=True)
        # The lease carries this job's fence and is locked: the operation cannot change under us.
        peek = Operation.objects.filter(id=operation_id, status=PROCESSING, fence=fence).first()
        if peek is None:
            return None
        return _record_attempt(
            peek,
            lock=lambda qs: qs.select_for_update().first(),
            exc=exc if exc is not None else OperationFailure(message, retryable=retryable),
            message=message, retryable=retryable, delay_seconds=None,
            details=details, result_metadata=result_metadata,
        )


def operation_supersede(*, operation_id: uuid.UUID | str, fence: int, message: str) -> bool:
    """End a running job whose fence was taken over: ``cancelled``, only if still its fence."""
    with transaction.atomic():
        updated = Operation.objects.filter(
            id=operation_id, status=PROCESSING, fence=fence
        ).update(
            status=CANCELLED, completed_at=ClockTimestamp(), updated_at=ClockTimestamp(),
            error_message=message, heartbeat_at=None,
        )
    return updated == 1


def next_pending_of_key(*, key: str) -> uuid.UUID | None:
    """The key's pending operation if it is due (not parked)."""
    return (
        Operation.objects.filter(dedupe_key=key, status=PENDING)
        .exclude(next_retry_at__gt=ClockTimestamp())
        .values_list("id", flat=True)
        .first()
    )


# --------------------------------------------------------------------------------------------
# Fencing
# --------------------------------------------------------------------------------------------


def lease_bump(*, key: str) -> int:
    """Invalidate a running job of ``key``: its next fence check raises ``FenceLost``.

    Runs in the caller's transaction (bump first, before locking other rows, so lock order is
    lease → rows, the same as a finishing job's). Returns the new fence.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_BUMP_SQL, [key, None])
        (fence,) = cursor.fetchone()
    return int(fence)


# --------------------------------------------------------------------------------------------
# Parking and release
# --------------------------------------------------------------------------------------------


def operation_release(*, operation_id: uuid.UUID | str) -> bool:
    """Release a park: clear ``next_retry_at`` and send now. False if not pending."""
    with transaction.atomic():
        updated = Operation.objects.filter(id=operation_id, status=PENDING).update(
            next_retry_at=None, updated_at=ClockTimestamp()
        )
        if updated:
            operation_send_on_commit(operation_id=operation_id)
    return updated == 1


_RELEASE_DUE_SQL = """
UPDATE operations_operation o
   SET next_retry_at = NULL, updated_at = clock_timestamp()
 WHERE o.id IN (
        SELECT id FROM operations_operation
         WHERE status = 'pending' AND next_retry_at IS NOT NULL
           AND next_retry_at <= clock_timestamp()
         ORDER BY next_retry_at
         LIMIT %s
         FOR UPDATE SKIP LOCKED)
RETURNING o.id
"""


def operations_release_due(*, limit: int | None = None) -> list[uuid.UUID]:
    """Send the parked operations whose time has come (database time); bounded batch."""
    batch = limit or settings.HINDSIGHT.recovery_batch_size
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_RELEASE_DUE_SQL, [batch])
            ids = [row[0] for row in cursor.fetchall()]
        for op_id in ids:
            operation_send_on_commit(operation_id=op_id)
    return ids


def operations_cancel_parked(*, dedupe_key: str, parked_only: bool = True) -> list[uuid.UUID]:
    """Cancel the key's parked *automatic* pending operation(s) (pause after failure).

    ``parked_only=False`` cancels a due automatic one too (one queued behind the failed job).
    """
    with transaction.atomic():
        # The running operation of the key before its pending one (the lock order): a failed
        # job's transaction calls this from its handler hook before it locks its own row.
        list(Operation.objects.select_for_update().filter(dedupe_key=dedupe_key,
                                                          status=PROCESSING).values_list("id"))
        pending = Operation.objects.select_for_update().filter(
            dedupe_key=dedupe_key, status=PENDING, automatic=True
        )
        if parked_only:
            pending = pending.filter(next_retry_at__gt=ClockTimestamp())
        ops = list(pending)
        ids = [op.id for op in ops]
        if ids:
            Operation.objects.filter(id__in=ids).update(
                status=CANCELLED, completed_at=ClockTimestamp(), updated_at=ClockTimestamp(),
                error_message="cancelled: automatic refreshes are paused after a failure",
            )
        for op_id in ids:
            _on_cancelled_on_commit(op_id)
    return ids


def _on_cancelled_on_commit(operation_id: uuid.UUID) -> None:
    def call() -> None:
        call_on_cancelled(operation_id=operation_id)

    transaction.on_commit(call, robust=True)


# --------------------------------------------------------------------------------------------
# The API's actions (OP-9)
# --------------------------------------------------------------------------------------------


def _get_for_update(bank_id: str, operation_id: uuid.UUID | str) -> Operation:
    op = Operation.objects.select_for_update().filter(id=operation_id, bank_id=bank_id).first()
    if op is None:
        raise NotFound(f"Operation '{operation_id}' not found")
    return op


def _refuse_if_carried(op: Operation, *, action: str) -> None:
    """409 for an action on an operation whose work another one carries, while that one is not
    done with it: the work, and so the action, belongs to the carrier (named)."""
    if not (op.result_metadata or {}).get(SUPERSEDED_BY):
        return
    report = operation_report(bank_id=op.bank_id, operation_id=op.id)
    if report is not None and report.carried and report.status not in (FAILED, CANCELLED):
        raise Conflict(
            f"Operation {op.id}'s work is carried by operation {report.carrier.id} "
            f"({report.status}); {action} that one"
        )


def operation_cancel(*, bank_id: str, operation_id: uuid.UUID | str) -> Operation:
    """Cancel a pending operation; 409 for any other status."""
    with transaction.atomic():
        op = _get_for_update(bank_id, operation_id)
        _refuse_if_carried(op, action="cancel")
        if op.status != PENDING:
            raise Conflict(
                f"Operation {operation_id} is {op.status}; only a pending operation can be "
                "cancelled"
            )
        Operation.objects.filter(id=op.id, status=PENDING).update(
            status=CANCELLED, completed_at=ClockTimestamp(), updated_at=ClockTimestamp(),
            error_message="cancelled by request",
        )
        _on_cancelled_on_commit(op.id)
        op.refresh_from_db()
    return op


def operation_retry(*, bank_id: str, operation_id: uuid.UUID | str) -> tuple[Operation, str]:
    """Re-queue a failed or cancelled operation (a parked one runs now); 409 otherwise.

    Returns the operation that will run and a message. If its key already has a pending
    operation, the request folds into that one (made manual, released) instead.
    """
    with transaction.atomic():
        op = _get_for_update(bank_id, operation_id)
        if op.status == PENDING and op.next_retry_at is not None:
            Operation.objects.filter(id=op.id).update(
                next_retry_at=None, automatic=False, updated_at=ClockTimestamp()
            )
            operation_send_on_commit(operation_id=op.id)
            op.refresh_from_db()
            return op, f"Operation {op.id} released to run now"
        _refuse_if_carried(op, action="retry")
        if op.status not in (FAILED, CANCELLED):
            raise Conflict(
                f"Operation {operation_id} is {op.status}; only a failed or cancelled "
                "operation can be retried"
            )
        try:
            with transaction.atomic():
                Operation.objects.filter(id=op.id).update(
                    status=PENDING, retry_count=0, error_message=None, next_retry_at=None,
                    completed_at=None, heartbeat_at=None, dispatched_at=None, details=None,
                    automatic=False, updated_at=ClockTimestamp(),
                    # It carries its own work again.
                    result_metadata=_without_superseded_by(op.result_metadata),
                )
        except IntegrityError as exc:
            follower = (
                Operation.objects.select_for_update()
                .filter(dedupe_key=op.dedupe_key, status=PENDING)
                .first()
            )
            if follower is None:  # claimed meanwhile; the caller may simply retry
                raise Conflict(f"Operation {operation_id} could not be re-queued; try again") from exc
            folded = _fold(follower, automatic=False, payload=op.payload,
                           mental_model_id=op.mental_model_id, details=None,
                           result_metadata=None)
            Operation.objects.filter(id=op.id).update(
                result_metadata={**(op.result_metadata or {}), SUPERSEDED_BY: str(folded.id)},
                updated_at=ClockTimestamp(),
            )
            return folded, (
                f"Operation {operation_id} folded into pending operation {folded.id} "
                "of the same key"
            )
        operation_send_on_commit(operation_id=op.id)
        op.refresh_from_db()
    return op, f"Operation {op.id} queued for retry"


def operation_delete(*, bank_id: str, operation_id: uuid.UUID | str) -> None:
    """Remove a completed, failed or cancelled operation's row; 409 while it may still run."""
    with transaction.atomic():
        op = _get_for_update(bank_id, operation_id)
        if op.status not in TERMINAL_STATUSES:
            raise Conflict(
                f"Operation {operation_id} is {op.status}; cancel it first (only completed, "
                "failed or cancelled operations can be deleted)"
            )
        op.delete()


# --------------------------------------------------------------------------------------------
# Recovery (beat)
# --------------------------------------------------------------------------------------------


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
    ever wakes, cannot write. Pending, due operations whose message is not known to have been
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
            record = _record_attempt(
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
    ``WorkerLostError``) and names it by the ``holder`` it claimed with. Proof that the job is
    that process's: the operation is processing under the lease's current fence and the lease
    names ``holder`` — a later claim or an edit would have changed both. Then the attempt is
    recorded exactly as the sweep would (counted, fence bumped, merge rule, the handler's
    in-transaction hook); a slow but alive job is never touched, since its holder is not dead.

    Waits (bounded) for the lease row: a transaction the dead process left open is aborted by
    PostgreSQL within moments. ``None`` when there is nothing to recover.
    """
    lease_key = _lease_key_of(operation_id)
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
        peek = Operation.objects.filter(id=operation_id, status=PROCESSING, fence=lease[0]).first()
        if peek is None:
            return None  # finished, or never claimed by that process
        return _record_attempt(
            peek,
            lock=lambda qs: qs.select_for_update().first(),
            exc=WorkerLost(message), message=message, retryable=True, delay_seconds=0.0,
            bump=True,
        )
