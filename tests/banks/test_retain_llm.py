"""Retain with an LLM: facts come from structured output, embedded in one batch, all-or-nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


def test_retain_extracts_facts_with_structured_output(scripted_llm: Any) -> None:
    scripted_llm.script(Reply.json({"facts": [
        {"text": "Alice prefers async communication over Slack.", "fact_type": "world",
         "occurred_start": None, "occurred_end": None},
        {"text": "I moved the standup to 10am.", "fact_type": "experience",
         "occurred_start": "2026-03-01T10:00:00Z", "occurred_end": None},
    ]}))
    response = APIClient().post(f"{BASE}/x/memories", {"items": [
        {"content": "Alice prefers async over Slack; I moved standup to 10am on March 1.",
         "context": "team chat", "tags": ["team"]}]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["usage"]["total_tokens"] > 0
    units = {u.text: u for u in MemoryUnit.objects.filter(bank_id="x")}
    assert set(units) == {"Alice prefers async communication over Slack.",
                          "I moved the standup to 10am."}
    standup = units["I moved the standup to 10am."]
    assert standup.fact_type == "experience" and standup.occurred_start.isoformat().startswith("2026-03-01")
    assert all(u.tags == ["team"] and u.context == "team chat" for u in units.values())
    (request,) = scripted_llm.requests
    assert request["response_format"]["json_schema"]["name"] == "retain_facts"
    assert "moved standup" in request["messages"][-1]["content"]


def test_verbatim_strategy_skips_the_llm_even_when_configured(scripted_llm: Any) -> None:
    response = APIClient().post(f"{BASE}/v/memories", {"items": [
        {"content": "Keep exactly this.", "strategy": "verbatim"}]}, format="json")
    assert response.status_code == 200
    assert scripted_llm.requests == []
    assert list(MemoryUnit.objects.filter(bank_id="v").values_list("text", "fact_type")) == [
        ("Keep exactly this.", "world")]


def test_llm_failure_on_a_later_item_stores_nothing(scripted_llm: Any) -> None:
    scripted_llm.script(
        Reply.json({"facts": [{"text": "first fact", "fact_type": "world",
                               "occurred_start": None, "occurred_end": None}]}),
        Reply.error(400, "bad request"),
    )
    response = APIClient(raise_request_exception=False).post(
        f"{BASE}/f/memories", {"items": [{"content": "one"}, {"content": "two"}]}, format="json")
    assert response.status_code == 502
    assert "extraction failed" in response.json()["detail"]
    assert not MemoryUnit.objects.filter(bank_id="f").exists()


def test_embedding_failure_is_503_for_retain_and_recall_and_stores_nothing(
    openai_embeddings: Any, settings: Any
) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, embeddings_timeout_seconds=5.0)
    api = APIClient(raise_request_exception=False)
    openai_embeddings.fail_embeddings(1, status=400)
    response = api.post(f"{BASE}/e/memories", {"items": [{"content": "x"}]}, format="json")
    assert response.status_code == 503 and "embedding failed" in response.json()["detail"]
    assert not MemoryUnit.objects.filter(bank_id="e").exists()
    assert api.post(f"{BASE}/e/memories", {"items": [{"content": "x"}]}, format="json").status_code == 200
    openai_embeddings.fail_embeddings(1, status=400)
    response = api.post(f"{BASE}/e/memories/recall", {"query": "x"}, format="json")
    assert response.status_code == 503 and "embedding the query failed" in response.json()["detail"]


def test_a_sync_retain_of_50_runs_a_fixed_handful_of_queries(scripted_llm: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    scripted_llm.respond_with(lambda body: Reply.json({"facts": [
        {"text": body["messages"][-1]["content"][-40:], "fact_type": "world",
         "occurred_start": None, "occurred_end": None}]}))
    api = APIClient()
    api.post(f"{BASE}/q/memories", {"items": [{"content": "warm up"}]}, format="json")
    for strategy in ("verbatim", None):
        items = [{"content": f"fact number {i}", "tags": ["t"], "strategy": strategy}
                 for i in range(50)]
        with CaptureQueriesContext(connection) as captured:
            response = api.post(f"{BASE}/q/memories", {"items": items}, format="json")
        assert response.status_code == 200, response.content
        sql = [q["sql"] for q in captured.captured_queries
               if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
        if strategy is None:  # LLM extraction: the bank's token budget first (its config)
            assert sql.pop(0).startswith('SELECT "banks_bank"."config"')
        # One round trip creates the bank, takes the write lock, reads the stamp and the config;
        # one INSERT stores the 50 facts; one UPDATE folds them into the bank's queued
        # consolidation (the warm-up queued it).
        assert sql[0].startswith("INSERT INTO banks_bank") and "clock_timestamp()" in sql[0]
        assert sql[1].startswith('INSERT INTO "banks_memoryunit"')
        assert sql[2].startswith('UPDATE "operations_operation"') and "pending" in sql[2]
        # One query asks whether any webhook takes retain.completed (none here: no delivery
        # row is written), whatever the batch's size.
        assert '"webhooks_webhook"' in sql[3] and "retain.completed" in sql[3], sql[3]
        assert len(sql) == 4, sql
