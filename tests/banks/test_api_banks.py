"""Banks API: PUT/GET/PATCH/DELETE, list, config, stats, tags, memory list (upstream's bodies)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from hindsight.banks.models import Bank, MemoryUnit

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


def retain(api: APIClient, bank: str, *items: dict[str, Any]) -> dict[str, Any]:
    response = api.post(f"{BASE}/{bank}/memories", {"items": list(items)}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_put_creates_bank_with_upstream_profile_shape(api: APIClient) -> None:
    response = api.put(f"{BASE}/peer-demo", {"name": "Peer demo", "mission": "Track prefs"},
                       format="json")
    assert response.status_code == 200
    assert response.json() == {
        "bank_id": "peer-demo", "name": "Peer demo",
        "disposition": {"skepticism": 3, "literalism": 3, "empathy": 3},
        "mission": "Track prefs", "background": "Track prefs",
    }
    assert api.get(f"{BASE}/peer-demo").json()["name"] == "Peer demo"


def test_patch_changes_only_fields_sent_and_put_is_idempotent(api: APIClient) -> None:
    api.put(f"{BASE}/b", {"name": "B", "mission": "m1", "disposition_empathy": 5}, format="json")
    response = api.patch(f"{BASE}/b", {"mission": "m2"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "B" and body["mission"] == "m2"
    assert body["disposition"]["empathy"] == 5
    assert api.put(f"{BASE}/b", {"name": "B"}, format="json").json()["mission"] == "m2"


def test_get_unknown_bank_is_404_in_upstream_shape(api: APIClient) -> None:
    for path in ("", "/stats", "/config", "/memories/list", "/tags"):
        response = api.get(f"{BASE}/no-such-bank{path}")
        assert response.status_code == 404, path
        assert response.json() == {"detail": "Bank 'no-such-bank' not found"}


def test_delete_cascades_memories_and_then_404s(api: APIClient) -> None:
    retain(api, "gone", {"content": "a fact"})
    response = api.delete(f"{BASE}/gone")
    assert response.status_code == 200
    assert response.json()["success"] is True and response.json()["deleted_count"] == 1
    assert not MemoryUnit.objects.filter(bank_id="gone").exists()
    assert api.get(f"{BASE}/gone").status_code == 404
    assert api.delete(f"{BASE}/gone").status_code == 404


def test_list_banks_pages_and_counts_facts(api: APIClient) -> None:
    for name in ("a1", "a2", "a3"):
        api.put(f"{BASE}/{name}", {"name": name.upper()}, format="json")
    retain(api, "a2", {"content": "x"}, {"content": "y"})
    body = api.get(f"{BASE}?limit=2&offset=1").json()
    assert body["total"] == 3 and body["limit"] == 2 and body["offset"] == 1
    assert [b["bank_id"] for b in body["banks"]] == ["a2", "a3"]
    assert body["banks"][0]["fact_count"] == 2 and body["banks"][0]["last_write_at"]
    assert api.get(f"{BASE}?q=A3").json()["total"] == 1


def test_config_patch_validates_and_merges_overrides(api: APIClient) -> None:
    api.put(f"{BASE}/c", {}, format="json")
    response = api.patch(
        f"{BASE}/c/config",
        {"updates": {"mental_model_min_refresh_interval_seconds": 120,
                     "HINDSIGHT_API_RETAIN_MISSION": "be brief"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["overrides"] == {"mental_model_min_refresh_interval_seconds": 120,
                                 "retain_mission": "be brief"}
    assert body["config"]["mental_model_min_refresh_interval_seconds"] == 120
    bad = api.patch(f"{BASE}/c/config",
                    {"updates": {"mental_model_min_refresh_interval_seconds": -1}}, format="json")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == [
        "body", "updates", "mental_model_min_refresh_interval_seconds"]
    unknown = api.patch(f"{BASE}/c/config", {"updates": {"refersh": 1}}, format="json")
    assert unknown.status_code == 422 and "refersh" in unknown.json()["detail"][0]["msg"]
    # A null drops the override; the value falls back to the deployment default.
    api.patch(f"{BASE}/c/config",
              {"updates": {"mental_model_min_refresh_interval_seconds": None}}, format="json")
    assert "mental_model_min_refresh_interval_seconds" not in Bank.objects.get(id="c").config
    assert api.delete(f"{BASE}/c/config").json()["overrides"] == {}


def test_stats_last_memory_write_at_is_exact_max_updated_at_without_cache(api: APIClient) -> None:
    api.put(f"{BASE}/s", {}, format="json")
    empty = api.get(f"{BASE}/s/stats").json()
    assert empty["last_memory_write_at"] is None and empty["total_nodes"] == 0
    retain(api, "s", {"content": "first"})
    first = api.get(f"{BASE}/s/stats").json()["last_memory_write_at"]
    retain(api, "s", {"content": "second", "document_id": "d1"})
    stats = api.get(f"{BASE}/s/stats?refresh=true").json()
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(updated_at) FROM banks_memoryunit WHERE bank_id = 's'")
        (expected,) = cursor.fetchone()
    assert datetime.fromisoformat(stats["last_memory_write_at"]) == expected
    assert stats["last_memory_write_at"] > first
    assert stats["nodes_by_fact_type"] == {"world": 2}
    assert stats["pending_consolidation"] == 2 and stats["total_documents"] == 1
    assert stats["operations_by_status"]["pending"] == 0


def test_tags_listing_counts_and_filters_by_case_insensitive_wildcard(api: APIClient) -> None:
    retain(
        api, "t",
        {"content": "one", "tags": ["user:alice", "team"]},
        {"content": "two", "tags": ["user:Bob", "team"]},
        {"content": "three", "tags": ["role-admin"]},
    )
    body = api.get(f"{BASE}/t/tags").json()
    assert body["items"][0] == {"tag": "team", "count": 2}
    assert body["total"] == 4 and body["limit"] == 100 and body["offset"] == 0
    users = api.get(f"{BASE}/t/tags?q=USER:*").json()
    assert {i["tag"] for i in users["items"]} == {"user:alice", "user:Bob"}
    assert api.get(f"{BASE}/t/tags?q=*-admin").json()["items"] == [{"tag": "role-admin", "count": 1}]
    page = api.get(f"{BASE}/t/tags?limit=1&offset=1").json()
    assert page["total"] == 4 and len(page["items"]) == 1
    assert api.get(f"{BASE}/t/tags?source=nope").status_code == 422


def test_memory_list_has_upstream_item_shape_and_filters(api: APIClient) -> None:
    retain(api, "l", {"content": "Alice likes tea", "tags": ["x"], "context": "chat"},
           {"content": "Bob likes coffee"})
    body = api.get(f"{BASE}/l/memories/list").json()
    assert body["total"] == 2 and body["limit"] == 100
    item = next(i for i in body["items"] if i["text"] == "Alice likes tea")
    assert item["context"] == "chat" and item["tags"] == ["x"] and item["fact_type"] == "world"
    assert item["state"] == "valid" and item["consolidated_at"] is None and item["updated_at"]
    tagged = api.get(f"{BASE}/l/memories/list?tags=x&tags_match=any_strict").json()
    assert [i["text"] for i in tagged["items"]] == ["Alice likes tea"]
    assert api.get(f"{BASE}/l/memories/list?q=COFFEE").json()["total"] == 1
    assert api.get(f"{BASE}/l/memories/list?limit=abc").status_code == 422
