"""The ``Job`` a handler receives: the claimed operation, its fence, and the fenced finish.

A job may write only while its key's lease still carries the fence it was claimed with. The
check locks the lease row (``SELECT … FOR UPDATE``) inside the writer's transaction, so a
concurrent ``lease_bump`` (an edit that supersedes the job) either commits before the check —
and the job's writes are refused — or waits until the job's transaction has committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from hindsight.db import ClockTimestamp
from operations.errors import FenceLost
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
        self.finished = False
        self._before_finishing: list[Callable[[], None]] = []

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
        self._run_before_finishing()
        if not _fence_checked:
            self.check_fence()
        updated = Operation.objects.filter(
            id=self.operation.id, status=PROCESSING, fence=self.fence
        ).update(
            status=COMPLETED,
            completed_at=ClockTimestamp(),
            updated_at=ClockTimestamp(),
            next_retry_at=None,
            error_message=None,
            result_metadata=self.result_metadata,
            details=self.details or None,
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
            self._run_before_finishing()
            self.check_fence()
            yield self
            # The lease row stays locked since the check above: no bump can have landed.
            self.complete_in_transaction(_fence_checked=True)

    def before_finishing(self, callback: Callable[[], None]) -> None:
        """Engine hook: run ``callback`` once when the handler starts its final write."""
        self._before_finishing.append(callback)

    def _run_before_finishing(self) -> None:
        callbacks, self._before_finishing = self._before_finishing, []
        for callback in callbacks:
            callback()

    def _mark_finished(self) -> None:
        self.finished = True
