"""GET …/memories/list filters the official client sends (``state``, ``consolidation_state``,
``entity_id``): each filters or is a 422 naming it, never silently ignored."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db

URL = "/v1/default/banks/lf/memories/list"


@pytest.fixture
def api() -> APIClient:
    client = APIClient(raise_request_exception=False)
    response = client.post("/v1/default/banks/lf/memories",
                           {"items": [{"content": "one"}, {"content": "two"}]}, format="json")
    assert response.status_code == 200
    return client


def _total(api: APIClient, query: str) -> int:
    response = api.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content
    return response.json()["total"]


def test_state_valid_lists_every_memory_and_invalidated_lists_none(api: APIClient) -> None:
    assert _total(api, "state=valid") == 2
    # Nothing is ever invalidated here: every listed memory says state "valid".
    assert _total(api, "state=invalidated") == 0


def test_consolidation_state_filters_pending_done_and_failed(api: APIClient) -> None:
    first = MemoryUnit.objects.filter(bank_id="lf").order_by("text").first()
    MemoryUnit.objects.filter(id=first.id).update(consolidated_at=first.created_at)
    assert _total(api, "consolidation_state=pending") == 1
    assert _total(api, "consolidation_state=done") == 1
    # Consolidation never records a failure here (consolidation_failed_at is always null).
    assert _total(api, "consolidation_state=failed") == 0


def test_entity_id_matches_no_memory_because_no_entity_links_are_kept(api: APIClient) -> None:
    assert _total(api, "entity_id=8f14e45f-ceea-467f-a0e6-7d5c0a9f1b2c") == 0


@pytest.mark.parametrize(
    ("query", "name"),
    [("state=deleted", "state"), ("consolidation_state=bogus", "consolidation_state"),
     ("entity_id=a%00b", "entity_id")],
)
def test_an_unknown_filter_value_is_422_naming_the_parameter(
    api: APIClient, query: str, name: str
) -> None:
    response = api.get(f"{URL}?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", name]
