"""Celery tasks of the operations engine: thin wrappers around ``operations.engine``.

``operations.run`` takes the operation id only; it is idempotent (claim by compare-and-set),
``acks_late`` with ``reject_on_worker_lost`` (a message is not lost with its worker), and the
worker prefetches one message at a time (settings).

Its ``Request`` class runs in the worker's *main* process: when a pool process dies mid-job
(Celery reports ``WorkerLostError`` there, ``worker_lost_wait`` after the exit), it recovers the
operation at once (``engine.operation_worker_lost``) before the message is requeued, instead of
leaving it ``processing`` until the beat sweep's silence threshold.
"""

from __future__ import annotations

import os
from typing import Any

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import WorkerLostError
from celery import Task, shared_task
from celery.worker.request import Request

from operations import engine
from operations.dispatch import RUN_TASK


class RunRequest(Request):
    """``operations.run``'s request in the worker's main process."""

    def on_failure(self, exc_info: Any, send_failed_event: bool = True,
                   return_ok: bool = False) -> None:
        exc = exc_info.exception
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        if isinstance(exc, WorkerLostError) and self.worker_pid is not None and self.args:
            engine.operation_worker_lost(
                operation_id=str(self.args[0]),
                holder=engine.worker_holder(hostname=self.hostname, pid=self.worker_pid,
                                            task_id=self.id),
                cause=f"pool process {self.worker_pid} exited ({exc})",
            )
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)


class RunTask(Task):
    Request = RunRequest


@shared_task(
    name=RUN_TASK,
    base=RunTask,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_operation(self: Task, operation_id: str) -> str:
    holder = engine.worker_holder(hostname=self.request.hostname, pid=os.getpid(),
                                  task_id=self.request.id)
    return engine.operation_execute(operation_id=operation_id, holder=holder)


@shared_task(name="operations.release_due", ignore_result=True)
def release_due() -> int:
    return len(engine.release_due())


@shared_task(name="operations.recover", ignore_result=True)
def recover() -> dict[str, int]:
    report = engine.recover()
    return {"recovered": len(report.recovered), "redispatched": len(report.redispatched)}
