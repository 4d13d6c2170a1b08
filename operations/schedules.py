"""The engine's celery-beat schedules, declared here and created idempotently at migrate.

django-celery-beat's database scheduler reads them; editing the interval settings and running
``migrate`` again updates the rows in place (matched by name).
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django_celery_beat.models import IntervalSchedule, PeriodicTask

SCHEDULES = {
    # name (also the task name): the config attribute holding its interval in seconds
    "operations.release_due": "release_interval_seconds",
    "operations.recover": "recovery_interval_seconds",
    # docs/behaviour.md#the-cron-tick: the mental-model cron tick (mentalmodels.tasks).
    "mentalmodels.cron_tick": "mental_model_refresh_tick_seconds",
    # The LLM request log's retention purge (hindsight.infra.llm.tasks).
    "llm.purge_requests": "llm_request_log_purge_interval_seconds",
    # Webhook deliveries whose retry came due or whose message was lost (hindsight.webhooks.tasks).
    "webhooks.sweep": "webhook_sweep_interval_seconds",
}


def ensure_beat_schedules(**kwargs: Any) -> None:
    using = kwargs.get("using", "default")
    for name, attribute in SCHEDULES.items():
        every = max(1, math.ceil(getattr(settings.HINDSIGHT, attribute)))
        interval, _ = IntervalSchedule.objects.using(using).get_or_create(
            every=every, period=IntervalSchedule.SECONDS
        )
        PeriodicTask.objects.using(using).update_or_create(
            name=name,
            # No queue: beat publishes to the default queue (HINDSIGHT_API_TASK_QUEUE).
            defaults={"task": name, "interval": interval, "enabled": True, "queue": None},
        )
