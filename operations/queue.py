"""The queue's writes: submit (coalescing by the database, folding into the key's pending
operation), park a due operation a handler holds back, release a park (one, or a bank's
parked by one reason), send the parked operations that are due, cancel a key's parked
automatic operations.

Every state change is a compare-and-set on the row's current status, in a short transaction;
no network I/O happens inside one. Publishing to the broker happens after commit
(``operations.dispatch``). Times come from the database clock (``clock_timestamp()``), so
parking and recovery are decided on one clock. The lock order every multi-row transaction
follows is written down in ``operations.leases``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import Conflict
from operations import dispatch
from operations.hooks import call_on_cancelled
from operations.models import CANCELLED, PARKED_BY, PENDING, PROCESSING, Operation

_SUBMIT_ATTEMPTS = 100


@dataclass(frozen=True)
class SubmitResult:
    operation: Operation
    created: bool


def merge_non_null(base: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
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
     0, CASE WHEN %s AND %s::timestamptz > clock_timestamp() THEN %s END,
     %s::jsonb, %s::jsonb, NULL, NULL, 0, clock_timestamp(), clock_timestamp(), NULL)
ON CONFLICT DO NOTHING
RETURNING *
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
    parked_by: dict[str, Any] | None = None,
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
    ``parked_by`` with ``not_before`` in the future creates a new operation parked, automatic
    or not, saying why as a handler's hold would (``error_message`` and
    ``result_metadata.parked_by``): the caller already knows what holds it back.
    ``operation_id`` makes a keyless submit idempotent (a repeat returns the same operation).
    """
    payload = payload or {}
    parks = not_before is not None and (automatic or parked_by is not None)
    if parked_by is not None:
        result_metadata = {**(result_metadata or {}), PARKED_BY: parked_by}
    parked_message = str((parked_by or {}).get("message") or "parked")
    new_id = uuid.UUID(str(operation_id)) if operation_id is not None else None
    for _ in range(_SUBMIT_ATTEMPTS):
        candidate = new_id or uuid.uuid4()
        # One statement, atomic on its own (no transaction of its own around it: BEGIN and
        # COMMIT would be two more round trips); the inserted row comes back whole.
        inserted = list(Operation.objects.raw(
            _INSERT_SQL,
            [
                candidate, bank_id, operation_type, dedupe_key, mental_model_id,
                automatic, json.dumps(payload),
                parks, not_before, not_before,
                parked_by is not None and parks, not_before, parked_message,
                json.dumps(result_metadata or {}, default=str),
                json.dumps(details) if details is not None else None,
            ],
        ))
        if inserted:
            operation = inserted[0]
            if operation.next_retry_at is None:
                dispatch.operation_send_on_commit(operation_id=operation.id,
                                                  operation_type=operation_type)
            return SubmitResult(operation, True)

        if new_id is not None:
            existing = Operation.objects.filter(id=new_id).first()
            if existing is not None:
                if existing.bank_id != bank_id or existing.operation_type != operation_type:
                    raise Conflict(f"Operation {new_id} already exists for another request")
                return SubmitResult(existing, False)
        if dedupe_key is None:
            continue  # a uuid collision: draw another
        with transaction.atomic():
            pending = (
                Operation.objects.select_for_update()
                .filter(dedupe_key=dedupe_key, status=PENDING)
                .first()
            )
            if pending is None:
                continue  # claimed between our insert and this read: queue a new one
            return SubmitResult(
                operation_fold(pending, automatic=automatic, payload=payload,
                               mental_model_id=mental_model_id, details=details,
                               result_metadata=result_metadata),
                False,
            )
    raise RuntimeError(f"could not submit {operation_type} for {dedupe_key!r}: too much contention")


def operation_fold_automatic(*, dedupe_key: str) -> bool:
    """Fold an automatic request without payload into the key's pending operation, in one
    statement; False when none is pending (the caller submits instead).

    Such a fold changes nothing of ``operation_fold``'s but ``updated_at`` (no payload to merge,
    an automatic request leaves a park and the manual flag as they are); the ``UPDATE`` locks
    the row as the fold's ``SELECT … FOR UPDATE`` does, so a claim waits for the caller's
    transaction to commit.
    """
    return bool(
        Operation.objects.filter(dedupe_key=dedupe_key, status=PENDING)
        .update(updated_at=ClockTimestamp())
    )


