"""The official hindsight-client 1.1.0's WebhooksApi against our running server, with a real
receiver on 127.0.0.1 and a real worker: the nine checks upstream passes — create and list, an
SSRF target refused, ``retain.completed`` and ``consolidation.completed`` delivered and signed,
deliveries listed, a failing receiver retried with the same ``event_id``, a disabled webhook
silent, a deleted one gone — in upstream's shapes."""

from __future__ import annotations

import time

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models.create_webhook_request import CreateWebhookRequest
from hindsight_client_api.models.update_webhook_request import UpdateWebhookRequest

from fakes.consolidation_llm import ConsolidatingLLM
from hindsight.webhooks.models import WebhookDelivery
from tests.webhooks.receiver import Receiver, verify_signatures
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-webhooks"
SECRET = "s3cret-signing-key"


def test_webhooks_through_the_official_client(client: Hindsight, llm, worker_factory,
                                              receiver: Receiver, webhook_settings, sweeper):
    ConsolidatingLLM(llm)
    worker_factory(env={**llm.env, **webhook_settings})
    hooks = client.webhooks
    client.create_bank(BANK, name="Webhooks")

    # 1. create and list (the secret never answered)
    created = _run_async(hooks.create_webhook(BANK, CreateWebhookRequest(
        url=receiver.url, secret=SECRET,
        event_types=["retain.completed", "consolidation.completed"])))
    assert created.url == receiver.url and created.secret is None and created.enabled
    assert created.http_config.method == "POST" and created.http_config.timeout_seconds == 30
    listed = _run_async(hooks.list_webhooks(BANK))
    assert [h.id for h in listed.items] == [created.id] and listed.total == 1
    assert listed.items[0].secret is None

    # 2. an SSRF target refused, nothing stored
    for target in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.8/hook",
                   "http://[::1]:8080/", "http://0x0a.1/hook"):
        with pytest.raises(ApiException) as refused:
            _run_async(hooks.create_webhook(BANK, CreateWebhookRequest(url=target)))
        assert refused.value.status == 422 and '"url"' in refused.value.body
    assert _run_async(hooks.list_webhooks(BANK)).total == 1

    # 3. retain.completed and consolidation.completed delivered, signed
    client.retain(BANK, "Alice prefers async standups", tags=["team"])
    (retained,) = receiver.wait("retain.completed")
    (consolidated,) = receiver.wait("consolidation.completed")
    for request in (retained, consolidated):
        verify_signatures(request, SECRET)
        body = request.json
        assert request.headers["X-Hindsight-Event-Id"] == body["event_id"]
        assert request.headers["Content-Type"] == "application/json"
        assert body["bank_id"] == BANK and body["status"] == "completed"
        assert set(body) == {"event_id", "event", "bank_id", "operation_id", "status",
                             "timestamp", "data"}
    assert retained.json["event"] == "retain.completed"
    assert retained.json["data"] == {"tags": ["team"]}
    assert consolidated.json["data"]["observations_created"] >= 1

    # 4. deliveries listed, newest first, with the receiver's answer
    deliveries = _run_async(hooks.list_webhook_deliveries(BANK, created.id))
    assert {d.event_type for d in deliveries.items} == {"retain.completed",
                                                        "consolidation.completed"}
    for delivery in deliveries.items:
        assert (delivery.status, delivery.attempts, delivery.last_response_status) == (
            "completed", 1, 200)
        assert delivery.webhook_id == created.id and delivery.url == receiver.url
        assert delivery.last_response_body is None  # not exposed by default
    by_id = {d.id: d for d in deliveries.items}
    assert retained.headers["X-Hindsight-Delivery-Id"] in by_id

    # 5. a failing receiver retried with the same event_id (and the same bytes)
    _run_async(hooks.update_webhook(BANK, created.id, UpdateWebhookRequest(
        event_types=["retain.completed"])))
    receiver.statuses = [500, 200]
    client.retain(BANK, "Bob reviews on Fridays", tags=["team"])
    first, second = receiver.wait("retain.completed", count=3)[1:]
    assert first.headers["X-Hindsight-Event-Id"] == second.headers["X-Hindsight-Event-Id"]
    assert first.headers["X-Hindsight-Delivery-Id"] == second.headers["X-Hindsight-Delivery-Id"]
    assert first.body == second.body
    verify_signatures(second, SECRET)
    retried = wait_until(lambda: next((d for d in _run_async(hooks.list_webhook_deliveries(
        BANK, created.id)).items if d.attempts == 2 and d.status == "completed"), None),
        30, message="the retried delivery listed completed")
    assert retried.last_response_status == 200 and retried.event_id == first.json["event_id"]

    # 6. a disabled webhook stays silent
    disabled = _run_async(hooks.update_webhook(BANK, created.id, UpdateWebhookRequest(
        enabled=False)))
    assert disabled.enabled is False
    before = len(receiver.received)
    client.retain(BANK, "Carol moved the retro to Thursday", tags=["team"])
    time.sleep(2)
    assert len(receiver.received) == before
    assert WebhookDelivery.objects.filter(webhook_id=created.id).count() == 3

    # 7. a deleted one is gone: its deliveries with it, and nothing more is sent
    _run_async(hooks.update_webhook(BANK, created.id, UpdateWebhookRequest(enabled=True)))
    _run_async(hooks.delete_webhook(BANK, created.id))
    assert _run_async(hooks.list_webhooks(BANK)).total == 0
    with pytest.raises(ApiException) as gone:
        _run_async(hooks.list_webhook_deliveries(BANK, created.id))
    assert gone.value.status == 404
    client.retain(BANK, "Dave joins the team", tags=["team"])
    time.sleep(2)
    assert len(receiver.received) == before
    assert not WebhookDelivery.objects.filter(bank_id=BANK).exists()
