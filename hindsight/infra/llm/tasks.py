"""Celery task of the LLM request log: the retention purge, run by celery-beat every
``HINDSIGHT_API_LLM_REQUEST_LOG_PURGE_INTERVAL_SECONDS`` (its schedule: ``operations.schedules``)."""

from __future__ import annotations

from celery import shared_task

from hindsight.infra.llm.log import llm_requests_purge


# Idempotent: deleting what is past the retention twice deletes nothing the second time.
@shared_task(name="llm.purge_requests", ignore_result=True)
def purge_requests() -> int:
    return llm_requests_purge()
