"""One attempt of a delivery, run by the webhook queue's worker (``webhooks.deliver``), and what
its outcome does (docs/behaviour.md#webhooks-retries):

- claimed by compare-and-set (pending and due → processing, the attempt counted), so a message
  sent twice runs one attempt;
- a webhook disabled since the event was queued sends nothing (the delivery ends ``cancelled``);
- a 2xx answer completes it, and the webhook's run of failures starts again from 0;
- any other answer, no answer (refused, reset, past the webhook's timeout): the next attempt is
  due after ``min(cap, base × 8^(n−1))`` for the n-th retry, until
  ``HINDSIGHT_API_WEBHOOK_MAX_ATTEMPTS``; then it ends ``failed``;
- a destination the guard refuses ends it ``failed`` at once (no retry makes it allowed);
- a delivery that ends ``failed`` adds one to its webhook's run; at
  ``HINDSIGHT_API_WEBHOOK_DISABLE_AFTER_FAILURES`` in a row the webhook is disabled, saying why.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from hindsight.infra.db import connection_release_to_pool
from hindsight.infra.vocabulary import OperationStatus
from hindsight.webhooks.guard import DestinationRefused
from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.send import Answer, delivery_headers, request_send

DEFAULT_HTTP_CONFIG: dict[str, Any] = {"method": "POST", "timeout_seconds": 30, "headers": {},
                                       "params": {}}
RETRY_FACTOR = 8


def retry_wait_seconds(attempts: int) -> float:
    """The wait after the ``attempts``-th failed attempt."""
    cfg = settings.HINDSIGHT
    return float(min(cfg.webhook_retry_backoff_max_seconds,
                     cfg.webhook_retry_backoff_seconds * RETRY_FACTOR ** max(0, attempts - 1)))


def _claim(delivery_id: str) -> WebhookDelivery | None:
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        id=delivery_id, status=OperationStatus.PENDING, next_retry_at__lte=now,
    ).update(status=OperationStatus.PROCESSING, claimed_at=now, attempts=F("attempts") + 1,
             updated_at=now)
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("webhook").filter(id=delivery_id).first()


def delivery_attempt(*, delivery_id: str) -> str:
    """Run the delivery's next attempt, if it is due and not running; the status it ends in
    (``skipped`` when there was nothing to run)."""
    try:
        uuid.UUID(delivery_id)
    except ValueError:
        return "skipped"
    delivery = _claim(delivery_id)
    if delivery is None:
        return "skipped"
    hook = delivery.webhook
    if hook is not None and not hook.enabled:
        return _finish(delivery, OperationStatus.CANCELLED, error="the webhook is disabled")
    if hook is None:
        secret: str | None = settings.HINDSIGHT.webhook_secret or None
        http_config = DEFAULT_HTTP_CONFIG
    else:
        secret, http_config = hook.secret, {**DEFAULT_HTTP_CONFIG, **(hook.http_config or {})}
    body = delivery.payload.encode()
    is_get = str(http_config["method"]).upper() == "GET"
    headers = delivery_headers(
        event_type=delivery.event_type, event_id=str(delivery.event_id),
        delivery_id=str(delivery.id), body=body, secret=secret,
        extra={str(k): str(v) for k, v in (http_config.get("headers") or {}).items()})
    # A slot waiting on the receiver holds no database connection (a threads-pool worker's
    # slots share a few).
    connection_release_to_pool()
    try:
        answer = request_send(url=delivery.url, method="GET" if is_get else "POST",
                              headers=headers, params=http_config.get("params") or {},
                              body=None if is_get else body,
                              timeout=float(http_config["timeout_seconds"]))
    except DestinationRefused as exc:
        return _finish(delivery, OperationStatus.FAILED, error=str(exc))
    except Exception as exc:  # no answer: refused, reset, timed out
        return _failed_attempt(delivery, error=f"{type(exc).__name__}: {exc}", answer=None)
    if answer.ok:
        return _finish(delivery, OperationStatus.COMPLETED, answer=answer)
    return _failed_attempt(delivery, error=f"HTTP {answer.status}", answer=answer)


def _failed_attempt(delivery: WebhookDelivery, *, error: str, answer: Answer | None) -> str:
    if delivery.attempts >= settings.HINDSIGHT.webhook_max_attempts:
        return _finish(delivery, OperationStatus.FAILED, error=error, answer=answer)
    now = timezone.now()
    WebhookDelivery.objects.filter(id=delivery.id, status=OperationStatus.PROCESSING).update(
        status=OperationStatus.PENDING, dispatched_at=None, claimed_at=None,
        next_retry_at=now + timedelta(seconds=retry_wait_seconds(delivery.attempts)),
        last_error=error, last_response_status=answer.status if answer else None,
        last_response_body=answer.body if answer else None, last_attempt_at=now, updated_at=now)
    return OperationStatus.PENDING


def _finish(delivery: WebhookDelivery, status: str, *, error: str | None = None,
            answer: Answer | None = None) -> str:
    now = timezone.now()
    with transaction.atomic():
        WebhookDelivery.objects.filter(id=delivery.id, status=OperationStatus.PROCESSING).update(
            status=status, claimed_at=None, next_retry_at=None, last_error=error,
            last_response_status=answer.status if answer else None,
            last_response_body=answer.body if answer else None, last_attempt_at=now,
            updated_at=now)
        if delivery.webhook_id is not None and status != OperationStatus.CANCELLED:
            _webhook_record(delivery.webhook_id, failed=status == OperationStatus.FAILED)
    return status


def _webhook_record(webhook_id: uuid.UUID, *, failed: bool) -> None:
    hook = Webhook.objects.select_for_update().filter(id=webhook_id).first()
    if hook is None:
        return
    if not failed:
        if hook.consecutive_failures:
            Webhook.objects.filter(id=webhook_id).update(consecutive_failures=0)
        return
    hook.consecutive_failures += 1
    fields = ["consecutive_failures"]
    limit = settings.HINDSIGHT.webhook_disable_after_failures
    if limit and hook.consecutive_failures >= limit and hook.enabled:
        hook.enabled = False
        hook.disabled_reason = (f"disabled after {hook.consecutive_failures} deliveries in a row "
                                "ended failed")
        hook.updated_at = timezone.now()
        fields += ["enabled", "disabled_reason", "updated_at"]
    hook.save(update_fields=fields)
