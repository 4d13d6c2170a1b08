"""Celery tasks of the operations engine: thin wrappers around ``operations.engine``.

``operations.run`` takes the operation id only; it is idempotent (claim by compare-and-set),
``acks_late`` with ``reject_on_worker_lost`` (a message is not lost with its worker), and the
worker prefetches one message at a time (settings).
"""

from __future__ import annotations

import os

from celery import Task, shared_task

from operations import engine
from operations.dispatch import RUN_TASK


@shared_task(
    name=RUN_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_operation(self: Task, operation_id: str) -> str:
    holder = f"{self.request.hostname or 'local'}:{os.getpid()}"
    return engine.operation_execute(operation_id=operation_id, holder=holder)


@shared_task(name="operations.release_due", ignore_result=True)
def release_due() -> int:
    return len(engine.release_due())


@shared_task(name="operations.recover", ignore_result=True)
def recover() -> dict[str, int]:
    report = engine.recover()
    return {"recovered": len(report.recovered), "redispatched": len(report.redispatched)}
