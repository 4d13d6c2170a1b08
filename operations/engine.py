"""Running one operation: lock, claim, heartbeat, handler under its wall timeout, finish,
release, then hand the key to its next pending operation. Also the beat entry points.

Order matters and is deliberate:

1. cheap read: not pending or parked → nothing to do (the message is acked);
2. per-key Redis lock (non-blocking): held → leave the operation pending, the finishing job
   of the key dispatches it;
3. claim = compare-and-set pending → processing + a new fence from the Postgres lease row
   (the processing unique index refuses a second running job even without Redis);
4. heartbeat thread: extends the lock's TTL and stamps ``heartbeat_at`` (and, if recovery took
   the operation back meanwhile, releases the lock and sends the retry);
5. ``handler.run(job)`` under the wall timeout (``Job.under_wall_timeout``, the mechanism in
   ``operations.walltimeout``); completion is fenced (``Job.finishing``, which disarms it);
6. failure → retry / follower merge / failed (``operations.leases``), then the handler's
   hooks; superseded (``FenceLost``, or a failure after the key's fence moved on) →
   ``cancelled``, not an attempt;
7. release the lock, **then** dispatch the key's next due pending operation.

A worker process that dies mid-job (SIGKILL, OOM) is recovered at once by the worker's main
process (``operation_worker_lost``, called from ``operations.tasks.RunRequest``); a
threads-pool worker process that dies is recovered by its peers' liveness watch, through the
same function (``operations.liveness``); the beat sweep (``recover``) is the backstop for a host
that is gone with its main process.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from redis.exceptions import LockError

from hindsight.infra import metrics
from hindsight.infra.db import connection_release_to_pool
from operations import dispatch, registry
from operations.errors import (
    AttemptInterrupted,
    FenceLost,
    OperationFailure,
    WallTimeout,
    WorkerLost,
)
from operations.hooks import call_hook
from operations.jobs import Job
from operations.leases import (
    BUSY,
    FailureRecord,
    next_pending_of_key,
    operation_claim,
    operation_heartbeat,
    operation_record_failure,
    operation_supersede,
)
from operations.locks import key_lock, key_lock_break, lock_token
from operations.models import PENDING, PROCESSING, Operation, is_own_key, lease_key_for
from operations.queue import operation_park, operations_release_due
from operations.recovery import RecoveryReport, operation_recover_lost, operations_recover
from operations.registry import Pending

log = logging.getLogger(__name__)


class _Heartbeat(threading.Thread):
    """Extends the key lock and stamps ``heartbeat_at`` every ``heartbeat_seconds``.

    Once the database says the operation is no longer this job's (recovery took it back from a
    worker whose heartbeat came late), the heartbeat stops, releases the lock and sends the
    key's due pending operation (the recovered one, whose own message likely met the lock and
    was consumed), so its next attempt does not wait for a job whose writes the fence already
    refuses. (An edit's fence bump leaves the job ``processing`` until its write is refused;
    the operation queued behind it could not claim before that anyway.)
    """

    def __init__(self, job: Job, lock: Any):
        super().__init__(name=f"heartbeat-{job.id}", daemon=True)
        self.job = job
        self.lock = lock
        self.stopped = threading.Event()
        self.lock_lost = False
        self.lease_lost = False

    def run(self) -> None:
        cfg = settings.HINDSIGHT
        try:
            while not self.stopped.wait(cfg.heartbeat_seconds):
                try:
                    self.lock.extend(cfg.lock_ttl_seconds, replace_ttl=True)
                except LockError:
                    # Someone else holds it now; the fence still protects our writes.
                    self.lock_lost = True
                except redis.RedisError:
                    log.warning("heartbeat: cannot extend lock of %s", self.job.key, exc_info=True)
                try:
                    ours = operation_heartbeat(
                        operation_id=self.job.id, fence=self.job.fence, key=self.job.key
                    )
                except Exception:
                    # Unknown (a broken connection is dropped and reopened next beat): keep
                    # the lock, the fence protects the writes either way.
                    log.warning("heartbeat: cannot stamp %s", self.job.id, exc_info=True)
                    ours = True
                connection_release_to_pool()
                if not ours:
                    self.lease_lost = True
                    try:
                        self.lock.release()
                    except (LockError, redis.RedisError):
                        pass  # expired or taken: nothing of ours to release
                    _send_next_of_key(self.job.key, self.job.id)
                    return
        finally:
            connection.close()  # this thread's own connection

    def stop(self) -> None:
        self.stopped.set()
        if self is not threading.current_thread():
            self.join(timeout=10)

    def abandon(self) -> None:
        """Stop beating, from another thread (the wall-timeout watchdog, for a stuck slot): the
        operation falls silent and the sweep recovers it, fence bumped."""
        self.stopped.set()


def _send_next_of_key(key: str, operation_id: str) -> None:
    """Send the key's due pending operation, if any (a key of its own: the operation itself)."""
    try:
        if is_own_key(key):
            next_id = (
                Operation.objects.filter(id=operation_id, status=PENDING)
                .values_list("id", flat=True).first()
            )
        else:
            next_id = next_pending_of_key(key=key)
        if next_id is not None:
            dispatch.operation_send(operation_id=next_id)
    except Exception:  # recovery re-sends what this could not
        log.warning("cannot hand %s on", key, exc_info=True)


