"""The ``Job`` a handler receives: the claimed operation, its fence, the attempt's record, and
the fenced finish.

A job may write only while its key's lease still carries the fence it was claimed with. The
check locks the lease row (``SELECT … FOR UPDATE``) inside the writer's transaction, so a
concurrent ``lease_bump`` (an edit that supersedes the job) either commits before the check —
and the job's writes are refused — or waits until the job's transaction has committed.

The attempt's record is what the operation row stores of it: ``details`` and ``result_metadata``
(written by the handler) and, for a handler that counts its LLM requests
(``llm_accounting``), their tally under ``result_metadata["llm"]``. ``record`` assembles it, the
same way for the completion and for a failed attempt.

The job runs under its wall timeout (``under_wall_timeout``, ``operations.walltimeout``);
``finishing`` disarms it before the final write: the clock bounds the work, not the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.llm.context import LLMTally, llm_context
from operations import walltimeout
from operations.errors import FenceLost, OperationFailure
from operations.models import COMPLETED, PROCESSING, Lease, Operation, is_own_key


class Job:
    def __init__(self, operation: Operation, *, fence: int, key: str):
        self.operation = operation
        self.payload: dict[str, Any] = dict(operation.payload or {})
        self.fence = fence
        self.key = key
        # Filled by the handler; stored with the completion (and with a failed attempt).
        self.result_metadata: dict[str, Any] = dict(operation.result_metadata or {})
        self.details: dict[str, Any] = dict(operation.details or {})
        # The job's LLM requests, counted while the handler is inside ``llm_accounting``.
        self.llm: LLMTally | None = None
        self.finished = False
        self._alarm = walltimeout.NO_ALARM

    # Convenience views of the snapshot.
    @property
    def id(self) -> str:
        return str(self.operation.id)

    @property
    def bank_id(self) -> str:
        return self.operation.bank_id

    @property
    def operation_type(self) -> str:
        return self.operation.operation_type

    @property
    def automatic(self) -> bool:
        return self.operation.automatic

    @property
    def attempt(self) -> int:
        """1 for the first attempt, 2 for the first retry, …"""
        return self.operation.retry_count + 1

    def __repr__(self) -> str:
        return f"<Job {self.operation_type} {self.id} key={self.key} fence={self.fence}>"

    # -- the attempt's record ------------------------------------------------------------------

    @contextmanager
    def llm_accounting(self) -> Iterator[LLMTally]:
        """Log the block's LLM requests under this job (bank, operation type, id) and count
        them: the record stores the tally, with the completion or with the failed attempt."""
        with llm_context(bank_id=self.bank_id, operation=self.operation_type,
                         operation_id=self.id) as tally:
            self.llm = tally
            yield tally

    def record(
        self, failure: OperationFailure | None = None
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """``(details, result_metadata)`` as the operation row stores them: the handler's, or
        those a failure carries instead, plus the LLM tally."""
        details = failure.details if failure and failure.details is not None else self.details
        metadata = (failure.result_metadata if failure and failure.result_metadata is not None
                    else self.result_metadata)
        if self.llm is not None:
            metadata = {**metadata, "llm": self.llm.as_dict()}
        return details or None, metadata

    # -- the wall timeout ------------------------------------------------------------------------

    @contextmanager
    def under_wall_timeout(self, seconds: float | None, *,
                           on_stuck: Callable[[], None] | None = None) -> Iterator[None]:
        """Run the block (the handler) under the wall timeout; ``finishing`` disarms it.
        ``on_stuck``: what gives the job up if it is still running long after its clock (the
        engine stops its heartbeat; ``operations.walltimeout``)."""
        with walltimeout.armed(seconds, on_stuck=on_stuck) as alarm:
            self._alarm = alarm
            try:
                yield
            finally:
                self._alarm = walltimeout.NO_ALARM

    # -- the fenced finish -----------------------------------------------------------------------

    def check_fence(self) -> None:
        """Raise ``FenceLost`` unless the lease still carries this job's fence.

        Must run inside ``transaction.atomic()``: the lease row stays locked until that
        transaction ends, so no bump can slip between this check and the commit.
        """
        if not connection.in_atomic_block:
            raise RuntimeError("Job.check_fence must run inside transaction.atomic()")
        current = (
            Lease.objects.select_for_update()
            .filter(key=self.key)
            .values_list("fence", flat=True)
            .first()
        )
        if current != self.fence:
            raise FenceLost(
                f"operation {self.id} lost its fence on {self.key!r} "
                f"(job fence {self.fence}, lease fence {current})"
            )

    def complete_in_transaction(self, *, _fence_checked: bool = False) -> None:
        """Check the fence and mark the operation completed, in the caller's transaction.

        For handlers whose writes run in a transaction of their own (async retain passes this
        as ``before_commit``): the writes and the completion commit together or not at all.
        """
        self._alarm.disarm()  # the final write is not cut short
        if not _fence_checked:
            self.check_fence()
        details, result_metadata = self.record()
        updated = Operation.objects.filter(
            id=self.operation.id, status=PROCESSING, fence=self.fence
        ).update(
            status=COMPLETED,
            completed_at=ClockTimestamp(),
            updated_at=ClockTimestamp(),
            next_retry_at=None,
            error_message=None,
            result_metadata=result_metadata,
            details=details,
        )
        if updated != 1:
            # Recovered or cancelled meanwhile: roll the caller's writes back with it.
            raise FenceLost(f"operation {self.id} is no longer processing under fence {self.fence}")
        if is_own_key(self.key):
            # A key of its own is never used again once the operation is done.
            Lease.objects.filter(key=self.key).delete()
        transaction.on_commit(self._mark_finished)

    @contextmanager
    def finishing(self) -> Iterator[Job]:
        """``with job.finishing():`` — one transaction: fence check, your writes, completion.

        Raises ``FenceLost`` (nothing written) when the job was superseded.
        """
        with transaction.atomic():
            self._alarm.disarm()  # the clock bounds the work, not the commit
            self.check_fence()
            yield self
            # The lease row stays locked since the check above: no bump can have landed.
            self.complete_in_transaction(_fence_checked=True)

    def _mark_finished(self) -> None:
        self.finished = True
