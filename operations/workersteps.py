"""A Celery worker bootstep of the engine: notice a dead pool process within a second.

Celery's prefork pool learns that a child exited from the child's sentinel, but when the
sentinel fires before the child can be reaped it waits for its next ``maintain_pool`` timer,
every 5 s; only then does the job get its ``WorkerLostError`` and the main process recover it
(``operations.tasks.RunRequest``). Running the same maintenance twice a second bounds that wait.
"""

from __future__ import annotations

from typing import Any

from celery import bootsteps

REAP_INTERVAL_SECONDS = 0.5


class ReapDeadPoolProcesses(bootsteps.StartStopStep):
    requires = ("celery.worker.components:Pool",)

    def start(self, worker: Any) -> None:
        maintain = getattr(worker.pool, "maintain_pool", None)
        hub = getattr(worker, "hub", None)
        if maintain is not None and hub is not None:
            hub.call_repeatedly(REAP_INTERVAL_SECONDS, maintain)
