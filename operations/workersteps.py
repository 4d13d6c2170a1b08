"""Celery worker bootsteps of the engine.

``ReapDeadPoolProcesses``: notice a dead pool process within a second. Celery's prefork pool
learns that a child exited from the child's sentinel, but when the sentinel fires before the
child can be reaped it waits for its next ``maintain_pool`` timer, every 5 s; only then does the
job get its ``WorkerLostError`` and the main process recover it (``operations.tasks.RunRequest``).
Running the same maintenance twice a second bounds that wait.

``ProbeHeartbeat``: the worker probe's heartbeat file (``operations.probe``), touched from the
worker's event loop, removed when the worker stops.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from celery import bootsteps

from operations import probe

log = logging.getLogger(__name__)

REAP_INTERVAL_SECONDS = 0.5


class ReapDeadPoolProcesses(bootsteps.StartStopStep):
    requires = ("celery.worker.components:Pool",)

    def start(self, worker: Any) -> None:
        maintain = getattr(worker.pool, "maintain_pool", None)
        hub = getattr(worker, "hub", None)
        if maintain is not None and hub is not None:
            hub.call_repeatedly(REAP_INTERVAL_SECONDS, maintain)


class ProbeHeartbeat(bootsteps.StartStopStep):
    """Touch this node's heartbeat file from the event loop (``hub``), so it stays young only
    while the loop that consumes tasks and answers control messages turns. The first touch is
    the loop's first beat: a worker that never reached its broker has no file yet."""

    requires = ("celery.worker.components:Hub",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.path: Path | None = None

    def start(self, worker: Any) -> None:
        from django.conf import settings  # noqa: PLC0415 - configured once the worker starts

        hub = getattr(worker, "hub", None)
        if hub is None:  # a worker without an event loop: nothing to beat from
            log.warning("worker probe: no event loop in this worker, so no heartbeat file")
            return
        path = probe.heartbeat_path(probe.probe_dir(settings.HINDSIGHT.worker_probe_dir),
                                    worker.hostname)
        self.path = path
        hub.call_soon(self._beat)  # on the loop's first turn: ready passes the probe at once
        hub.call_repeatedly(probe.HEARTBEAT_INTERVAL_SECONDS, self._beat)

    def _beat(self) -> None:
        if self.path is None:
            return
        try:
            probe.heartbeat_touch(self.path)
        except OSError as exc:  # a full or read-only disk fails the probe, not the worker
            log.warning("worker probe: cannot touch %s: %s", self.path, exc)

    def stop(self, worker: Any) -> None:
        path, self.path = self.path, None  # a timer still queued touches nothing now
        if path is not None:
            try:
                probe.heartbeat_remove(path)
            except OSError as exc:
                log.warning("worker probe: cannot remove %s: %s", path, exc)

    shutdown = stop