def _wall_seconds(handler: Any, job: Job) -> float | None:
    """``handler.wall_timeout_seconds``: a number, or a method taking the job."""
    value = getattr(handler, "wall_timeout_seconds", None)
    if callable(value):
        value = value(job)
    return float(value) if value is not None else None


def _drop_broken_connection() -> None:
    # Outside a transaction only: inside one (tests) Django would drop a healthy connection.
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


def _run_handler(handler: Any, job: Job, heartbeat: _Heartbeat | None = None) -> str:
    """Run the handler and record how the attempt ended. Returns a label (logs, tests)."""
    try:
        with job.under_wall_timeout(
            _wall_seconds(handler, job), on_stuck=heartbeat.abandon if heartbeat else None
        ):
            handler.run(job)
        if not job.finished and Operation.objects.filter(
            id=job.id, status=PROCESSING, fence=job.fence
        ).exists():
            # The handler did not complete through the fence: complete it now, fenced too.
            with job.finishing():
                pass
        return "completed"
    except FenceLost as exc:
        _drop_broken_connection()
        superseded = operation_supersede(
            operation_id=job.id,
            fence=job.fence,
            message=f"superseded: an edit or a newer claim took over its key ({exc})",
        )
        if superseded:
            call_hook(handler, "on_cancelled", job)
        return "superseded"
    except Exception as exc:
        cause = exc.cause if isinstance(exc, AttemptInterrupted) else exc
        if isinstance(cause, WallTimeout) and not connection.in_atomic_block:
            # The alarm may have interrupted a query mid-flight: start from a clean connection.
            connection.close()
        _drop_broken_connection()
        failure = exc if isinstance(exc, OperationFailure) else None
        message = failure.message if failure else f"{type(exc).__name__}: {exc}"
        details, result_metadata = job.record(failure)
        record = operation_record_failure(
            operation_id=job.id,
            fence=job.fence,
            exc=exc,
            message=message,
            retryable=failure.retryable if failure else True,
            details=details,
            result_metadata=result_metadata,
        )
        if record is None:
            return "lost"
        if record.superseded:
            call_hook(handler, "on_cancelled", job)
            return "superseded"
        if handler is not None:
            call_hook(handler, "on_attempt_failed", job, exc, final=record.final)
        log.info("operation %s attempt %d failed (%s): %s", job.id, job.attempt,
                 "final" if record.final else f"retry as {record.retried_as}", message)
        return "failed" if record.final else "retrying"


def _held(operation_id: uuid.UUID, row: Mapping[str, Any]) -> bool:
    """Ask the handler's ``hold`` about a due operation before it is claimed; park it when the
    handler holds it back. A hold that fails is logged and the operation runs."""
    hold_of = getattr(registry.get_handler(row["operation_type"]), "hold", None)
    if hold_of is None:
        return False
    pending = Pending(id=operation_id, bank_id=row["bank_id"],
                      operation_type=row["operation_type"], automatic=row["automatic"])
    try:
        hold = hold_of(pending)
    except Exception:
        log.exception("hold of %s %s failed; it runs", row["operation_type"], operation_id)
        return False
    if hold is None:
        return False
    parked = operation_park(operation_id=operation_id, until=hold.until, parked_by=hold.parked_by)
    if parked:
        metrics.operations_held_total.labels(
            operation_type=row["operation_type"], reason=str(hold.parked_by.get("reason"))
        ).inc()
        log.info("operation %s parked until %s: %s", operation_id, hold.until.isoformat(),
                 hold.parked_by.get("message"))
    return parked


def worker_holder(*, hostname: str | None, pid: int | None, task_id: str | None) -> str:
    """The name a pool process claims with (lease ``holder``, lock token): host, pid, message.

    The worker's main process rebuilds it for a child it saw die (``operation_worker_lost``).
    """
    return f"{hostname or 'local'}:{pid}:{task_id or '-'}"


