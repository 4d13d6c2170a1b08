"""One delivery attempt in process against a real receiver: the webhook's timeout, its method,
query parameters and headers (never standing in for the event's or a signature), a redirect as
a failure, a webhook disabled after the event was queued, and the global webhook of the
settings (its own secret)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hindsight.infra.vocabulary import OperationStatus
from hindsight.webhooks.delivery import delivery_attempt
from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.outbox import emit
from tests.factories import make_bank
from tests.webhooks.receiver import Receiver, verify_signatures

pytestmark = pytest.mark.django_db

BANK = "attempts"


@pytest.fixture(autouse=True)
def _bank(webhook_settings: Any) -> None:
    make_bank(BANK)


def _hook(receiver: Receiver, **fields: Any) -> Webhook:
    return Webhook.objects.create(bank_id=BANK, url=receiver.url,
                                  event_types=["retain.completed"], **fields)


def _attempt() -> WebhookDelivery:
    (delivery_id,) = emit(bank_id=BANK, event="retain.completed", data={"tags": []})
    delivery_attempt(delivery_id=str(delivery_id))
    return WebhookDelivery.objects.get(id=delivery_id)


def test_no_answer_within_the_webhooks_timeout_is_a_failed_attempt_retried_later(receiver):
    receiver.delay = 2.5
    _hook(receiver, http_config={"timeout_seconds": 1})
    delivery = _attempt()
    assert (delivery.status, delivery.attempts) == (OperationStatus.PENDING, 1)
    assert "Timeout" in delivery.last_error and delivery.last_response_status is None
    assert delivery.next_retry_at > delivery.last_attempt_at


def test_method_params_and_headers_as_configured_but_never_over_the_events_own(receiver):
    _hook(receiver, secret="s", http_config={
        "method": "GET", "params": {"team": "ops"},
        "headers": {"X-Hindsight-Event": "forged", "X-Hindsight-Signature": "sha256=0",
                    "Content-Type": "application/vnd.example+json", "X-Team": "ops"}})
    assert _attempt().status == OperationStatus.COMPLETED
    (request,) = receiver.received
    assert request.method == "GET" and request.path == "/hook?team=ops" and request.body == b""
    assert request.headers["X-Hindsight-Event"] == "retain.completed"
    assert request.headers["X-Hindsight-Signature"] != "sha256=0"
    assert request.headers["Content-Type"] == "application/vnd.example+json"
    assert request.headers["X-Team"] == "ops"


def test_a_redirect_is_not_followed_but_failed(receiver):
    receiver.statuses = [302]
    _hook(receiver)
    delivery = _attempt()
    assert (delivery.status, delivery.last_response_status, delivery.last_error) == (
        OperationStatus.PENDING, 302, "HTTP 302")
    assert len(receiver.received) == 1


def test_a_webhook_disabled_after_the_event_was_queued_sends_nothing(receiver):
    hook = _hook(receiver)
    (delivery_id,) = emit(bank_id=BANK, event="retain.completed", data={})
    Webhook.objects.filter(id=hook.id).update(enabled=False)
    assert delivery_attempt(delivery_id=str(delivery_id)) == OperationStatus.CANCELLED
    assert receiver.received == []
    # A message sent twice runs one attempt: the second finds nothing to claim.
    assert delivery_attempt(delivery_id=str(delivery_id)) == "skipped"


def test_the_global_webhook_of_the_settings_gets_its_events_signed_with_its_secret(
        receiver, settings):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, webhook_url=receiver.url, webhook_secret="global-secret",
        webhook_event_types=("retain.completed", "mental_model.refreshed"))
    delivery = _attempt()
    assert delivery.webhook_id is None and delivery.status == OperationStatus.COMPLETED
    (request,) = receiver.received
    verify_signatures(request, "global-secret")
    assert request.json["data"] == {"tags": []}
    assert emit(bank_id=BANK, event="consolidation.completed", data={}) == []  # not its type
