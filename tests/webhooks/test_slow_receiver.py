"""A slow receiver (30 s an answer) never slows the refreshes: deliveries run on the webhook
queue's worker, refreshes on theirs. A burst of page creations (each a refresh) is timed
without a webhook, then with one subscribed to ``mental_model.refreshed`` whose receiver holds
every request 30 s; the second burst must take about as long as the first and end long before
the receiver has answered once. (The figure at a larger size: ``python -m bench.bench_webhooks``.)"""

from __future__ import annotations

import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.infra.vocabulary import OperationStatus
from hindsight.webhooks.models import WebhookDelivery
from hindsight.webhooks.outbox import webhook_queue
from operations.models import Operation
from tests.factories import make_memory
from tests.mentalmodels.test_refresh_worker import answering
from tests.webhooks.receiver import Receiver
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "slow-receiver"
BURST = 6
SLOW = 30.0


@pytest.fixture
def bank_id() -> str:
    return BANK


def _burst(api: APIClient, prefix: str) -> float:
    started = time.monotonic()
    ids = [api.post(f"/v1/default/banks/{BANK}/mental-models", {
        "id": f"{prefix}{n}", "name": f"{prefix} {n}", "source_query": "How?"},
        format="json").json()["operation_id"] for n in range(BURST)]
    wait_until(lambda: Operation.objects.filter(id__in=ids, status=OperationStatus.COMPLETED)
               .count() == BURST, 60, interval=0.05, message=f"the {prefix} burst")
    return time.monotonic() - started


def test_a_30_second_receiver_does_not_slow_a_burst_of_refreshes(
        bank: Any, llm, worker_factory, receiver: Receiver, webhook_settings):
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    answering(llm, ["## Team\n\nAlice prefers async."], [str(fact.id)])
    env = {**llm.env, **webhook_settings}
    worker_factory(env=env, concurrency=2)  # the refreshes' worker: the task queue only
    worker_factory(env=env, concurrency=1, queue=webhook_queue())  # the deliveries'
    api = APIClient()
    baseline = _burst(api, "a")

    receiver.delay = SLOW
    api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": receiver.url, "event_types": ["mental_model.refreshed"],
        "http_config": {"timeout_seconds": 60}}, format="json")
    started = time.monotonic()
    with_slow_receiver = _burst(api, "b")
    receiver.wait("mental_model.refreshed", timeout=10)  # the first delivery is being held
    print(f"burst of {BURST} refreshes: {baseline:.2f} s without a webhook, "
          f"{with_slow_receiver:.2f} s with a {SLOW:g} s receiver")
    assert time.monotonic() - started < SLOW  # the burst ended before any answer came
    assert with_slow_receiver < baseline * 2 + 3.0
    deliveries = WebhookDelivery.objects.filter(event_type="mental_model.refreshed")
    assert deliveries.count() == BURST
    assert deliveries.filter(status=OperationStatus.COMPLETED).count() == 0
