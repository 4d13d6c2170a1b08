"""Celery tasks of webhooks: ``webhooks.deliver`` (one attempt of one delivery, on the webhook
queue, so a slow receiver holds a webhook slot, never a refresh's) and ``webhooks.sweep`` (beat:
due retries and lost messages; its schedule: ``operations.schedules``)."""

from __future__ import annotations

from celery import shared_task

from hindsight.webhooks.delivery import delivery_attempt
from hindsight.webhooks.outbox import DELIVER_TASK, deliveries_sweep


# Idempotent: the attempt is claimed by compare-and-set, so a redelivered message runs nothing.
@shared_task(name=DELIVER_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver(delivery_id: str) -> str:
    return delivery_attempt(delivery_id=delivery_id)


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    return deliveries_sweep()
