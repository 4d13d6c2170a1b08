"""Celery tasks of mental models: the cron tick that celery-beat runs every
``HINDSIGHT_API_MENTAL_MODEL_REFRESH_TICK_SECONDS`` (its schedule: ``operations.schedules``); it
also expires the proposals no one reviewed in time."""

from __future__ import annotations

from celery import shared_task

from mentalmodels.refresh.awaiting_llm import mental_models_refresh_awaiting_llm
from mentalmodels.review.services import proposals_expire
from mentalmodels.triggers_auto import mental_models_cron_tick


# Idempotent: a fire is claimed once (compare-and-set), so a late or duplicated tick queues
# nothing extra; a tick that expired in the queue is simply replaced by the next one.
@shared_task(name="mentalmodels.cron_tick", ignore_result=True)
def cron_tick() -> dict[str, int]:
    counts = mental_models_cron_tick().counts()
    # Also the catch-up of models whose refresh waited for an LLM (a worker started without
    # one may have recorded more since the LLM-configured workers started).
    counts["awaiting_llm_queued"] = len(mental_models_refresh_awaiting_llm())
    # And the proposals no one reviewed in time (docs/behaviour.md#review-before-apply).
    counts["proposals_expired"] = proposals_expire()
    return counts
