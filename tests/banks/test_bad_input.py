"""Malformed requests to the banks API: a 4xx naming the field and the rule, never a 500, and
nothing changes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank, MemoryUnit

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


@pytest.fixture
def api() -> APIClient:
    return APIClient(raise_request_exception=False)


RETAIN_CASES: list[tuple[Any, list[Any]]] = [
    ({}, ["body", "items"]),
    ([], ["body"]),
    ({"items": "text"}, ["body", "items"]),
    ({"items": []}, ["body", "items"]),
    ({"items": [{"content": 5}]}, ["body", "items", 0, "content"]),
    ({"items": [{"content": "   "}]}, ["body", "items", 0, "content"]),
    ({"items": [{"content": "x", "tags": "a"}]}, ["body", "items", 0, "tags"]),
    ({"items": [{"content": "x", "tags": [1]}]}, ["body", "items", 0, "tags", 0]),
    ({"items": [{"content": "x", "timestamp": "yesterday"}]}, ["body", "items", 0, "timestamp"]),
    ({"items": [{"content": "x", "timestamp": "9999-12-31T23:59:59-01:00"}]},
     ["body", "items", 0, "timestamp"]),
    ({"items": [{"content": "x", "metadata": {"k": 1}}]}, ["body", "items", 0, "metadata", "k"]),
    ({"items": [{"content": "x", "bogus": 1}]}, ["body", "items", 0, "bogus"]),
    ({"items": [{"content": "x"}], "asynk": True}, ["body", "asynk"]),
    ({"items": [{"content": "x"}], "async": "yes"}, ["body", "async"]),
    ({"items": [{"content": "x", "strategy": "magic"}]}, ["body", "items", 0, "strategy"]),
    ({"items": [{"content": "x", "update_mode": "merge"}]}, ["body", "items", 0, "update_mode"]),
    ({"items": [{"content": "x", "observation_scopes": "some"}]},
     ["body", "items", 0, "observation_scopes"]),
    ({"items": [{"content": [{"type": "image", "source": {}}]}]}, ["body", "items", 0, "content", 0]),
    ({"items": [{"content": "x", "context": 7}]}, ["body", "items", 0, "context"]),
    # PostgreSQL text and jsonb cannot hold NUL: a 422, not a database error.
    ({"items": [{"content": "a\x00b"}]}, ["body", "items", 0, "content"]),
    ({"items": [{"content": "x", "metadata": {"k\x00": "v"}}]}, ["body", "items", 0, "metadata", "k\x00"]),
    ({"items": [{"content": "x", "tags": ["t\x00"]}]}, ["body", "items", 0, "tags", 0]),
]


@pytest.mark.parametrize(("body", "loc"), RETAIN_CASES)
def test_malformed_retain_is_422_naming_the_field_and_stores_nothing(
    api: APIClient, body: Any, loc: list[Any]
) -> None:
    response = api.post(f"{BASE}/bad/memories", body, format="json")
    assert response.status_code == 422, response.content
    locs = [error["loc"] for error in response.json()["detail"]]
    assert loc in locs, locs
    assert all(error["msg"] for error in response.json()["detail"])
    assert not Bank.objects.filter(id="bad").exists()
    assert not MemoryUnit.objects.exists()


RECALL_CASES: list[tuple[Any, list[Any]]] = [
    ({}, ["body", "query"]),
    ({"query": 3}, ["body", "query"]),
    ({"query": "x", "max_tokens": "many"}, ["body", "max_tokens"]),
    ({"query": "x", "tags_match": "some"}, ["body", "tags_match"]),
    ({"query": "x", "budget": "huge"}, ["body", "budget"]),
    ({"query": "x", "types": ["fact"]}, ["body", "types", 0]),
    ({"query": "x", "types": []}, ["body", "types"]),
    ({"query": "x", "tags": ["a"], "tag_groups": [{"tags": ["b"]}]}, ["body", "tag_groups"]),
    ({"query": "x", "tag_groups": [{"tags": ["a"], "match": "most"}]},
     ["body", "tag_groups", 0, "match"]),
    ({"query": "x", "temporal_window": {"start": "2026-01-02T00:00:00Z",
                                        "end": "2026-01-01T00:00:00Z"}},
     ["body", "temporal_window", "end"]),
    ({"query": "x", "unknown": True}, ["body", "unknown"]),
    ({"query": "x", "tag_groups": [{"tags": ["a\x00"]}]}, ["body", "tag_groups", 0, "tags", 0]),
]


@pytest.mark.parametrize(("body", "loc"), RECALL_CASES)
def test_malformed_recall_is_422_naming_the_field(api: APIClient, body: Any, loc: list[Any]) -> None:
    api.put(f"{BASE}/rb", {}, format="json")
    response = api.post(f"{BASE}/rb/memories/recall", body, format="json")
    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]


def test_invalid_json_and_wrong_bank_fields_are_422(api: APIClient) -> None:
    response = api.generic("POST", f"{BASE}/j/memories", "{not json", content_type="application/json")
    assert response.status_code == 422
    response = api.put(f"{BASE}/j", {"name": 5, "disposition_empathy": 9}, format="json")
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    assert ["body", "name"] in locs and ["body", "disposition_empathy"] in locs
    assert not Bank.objects.filter(id="j").exists()
    assert api.put(f"{BASE}/j", {"nmae": "typo"}, format="json").status_code == 422


def test_oversized_body_is_413_and_stores_nothing(api: APIClient, settings: Any) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, max_request_bytes=2048)
    body = {"items": [{"content": "x" * 4096}]}
    response = api.post(f"{BASE}/big/memories", body, format="json")
    assert response.status_code == 413
    assert "exceeds" in response.json()["detail"]
    assert not MemoryUnit.objects.exists()


def test_bad_query_parameters_are_422(api: APIClient) -> None:
    api.put(f"{BASE}/q", {}, format="json")
    for path in ("q/tags?limit=-1", "q/tags?offset=x", "q/memories/list?time_field=when",
                 "q/memories/list?type=fact", "q/memories/list?start_date=nope",
                 "q/stats?refresh=maybe", "?limit=x", "q/tags?q=a%00", "q/memories/list?q=%00",
                 "q/memories/list?tags=%00", "?q=%00"):
        response = api.get(f"{BASE}{path}" if path.startswith("?") else f"{BASE}/{path}")
        assert response.status_code == 422, path
        assert response.json()["detail"][0]["loc"][0] == "query"


def test_overlong_bank_id_is_422(api: APIClient) -> None:
    response = api.put(f"{BASE}/{'b' * 300}", {}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "bank_id"]


def test_nul_in_a_config_string_is_422(api: APIClient) -> None:
    api.put(f"{BASE}/nc", {}, format="json")
    response = api.patch(f"{BASE}/nc/config", {"updates": {"retain_mission": "a\x00"}}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "updates", "retain_mission"]
