"""Delivery by a real worker to a real receiver: the outbox's transaction (an event of work that
rolled back is never sent; a publish lost is sent by the sweep), the SSRF guard at delivery time
(a name that resolves to loopback), the automatic disable after failed deliveries in a row, a
consolidation that failed for good reported with its error."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.db import transaction
from django.db.models import F

from fakes.llm_server import Reply
from hindsight.infra.vocabulary import OperationStatus
from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.outbox import deliveries_sweep, emit, webhook_queue
from tests.factories import make_bank
from tests.webhooks.receiver import WEBHOOK_ENV, Receiver
from tests.workers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

BANK = "hooks"


def _retain(api: Any, text: str) -> None:
    response = api.post(f"/v1/default/banks/{BANK}/memories",
                        {"items": [{"content": text, "strategy": "verbatim"}]}, format="json")
    assert response.status_code == 200, response.content


def _queued(settings: Any) -> int:
    client = redis.Redis.from_url(settings.HINDSIGHT.redis_url or settings.REDIS_URL)
    return int(client.llen(webhook_queue()))


@pytest.fixture
def own_queue(settings: Any) -> Any:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, webhook_queue=f"webhook-outbox-test-{time.monotonic_ns()}")
    yield
    redis.Redis.from_url(settings.HINDSIGHT.redis_url or settings.REDIS_URL).delete(
        webhook_queue())


def test_an_event_of_work_that_rolled_back_is_never_queued_nor_sent(settings, own_queue):
    make_bank(BANK)
    Webhook.objects.create(bank_id=BANK, url="https://example.com/in",
                           event_types=["retain.completed"])
    with pytest.raises(RuntimeError), transaction.atomic():
        emit(bank_id=BANK, event="retain.completed", data={})
        assert WebhookDelivery.objects.count() == 1
        raise RuntimeError("the work failed")
    assert not WebhookDelivery.objects.exists() and _queued(settings) == 0

    with transaction.atomic():
        (delivery_id,) = emit(bank_id=BANK, event="retain.completed", data={})
        assert _queued(settings) == 0  # not before the commit
    assert _queued(settings) == 1
    assert WebhookDelivery.objects.get(id=delivery_id).dispatched_at is not None


def test_a_delivery_whose_publish_was_lost_is_sent_by_the_sweep(settings, own_queue):
    make_bank(BANK)
    Webhook.objects.create(bank_id=BANK, url="https://example.com/in",
                           event_types=["retain.completed"])
    with transaction.atomic():
        (delivery_id,) = emit(bank_id=BANK, event="retain.completed", data={})
        transaction.set_rollback(False)
    redis.Redis.from_url(settings.HINDSIGHT.redis_url or settings.REDIS_URL).delete(
        webhook_queue())  # the message lost with the broker
    WebhookDelivery.objects.filter(id=delivery_id).update(dispatched_at=None)
    assert deliveries_sweep() == {"lost": 0, "sent": 0}  # its own send may still be on its way
    # The sweep's grace for that send (2 s, from the row's last write) passes: the row's clock
    # moves back instead of the test waiting it out.
    WebhookDelivery.objects.filter(id=delivery_id).update(
        updated_at=F("updated_at") - timedelta(seconds=2.1))
    assert deliveries_sweep() == {"lost": 0, "sent": 1}
    assert _queued(settings) == 1


def test_a_name_resolving_to_loopback_is_refused_at_delivery(api, settings, worker_factory,
                                                              receiver: Receiver, sweeper):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, webhook_allowed_hosts=())
    worker_factory(env={**WEBHOOK_ENV, "HINDSIGHT_API_WEBHOOK_ALLOWED_HOSTS": ""})
    make_bank(BANK)
    port = receiver.url.split(":")[2].split("/")[0]
    # A name is not resolved when the webhook is created (no DNS in a request) ...
    created = api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": f"http://localhost:{port}/hook", "event_types": ["retain.completed"]},
        format="json")
    assert created.status_code == 201, created.content
    _retain(api, "Alice prefers tea")
    # ... but before every delivery, and then refused for good: no retry makes it allowed.
    delivery = wait_until(lambda: WebhookDelivery.objects.filter(
        status=OperationStatus.FAILED).first(), 30, message="the delivery refused")
    assert delivery.attempts == 1 and "localhost" in delivery.last_error
    assert "private, loopback or link-local" in delivery.last_error
    assert receiver.received == []


def test_a_webhook_is_disabled_after_deliveries_failed_in_a_row_and_says_so(
        api, settings, worker_factory, receiver: Receiver, webhook_settings, sweeper):
    env = {**webhook_settings, "HINDSIGHT_API_WEBHOOK_MAX_ATTEMPTS": "2",
           "HINDSIGHT_API_WEBHOOK_DISABLE_AFTER_FAILURES": "2"}
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, webhook_max_attempts=2,
                                             webhook_disable_after_failures=2)
    worker_factory(env=env)
    make_bank(BANK)
    receiver.statuses = [503]
    hook = api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": receiver.url, "event_types": ["retain.completed"]}, format="json").json()
    for text in ("one", "two"):
        _retain(api, text)
        wait_until(lambda: WebhookDelivery.objects.filter(
            status=OperationStatus.PENDING).count() == 0 and WebhookDelivery.objects.filter(
            status=OperationStatus.FAILED).count() >= (1 if text == "one" else 2), 30,
            message="the delivery failed")
    listed = api.get(f"/v1/default/banks/{BANK}/webhooks").json()["items"][0]
    assert listed["enabled"] is False and listed["consecutive_failures"] == 2
    assert listed["disabled_reason"] == "disabled after 2 deliveries in a row ended failed"
    deliveries = api.get(f"/v1/default/banks/{BANK}/webhooks/{hook['id']}/deliveries").json()
    assert [(d["status"], d["attempts"], d["last_response_status"], d["last_error"])
            for d in deliveries["items"]] == [("failed", 2, 503, "HTTP 503")] * 2
    assert len(receiver.received) == 4
    # Disabled: silent. The retain writes its events (the outbox's rows) before it answers, and
    # nothing is ever sent without a row: none written is nothing sent, now or later.
    _retain(api, "three")
    assert len(receiver.received) == 4 and WebhookDelivery.objects.count() == 2
    # Enabled again, it starts from a clean run.
    again = api.patch(f"/v1/default/banks/{BANK}/webhooks/{hook['id']}", {"enabled": True},
                      format="json").json()
    assert (again["enabled"], again["consecutive_failures"], again["disabled_reason"]) == (
        True, 0, None)


def test_a_consolidation_that_fails_for_good_is_reported_failed_with_its_error(
        api, settings, llm, worker_factory, receiver: Receiver, webhook_settings, sweeper):
    llm.respond_with(lambda body: Reply.error(400, "scripted: the model refuses"))
    worker_factory(env={**llm.env, **webhook_settings, "HINDSIGHT_API_WORKER_MAX_RETRIES": "0"})
    make_bank(BANK)
    api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": receiver.url, "event_types": ["consolidation.completed"]}, format="json")
    _retain(api, "Alice prefers tea")  # verbatim: only the consolidation asks the LLM
    (failed,) = receiver.wait("consolidation.completed")
    body = failed.json
    assert body["status"] == "failed" and body["operation_id"]
    assert "refuses" in body["data"]["error_message"]
    assert "observations_created" not in body["data"]
