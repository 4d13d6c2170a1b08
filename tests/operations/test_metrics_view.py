"""``/metrics`` without workers: the queue gauges come from the table at each scrape, a POST is
refused, and the LLM purpose label stays bounded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from hindsight.banks.models import Bank
from hindsight.infra.metrics import purpose_label
from operations.models import Operation


def scrape(client: Client) -> dict[tuple[str, frozenset], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


@pytest.mark.django_db
def test_queue_gauges_are_read_from_the_operations_table_at_each_scrape(client: Client) -> None:
    bank = Bank.objects.create(id="gauges")
    empty = scrape(client)
    assert empty[("hindsight_operations_parked", frozenset({("operation_type", "retain")}))] == 0
    Operation.objects.create(bank=bank, operation_type="retain", next_retry_at="2999-01-01T00:00:00Z")
    Operation.objects.create(bank=bank, operation_type="retain", dedupe_key="k", status="processing")
    Operation.objects.create(bank=bank, operation_type="retain", dedupe_key="k2",
                             created_at=datetime(2020, 1, 1, tzinfo=UTC))
    Operation.objects.create(bank=bank, operation_type="retain", dedupe_key="k3", status="completed")
    samples = scrape(client)
    assert samples[("hindsight_operations_parked", frozenset({("operation_type", "retain")}))] == 1
    depth = {dict(labels)["status"]: v for (name, labels), v in samples.items()
             if name == "hindsight_operations_queue_depth" and ("operation_type", "retain") in labels}
    assert depth == {"pending": 2, "processing": 1}  # completed ones are not the queue
    age = samples[("hindsight_operations_oldest_pending_age_seconds", frozenset())]
    assert age > (datetime.now(UTC) - datetime(2020, 1, 2, tzinfo=UTC)).total_seconds()


@pytest.mark.django_db
def test_metrics_refuses_a_post(client: Client) -> None:
    assert client.post("/metrics").status_code == 405


def test_purpose_labels_drop_the_iteration_number() -> None:
    assert purpose_label("reflect:agent_12") == "reflect:agent"
    assert purpose_label("reflect:final") == "reflect:final"
    assert purpose_label("retain") == "retain"
    assert purpose_label("") == "unspecified"
