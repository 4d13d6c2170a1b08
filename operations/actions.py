"""The API's actions on an operation (docs/behaviour.md#the-operations-api), also the admin's:
cancel a pending one, retry a
failed or cancelled one (or release a parked one), delete a finished one. Each is a
compare-and-set on the row's status in one short transaction.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import Conflict, NotFound
from hindsight.infra.vocabulary import TERMINAL_STATUSES
from operations import dispatch
from operations.models import (
    CANCELLED,
    FAILED,
    PENDING,
    SUPERSEDED_BY,
    Operation,
)
from operations.queue import on_cancelled_on_commit, operation_fold
from operations.selectors import operation_report


def _without_superseded_by(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (metadata or {}).items() if k != SUPERSEDED_BY}


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
        on_cancelled_on_commit(op.id)
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
            dispatch.operation_send_on_commit(operation_id=op.id)
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
            folded = operation_fold(follower, automatic=False, payload=op.payload,
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
        dispatch.operation_send_on_commit(operation_id=op.id)
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
