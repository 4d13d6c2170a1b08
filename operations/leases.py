"""The engine's writes on a running job: claim (a new fence on the key's lease), heartbeat,
a failed attempt (retry, follower merge or final failure, with the handler's in-transaction
hook), supersede, the next due pending operation of a key, and ``lease_bump`` — the fence an
edit takes over.

Every state change is a compare-and-set on the row's current status and, for a running job,
its fence, in a short transaction; no network I/O happens inside one.

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

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest

from hindsight.infra.db import ClockTimestamp
from operations import dispatch, registry
from operations.errors import OperationFailure, requested_wait_seconds
from operations.hooks import call_hook_in_transaction
from operations.jobs import Job
from operations.models import (
    CANCELLED,
    FAILED,
    PARKED_BY,
    PENDING,
    PROCESSING,
    SUPERSEDED_BY,
    Lease,
    Operation,
    lease_key_for,
)
from operations.queue import merge_non_null


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


def _db_now_plus(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(
        ClockTimestamp() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )


# --------------------------------------------------------------------------------------------
# Claim, heartbeat, finish (used by the engine)
# --------------------------------------------------------------------------------------------

BUSY = "busy"

# A claim names its holder; a bump without one (an edit, recovery) keeps the last claim's, so the
# process running a job superseded meanwhile is still known: if it dies, its worker (or its
# peers) can end that job at once (``operations.recovery.operation_recover_lost``).
_BUMP_SQL = """
INSERT INTO operations_lease (key, fence, holder, heartbeat_at)
VALUES (%s, 1, %s, clock_timestamp())
ON CONFLICT (key) DO UPDATE
   SET fence = operations_lease.fence + 1,
       holder = COALESCE(EXCLUDED.holder, operations_lease.holder),
       heartbeat_at = EXCLUDED.heartbeat_at
RETURNING fence
"""

# The lease first (the global lock order), then the compare-and-set on the operation; both in
# one transaction, so a claim that finds nothing claimable (or another job of its key running:
# the processing index refuses) undoes the fence increment with it.
_CLAIM_SQL = """
UPDATE operations_operation
   SET status = 'processing', fence = %s,
       heartbeat_at = clock_timestamp(), updated_at = clock_timestamp(), next_retry_at = NULL,
       result_metadata = result_metadata - %s
 WHERE id = %s AND status = 'pending'
   AND (next_retry_at IS NULL OR next_retry_at <= clock_timestamp())
RETURNING *
"""


class _NotClaimable(Exception):
    """Rolls the claim's transaction (the fence increment) back."""


def operation_lease_key(operation_id: uuid.UUID | str) -> str | None:
    """The operation's lease key, read without a lock (``dedupe_key`` never changes)."""
    row = Operation.objects.filter(id=operation_id).values_list("id", "dedupe_key").first()
    if row is None:
        return None
    op_id, dedupe_key = row
    return lease_key_for(dedupe_key=dedupe_key, operation_id=op_id)


def operation_claim(
    *, operation_id: uuid.UUID | str, holder: str, lease_key: str | None = None
) -> Operation | str | None:
    """Compare-and-set pending → processing and take a new fence on the key's lease.

    Returns the claimed operation; ``None`` when it is not claimable (gone, not pending,
    parked); ``BUSY`` when another operation of its key is processing (the database's
    one-running-job guarantee, which holds even when Redis lost the lock). ``lease_key``: the
    operation's key when the caller read it already (it never changes), else it is read here.
    """
    if lease_key is None:
        lease_key = operation_lease_key(operation_id)
        if lease_key is None:
            return None
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(_BUMP_SQL, [lease_key, holder])
                (fence,) = cursor.fetchone()
            rows = list(Operation.objects.raw(_CLAIM_SQL, [fence, PARKED_BY, operation_id]))
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
    manual, after the backoff alone — a manual request ignores the rate floor
    (docs/behaviour.md#the-rate-floor), so a manual job's retry
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
            follower.payload = merge_non_null(op.payload, follower.payload)
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
                dispatch.operation_send_on_commit(operation_id=follower.id)
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
            dispatch.operation_send_on_commit(operation_id=op.id)
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


def operation_record_attempt(
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
    asked = requested_wait_seconds(exc) if delay_seconds is None else None
    if asked is not None:  # a provider's Retry-After: the backoff, or longer if it asked
        delay_seconds = max(backoff_seconds(peek.retry_count), asked)
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
    lease_key = operation_lease_key(operation_id)
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
            return operation_close_superseded(
                operation_id=operation_id, fence=fence,
                message=("superseded: an edit or a newer claim took over its key before it "
                         f"failed ({message})"),
            )
        # The lease carries this job's fence and is locked: the operation cannot change under us.
        peek = Operation.objects.filter(id=operation_id, status=PROCESSING, fence=fence).first()
        if peek is None:
            return None
        return operation_record_attempt(
            peek,
            lock=lambda qs: qs.select_for_update().first(),
            exc=exc if exc is not None else OperationFailure(message, retryable=retryable),
            message=message, retryable=retryable, delay_seconds=None,
            details=details, result_metadata=result_metadata,
        )


def operation_close_superseded(
    *, operation_id: uuid.UUID | str, fence: int, message: str
) -> FailureRecord | None:
    """End ``cancelled`` a job whose key's fence moved past ``fence``: not an attempt — no retry,
    nothing pushed onto the operation queued behind it. The caller holds the key's lease row
    (the lock order); ``None`` when the operation is no longer processing under ``fence``."""
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
    op.error_message = message
    op.save(update_fields=["status", "completed_at", "updated_at", "heartbeat_at",
                           "error_message"])
    op.refresh_from_db()
    return FailureRecord(op, final=False, retried_as=None, superseded=True)


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