def operation_fold(
    pending: Operation,
    *,
    automatic: bool,
    payload: dict[str, Any],
    mental_model_id: str | None,
    details: dict[str, Any] | None,
    result_metadata: dict[str, Any] | None,
) -> Operation:
    """Fold a request into the key's ``pending`` operation (locked by the caller).

    ``payload`` and ``result_metadata`` merge key by key (``merge_non_null``); a manual request
    makes the operation manual and releases its park (sent once the transaction commits).
    """
    fields = ["payload", "updated_at"]
    pending.payload = merge_non_null(pending.payload, payload)
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
        pending.result_metadata = merge_non_null(pending.result_metadata, result_metadata)
        fields.append("result_metadata")
    pending.updated_at = ClockTimestamp()
    pending.save(update_fields=fields)
    pending.refresh_from_db()
    if release:
        dispatch.operation_send_on_commit(operation_id=pending.id)
    return pending


# --------------------------------------------------------------------------------------------
# Parking and release
# --------------------------------------------------------------------------------------------


_PARK_SQL = """
UPDATE operations_operation
   SET next_retry_at = %s, error_message = %s, dispatched_at = NULL,
       result_metadata = result_metadata || jsonb_build_object(%s, %s::jsonb),
       updated_at = clock_timestamp()
 WHERE id = %s AND status = 'pending'
   AND (next_retry_at IS NULL OR next_retry_at <= clock_timestamp())
"""


def operation_park(
    *, operation_id: uuid.UUID | str, until: datetime, parked_by: dict[str, Any]
) -> bool:
    """Park a due pending operation until ``until`` (a handler's ``hold``): not an attempt,
    ``retry_count`` unchanged; ``error_message`` and ``result_metadata.parked_by`` say why
    (``parked_by["message"]``). False when it is no longer pending and due."""
    with connection.cursor() as cursor:
        cursor.execute(_PARK_SQL, [until, str(parked_by.get("message") or "parked"), PARKED_BY,
                                   json.dumps(parked_by, default=str), operation_id])
        return cursor.rowcount == 1


def operations_release_parked(*, bank_id: str, reason: str) -> list[uuid.UUID]:
    """Release (send now) the bank's pending operations parked by ``reason`` (``parked_by``):
    what held them back has changed. A handler whose ``hold`` still applies parks one again."""
    with transaction.atomic():
        ids = list(
            Operation.objects.filter(
                bank_id=bank_id, status=PENDING, next_retry_at__isnull=False,
                **{f"result_metadata__{PARKED_BY}__reason": reason},
            ).values_list("id", flat=True)
        )
        if ids:
            Operation.objects.filter(id__in=ids, status=PENDING).update(
                next_retry_at=None, updated_at=ClockTimestamp()
            )
        for op_id in ids:
            dispatch.operation_send_on_commit(operation_id=op_id)
    return ids


def operation_release(*, operation_id: uuid.UUID | str) -> bool:
    """Release a park: clear ``next_retry_at`` and send now. False if not pending."""
    with transaction.atomic():
        updated = Operation.objects.filter(id=operation_id, status=PENDING).update(
            next_retry_at=None, updated_at=ClockTimestamp()
        )
        if updated:
            dispatch.operation_send_on_commit(operation_id=operation_id)
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
            dispatch.operation_send_on_commit(operation_id=op_id)
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
            on_cancelled_on_commit(op_id)
    return ids


def operations_defer_automatic(
    *, dedupe_key: str, until: datetime, parked_by: dict[str, Any]
) -> list[uuid.UUID]:
    """Park the key's pending *automatic* operation until at least ``until`` (a backoff after
    failures), saying why in ``result_metadata.parked_by``; a later park it had is kept.

    The same lock order as ``operations_cancel_parked``: a failed job's transaction calls this
    from its handler hook, before it locks its own row.
    """
    with transaction.atomic():
        list(Operation.objects.select_for_update().filter(dedupe_key=dedupe_key,
                                                          status=PROCESSING).values_list("id"))
        ops = list(Operation.objects.select_for_update().filter(
            dedupe_key=dedupe_key, status=PENDING, automatic=True))
        for op in ops:
            if op.next_retry_at is None or op.next_retry_at < until:
                op.next_retry_at = until
                op.result_metadata = {**(op.result_metadata or {}), PARKED_BY: parked_by}
                op.error_message = str(parked_by.get("message") or "parked")
                op.dispatched_at = None
                op.updated_at = ClockTimestamp()
                op.save(update_fields=["next_retry_at", "result_metadata", "error_message",
                                       "dispatched_at", "updated_at"])
    return [op.id for op in ops]


def on_cancelled_on_commit(operation_id: uuid.UUID) -> None:
    """Call the handler's ``on_cancelled`` hook once the current transaction commits."""
    def call() -> None:
        call_on_cancelled(operation_id=operation_id)

    transaction.on_commit(call, robust=True)