def operation_execute(*, operation_id: str, holder: str) -> str:
    """The body of the ``operations.run`` task. Returns a label of what happened."""
    try:
        op_uuid = uuid.UUID(str(operation_id))
    except ValueError:
        return "invalid"
    row = (
        Operation.objects.filter(id=op_uuid)
        .values("status", "dedupe_key", "operation_type", "bank_id", "automatic").first()
    )
    if row is None or row["status"] != PENDING:
        return "skipped"
    key = lease_key_for(dedupe_key=row["dedupe_key"], operation_id=op_uuid)
    lock = key_lock(key)
    try:
        if not lock.acquire(blocking=False, token=lock_token(holder)):
            metrics.lock_contention_total.labels(operation_type=row["operation_type"]).inc()
            return "locked"
    except redis.RedisError:
        log.warning("cannot take the lock of %s; recovery will re-send %s", key, op_uuid)
        return "lock-unavailable"

    heartbeat: _Heartbeat | None = None
    outcome = "skipped"
    try:
        if _held(op_uuid, row):
            return "parked"
        claimed = operation_claim(operation_id=op_uuid, holder=holder, lease_key=key)
        if claimed is None:
            return "skipped"
        if claimed == BUSY:
            # The database's one-running-job index refused: contention the lock did not catch.
            metrics.lock_contention_total.labels(operation_type=row["operation_type"]).inc()
            return "busy"
        assert isinstance(claimed, Operation)
        job = Job(claimed, fence=claimed.fence, key=key)
        heartbeat = _Heartbeat(job, lock)
        heartbeat.start()
        handler = registry.get_handler(claimed.operation_type)
        if handler is None:
            operation_record_failure(
                operation_id=job.id, fence=job.fence, retryable=False,
                message=f"no handler registered for operation type {claimed.operation_type!r}",
            )
            outcome = "failed"
        else:
            outcome = _run_handler(handler, job, heartbeat)
    finally:
        # A pooled connection goes back before waiting for the heartbeat thread, which may be
        # waiting for one itself (a threads-pool worker's slots share a few).
        connection_release_to_pool()
        if heartbeat is not None:
            heartbeat.stop()
        try:
            lock.release()
        except (LockError, redis.RedisError):
            pass  # expired or Redis gone: the TTL frees it
    if not is_own_key(key):
        next_id = next_pending_of_key(key=key)
        if next_id is not None:
            dispatch.operation_send(operation_id=next_id)
    return outcome


def operation_worker_lost(*, operation_id: str, holder: str, cause: str) -> FailureRecord | None:
    """A worker's main process saw the pool process ``holder`` die while running the job.

    Frees the key's Redis lock if the dead process still holds it (else the retry's message
    would meet it and wait out the TTL), then recovers the operation at once through the normal
    path (``recovery.operation_recover_lost``: attempt counted, fence bumped, merge rule) and
    runs the handler's after-commit hook. Never raises: what fails here the sweep catches.
    """
    try:
        op_uuid = uuid.UUID(str(operation_id))
    except ValueError:
        return None
    try:
        row = Operation.objects.filter(id=op_uuid).values("dedupe_key").first()
        if row is None:
            return None
        key = lease_key_for(dedupe_key=row["dedupe_key"], operation_id=op_uuid)
        try:
            key_lock_break(key, holder=holder)
        except redis.RedisError:
            log.warning("cannot free the lock of %s held by %s", key, holder, exc_info=True)
        record = operation_recover_lost(operation_id=op_uuid, holder=holder, cause=cause)
        if record is not None:
            log.warning("operation %s: %s; recovered at once (%s)", op_uuid, cause,
                        "superseded: the key handed on" if record.superseded
                        else f"retry as {record.retried_as}" if record.retried_as else "final")
            _after_recovery(record)
        return record
    except Exception:
        log.exception("fast recovery of operation %s failed; the sweep will recover it",
                      operation_id)
        return None
    finally:
        # The worker's main process: no connection left idling (or inherited by the next
        # child). Inside a transaction (tests) the connection is the caller's to keep.
        if not connection.in_atomic_block:
            connection.close()


def release_due() -> list[uuid.UUID]:
    """Beat: send parked operations whose ``next_retry_at`` has passed (database time)."""
    return operations_release_due()


def recover() -> RecoveryReport:
    """Beat: recover silent processing operations and re-send lost messages."""
    report = operations_recover()
    for record in report.recovered:
        metrics.operations_recovered_total.labels(
            operation_type=record.operation.operation_type
        ).inc()
        _after_recovery(record)
    return report


def _after_recovery(record: FailureRecord) -> None:
    """The handler's after-commit hook; a superseded job's key is handed to its pending
    operation (the edit's follow-up, whose message met the dead job's lock or claim)."""
    op = record.operation
    if record.superseded:
        _send_next_of_key(op.lease_key, str(op.id))
    handler = registry.get_handler(op.operation_type)
    if handler is None:
        return
    job = Job(op, fence=op.fence, key=op.lease_key)
    if record.superseded:
        call_hook(handler, "on_cancelled", job)
        return
    exc = WorkerLost(op.error_message or "worker lost")
    call_hook(handler, "on_attempt_failed", job, exc, final=record.final)
