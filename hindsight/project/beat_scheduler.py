"""The database scheduler of the beat thread (``hindsight.project.beat_thread``)."""

from __future__ import annotations

from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from hindsight.infra.db import connection_release_to_pool


class PooledDatabaseScheduler(DatabaseScheduler):
    """django-celery-beat's scheduler, handing its database connection back after each tick: in
    a threads-pool worker the connection comes from the slots' pool, and the clock's sleep
    between ticks must not hold one of its few connections."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        try:
            return float(super().tick(*args, **kwargs))
        finally:
            connection_release_to_pool()
