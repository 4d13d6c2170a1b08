"""The outbox (docs/behaviour.md#webhooks): ``emit`` writes an event's deliveries in the caller's
transaction and publishes them once it commits, so an event is never sent for work that rolled
back, and never lost for work that committed — a publish lost with the broker or the process
is sent by the sweep (``deliveries_sweep``, run by beat every
``HINDSIGHT_API_WEBHOOK_SWEEP_INTERVAL_SECONDS``), as are the retries that came due.

An event is upstream's envelope: ``event_id`` (one per event, the same on every webhook it goes
to and on every retry), ``event``, ``bank_id``, ``operation_id``, ``status``, ``timestamp``,
``data``; keys without a value are left out, as upstream leaves them out. It goes to the bank's
enabled webhooks subscribed to it, and to the global webhook of the settings
(``HINDSIGHT_API_WEBHOOK_URL``) when that one is subscribed.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hindsight.infra.vocabulary import OperationStatus, iso_z
from hindsight.webhooks.models import Webhook, WebhookDelivery

log = logging.getLogger(__name__)

DELIVER_TASK = "webhooks.deliver"
# A publish is left to the sweep only once its own on-commit send had time to happen.
_SEND_GRACE = timedelta(seconds=2)
# The longest a webhook's timeout may be (``http_config.timeout_seconds``); an attempt running
# longer than this and a minute belonged to a worker that was lost.
MAX_TIMEOUT_SECONDS = 300
_LOST_ATTEMPT_AFTER = timedelta(seconds=MAX_TIMEOUT_SECONDS + 60)

EventData = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


def webhook_queue() -> str:
    """The Celery queue of deliveries: ``HINDSIGHT_API_WEBHOOK_QUEUE``, else ``<task queue>.webhooks``."""
    cfg = settings.HINDSIGHT
    return cfg.webhook_queue or f"{cfg.task_queue}.webhooks"


def _subscribers(bank_id: str, event: str) -> list[tuple[Webhook | None, str]]:
    hooks: list[tuple[Webhook | None, str]] = [
        (hook, hook.url) for hook in Webhook.objects.filter(
            bank_id=bank_id, enabled=True, event_types__contains=[event]).order_by("created_at")
    ]
    cfg = settings.HINDSIGHT
    if cfg.webhook_url and event in cfg.webhook_event_types:
        hooks.append((None, cfg.webhook_url))
    return hooks


def subscribed(*, bank_id: str, event: str) -> bool:
    """Whether ``emit(bank_id=…, event=…)`` would queue anything (one query)."""
    cfg = settings.HINDSIGHT
    return bool(cfg.webhook_url and event in cfg.webhook_event_types) or Webhook.objects.filter(
        bank_id=bank_id, enabled=True, event_types__contains=[event]).exists()


def event_body(*, event_id: str, event: str, bank_id: str, operation_id: str | None,
               status: str, data: Mapping[str, Any]) -> str:
    """The bytes every delivery of the event sends: upstream's envelope, compact JSON."""
    envelope = {"event_id": event_id, "event": event, "bank_id": bank_id,
                "operation_id": operation_id, "status": status,
                "timestamp": iso_z(timezone.now()), "data": dict(data)}
    return json.dumps({k: v for k, v in envelope.items() if v is not None},
                      separators=(",", ":"), ensure_ascii=False)


def emit(*, bank_id: str, event: str, data: EventData, operation_id: str | uuid.UUID | None = None,
         status: str = "completed") -> list[uuid.UUID]:
    """Queue ``event`` for every subscriber, in the caller's transaction; the deliveries' ids.

    ``data`` may be a function: it is called only when someone subscribes (a page's diff is
    computed for a subscriber only)."""
    hooks = _subscribers(bank_id, event)
    if not hooks:
        return []
    event_id = str(uuid.uuid4())
    body = event_body(event_id=event_id, event=event, bank_id=bank_id,
                      operation_id=None if operation_id is None else str(operation_id),
                      status=status, data=data() if callable(data) else data)
    now = timezone.now()
    rows = [WebhookDelivery(webhook=hook, bank_id=bank_id, event_id=event_id, event_type=event,
                            url=url, payload=body, next_retry_at=now) for hook, url in hooks]
    with transaction.atomic():
        WebhookDelivery.objects.bulk_create(rows)
        for row in rows:
            transaction.on_commit(partial(delivery_publish, delivery_id=row.id), robust=True)
    return [row.id for row in rows]


def delivery_publish(*, delivery_id: uuid.UUID | str) -> bool:
    """Send the delivery's message to the webhook queue now; never raises (the sweep re-sends
    what failed)."""
    WebhookDelivery.objects.filter(id=delivery_id, status=OperationStatus.PENDING).update(
        dispatched_at=timezone.now())
    try:
        current_app.send_task(DELIVER_TASK, args=[str(delivery_id)], queue=webhook_queue())
    except Exception:
        log.warning("publishing webhook delivery %s failed; the sweep re-sends it", delivery_id,
                    exc_info=True)
        WebhookDelivery.objects.filter(id=delivery_id).update(dispatched_at=None)
        return False
    return True


def deliveries_sweep(*, limit: int = 500) -> dict[str, int]:
    """Beat's pass: an attempt whose worker was lost is due again (its attempt counted), and every
    due delivery without a message in flight is published."""
    now = timezone.now()
    lost = WebhookDelivery.objects.filter(
        status=OperationStatus.PROCESSING, claimed_at__lt=now - _LOST_ATTEMPT_AFTER,
    ).update(status=OperationStatus.PENDING, dispatched_at=None, next_retry_at=now,
             last_error="the worker running the attempt was lost", updated_at=now)
    redispatch = timedelta(seconds=settings.HINDSIGHT.redispatch_after_seconds)
    due = list(WebhookDelivery.objects.filter(
        Q(dispatched_at__isnull=True, updated_at__lt=now - _SEND_GRACE)
        | Q(dispatched_at__lt=now - redispatch),
        status=OperationStatus.PENDING, next_retry_at__lte=now,
    ).order_by("next_retry_at").values_list("id", flat=True)[:limit])
    sent = sum(1 for delivery_id in due if delivery_publish(delivery_id=delivery_id))
    return {"lost": lost, "sent": sent}
