"""celery-beat as a thread of a worker (``celery -A hindsight worker --beat-thread``).

A beat process of its own holds a Python interpreter (about 70 MB PSS) to keep a clock that
wakes every few seconds and publishes a due task. Where one worker is the whole pool — ``make run``
— the same clock runs as a thread of that worker instead: the same ``celery.beat.Service`` and
django-celery-beat's database scheduler as the ``beat`` command, in the worker's interpreter.
Deployments with several workers keep one ``beat`` process (docs/operating.md): two clocks
would publish every tick twice.

Celery's own ``-B`` forks beat from the worker after the worker has started threads and opened
its connection pool; a fork that copies a pool's half-held locks is what this avoids.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import click
from celery import bootsteps
from celery.beat import Service

logger = logging.getLogger("hindsight")
# Named, not imported: the scheduler module loads Django models, ready only once the worker runs.
SCHEDULER = "hindsight.project.beat_scheduler:PooledDatabaseScheduler"


class BeatThread(bootsteps.StartStopStep):
    """Runs the beat service in a daemon thread from the worker's start to its stop."""

    label = "beat thread"

    def __init__(self, worker: Any, beat_thread: bool = False, **kwargs: Any) -> None:
        self.enabled = bool(beat_thread)
        self.service: Service | None = None
        self.thread: threading.Thread | None = None
        super().__init__(worker, **kwargs)

    def start(self, worker: Any) -> None:
        self.service = Service(worker.app, scheduler_cls=SCHEDULER)
        self.thread = threading.Thread(target=self.service.start, name="beat", daemon=True)
        self.thread.start()

    def stop(self, worker: Any) -> None:
        if self.service is not None:
            # The loop notices within one tick (a few seconds) and saves the schedule; the worker
            # does not wait for it: the thread is a daemon and every due run is in the database.
            self.service.stop(wait=False)


def install(app: Any) -> None:
    """Register the step and its ``--beat-thread`` option on ``app``'s worker."""
    app.user_options["worker"].add(click.Option(
        ["--beat-thread"], is_flag=True, default=False,
        help="Also run celery-beat, as a thread of this worker (one worker only)."))
    app.steps["worker"].add(BeatThread)
