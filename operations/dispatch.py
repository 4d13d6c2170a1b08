"""Publishing an operation's id to the broker (after commit, with a short retry).

A publish that still fails is logged and left to recovery: ``dispatched_at`` then stays
unset (or old) and ``operations.recover`` re-sends the operation. Sending twice is harmless:
the worker claims by compare-and-set.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial

from celery import current_app
from django.conf import settings
from django.db import connection, transaction

from hindsight.infra.db import ClockTimestamp, execute_without_flush_wait
from operations.models import PENDING, Operation
from operations.registry import get_handler

log = logging.getLogger(__name__)

# The task that runs an operation (``operations.tasks.run_operation``), published by name.
RUN_TASK = "operations.run"


def operation_queue(*, operation_id: uuid.UUID | str, operation_type: str | None = None) -> str:
    """The Celery queue of an operation's message: ``HINDSIGHT_API_WORKER_CPU_QUEUE``, when set,
    for a type whose handler says its work is CPU-heavy (``cpu_heavy``: retain, consolidation),
    else the task queue. The type is read from the row when the caller does not give it."""
    cfg = settings.HINDSIGHT
    if not cfg.cpu_queue:
        return cfg.task_queue
    if operation_type is None:
        operation_type = (Operation.objects.filter(id=operation_id)
                          .values_list("operation_type", flat=True).first())
    handler = get_handler(operation_type) if operation_type else None
    return cfg.cpu_queue if getattr(handler, "cpu_heavy", False) else cfg.task_queue


def operation_send(*, operation_id: uuid.UUID | str, operation_type: str | None = None) -> bool:
    """Publish now, to ``operation_queue``; ``dispatched_at`` says when (null when publishing
    failed). Never raises. ``operation_type``: the operation's, when the caller has it."""
    cfg = settings.HINDSIGHT
    # Stamp first (so a worker that claims at once finds it set), clear it if publishing fails.
    _stamp(operation_id, ClockTimestamp())
    try:
        current_app.tasks[RUN_TASK].apply_async(
            args=[str(operation_id)],
            queue=operation_queue(operation_id=operation_id, operation_type=operation_type),
            retry=cfg.publish_retries > 0,
            retry_policy={
                "max_retries": cfg.publish_retries,
                "interval_start": 0.0,
                "interval_step": 0.2,
                "interval_max": 0.5,
            },
        )
    except Exception:  # the broker is down: recovery re-sends, the submit must not fail
        log.warning("publishing operation %s failed; recovery will re-send it", operation_id,
                    exc_info=True)
        _stamp(operation_id, None)
        return False
    return True


# Outside a transaction the stamp commits asynchronously (the setting is read at the commit of
# the statement's implicit transaction): ``dispatched_at`` only tells recovery when a message
# was last sent, and one lost with a PostgreSQL crash means at worst a message sent again (the
# worker claims by compare-and-set) or sent again later. Waiting for its WAL flush held every
# refresh request (and every hand-on to a key's next operation) a few milliseconds more.
_STAMP_SQL = (
    f"UPDATE {Operation._meta.db_table} SET dispatched_at = {{value}} "
    "WHERE id = %s AND status = 'pending'"
)


def _stamp(operation_id: uuid.UUID | str, value: ClockTimestamp | None) -> None:
    try:
        if connection.in_atomic_block:
            Operation.objects.filter(id=operation_id, status=PENDING).update(dispatched_at=value)
            return
        execute_without_flush_wait(
            _STAMP_SQL.format(value="clock_timestamp()" if value is not None else "NULL"),
            [str(operation_id)])
    except Exception:
        log.warning("stamping dispatched_at of %s failed", operation_id, exc_info=True)


def operation_send_on_commit(
    *, operation_id: uuid.UUID | str, operation_type: str | None = None
) -> None:
    """Publish once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(
        partial(operation_send, operation_id=operation_id, operation_type=operation_type),
        robust=True)
