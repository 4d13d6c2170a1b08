"""Bank config: the keys upstream's client sends are accepted (stored, shown, type-checked);
a wrong type, a NUL anywhere inside a value, or an unknown key is a 422 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank

pytestmark = pytest.mark.django_db

URL = "/v1/default/banks/cfg/config"


@pytest.fixture
def api() -> APIClient:
    return APIClient(raise_request_exception=False)


def test_client_keys_without_effect_are_stored_and_resolved(api: APIClient) -> None:
    updates = {"recall_max_tokens": 1024, "HINDSIGHT_API_AUDIT_LOG_ENABLED": True,
               "default_observation_scopes": [["a", "b"]], "memory_defense": {"mode": "off"}}
    response = api.patch(URL, {"updates": updates}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["overrides"] == {"recall_max_tokens": 1024, "audit_log_enabled": True,
                                 "default_observation_scopes": [["a", "b"]],
                                 "memory_defense": {"mode": "off"}}
    assert body["config"]["recall_max_tokens"] == 1024
    assert body["config"]["recall_budget_max"] is None


@pytest.mark.parametrize(
    ("key", "value"),
    [("recall_max_tokens", "many"), ("recall_max_tokens", 2**70), ("audit_log_enabled", 1),
     ("memory_defense", {"note": "a\x00b"}), ("entity_labels", [{"k\x00": 1}]),
     ("mcp_enabled_tools", ["recall", 5]), ("default_observation_scopes", [["a", 1]]),
     ("recall_budget_adaptive_mid", "half"), ("no_such_key", 1)],
)
def test_a_bad_value_or_unknown_key_is_422_naming_it_and_changes_nothing(
    api: APIClient, key: str, value: Any
) -> None:
    assert api.patch(URL, {"updates": {"recall_max_tokens": 7}}, format="json").status_code == 200
    response = api.patch(URL, {"updates": {key: value}}, format="json")
    assert response.status_code == 422, response.content
    # The key is named; a nested mistake is located further inside it.
    assert response.json()["detail"][0]["loc"][:3] == ["body", "updates", key]
    assert Bank.objects.get(id="cfg").config == {"recall_max_tokens": 7}
