"""Consolidation and refresh_after_consolidation end to end: the API, real Celery workers and
the scripted OpenAI-compatible LLM (fakes/consolidation_llm.py)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fakes.consolidation_llm import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    ConsolidatingLLM,
    is_consolidation,
    texts_read,
    tool_results,
)
from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.models import MentalModel
from operations.models import Operation
from tests.workers import wait_until

pytestmark = pytest.mark.integration

BANK = "consolidation-bank"
BANKS = f"/v1/default/banks/{BANK}"


def create_model(api: APIClient, model_id: str, *, tags=(), **trigger) -> None:
    body = {"id": model_id, "name": model_id, "source_query": "What about the team?",
            "tags": list(tags), "trigger": {"refresh_after_consolidation": True, **trigger}}
    response = api.post(f"{BANKS}/mental-models", body, format="json")
    assert response.status_code == 200, response.content
    # Its first refresh finds an empty scope and completes without an LLM request.
    wait_until(lambda: MentalModel.objects.filter(
        bank_id=BANK, mental_model_id=model_id, last_refreshed_at__isnull=False).exists(),
        60, message=f"{model_id}'s first refresh")


def retain(api: APIClient, *texts: str, tags=()) -> None:
    items = [{"content": t, "tags": list(tags)} for t in texts]
    response = api.post(f"{BANKS}/memories", {"items": items}, format="json")
    assert response.status_code == 200, response.content


def ops(kind: str, **filters):
    return Operation.objects.filter(bank_id=BANK, operation_type=kind, **filters)


def refreshes(model_id: str):
    return ops("refresh_mental_model", mental_model_id=model_id, automatic=True)


def settle(timeout: float = 60.0) -> None:
    """Wait until the bank has no unfinished operation."""
    wait_until(lambda: not Operation.objects.filter(
        bank_id=BANK, status__in=("pending", "processing")).exists(), timeout,
        message="the bank's operations to finish")


def test_tagged_retain_consolidates_once_and_refreshes_each_flagged_stale_model_in_scope_once(
    llm, api, worker_factory, beat
):
    ConsolidatingLLM(llm)
    worker_factory(env=llm.env)
    create_model(api, "team", tags=["team"])
    create_model(api, "whole-bank")
    create_model(api, "other", tags=["other"])
    create_model(api, "paused", tags=["team"])
    MentalModel.objects.filter(bank_id=BANK, mental_model_id="paused").update(
        last_refresh_failed_at=MentalModel.objects.get(
            bank_id=BANK, mental_model_id="paused").last_refreshed_at)
    assert llm.requests == []  # empty scopes: the first refreshes spent nothing

    retain(api, "Alice prefers async communication", tags=["team"])
    facts = list(MemoryUnit.objects.filter(bank_id=BANK, fact_type="world"))
    stamped = {f.id: f.updated_at for f in facts}
    settle()

    consolidations = ops("consolidation")
    assert consolidations.count() == 1
    op = consolidations.get()
    assert op.status == "completed", op.error_message
    assert op.result_metadata["consolidation"]["rounds"] == 1
    assert op.result_metadata["llm"]["requests"] == 1

    [observation] = MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation")
    assert observation.tags == ["team"]
    assert [str(s) for s in observation.source_memory_ids] == [str(f.id) for f in facts]
    assert observation.text == "Observed: Alice prefers async communication"
    for fact in MemoryUnit.objects.filter(bank_id=BANK, fact_type="world"):
        assert fact.consolidated_at is not None
        assert fact.updated_at == stamped[fact.id]  # marking is not a write

    assert refreshes("team").count() == 1
    assert refreshes("whole-bank").count() == 1
    assert refreshes("other").count() == 0  # its scope was not touched
    assert refreshes("paused").count() == 0  # paused after a failure: no automatic refresh
    team_op = refreshes("team").get()
    assert team_op.status == "completed", team_op.error_message
    assert team_op.result_metadata["llm"]["requests"] >= 1

    # The refresh's reflect loop read the new observation through search_observations.
    read = [b for b in llm.requests if not b.get("response_format")
            and any(r.get("observations") for r in tool_results(b))]
    assert read, "no reflect request carried an observation back to the model"
    assert any(observation.text in t for b in read for t in texts_read(b))
    team = api.get(f"{BANKS}/mental-models/team").json()
    assert observation.text in team["content"]
    assert team["is_stale"] is False

    stats = api.get(f"{BANKS}/stats").json()
    assert stats["pending_consolidation"] == 0
    assert stats["failed_consolidation"] == 0
    assert stats["total_observations"] == 1
    assert stats["last_consolidated_at"] is not None

    listed = api.get(f"{BANKS}/memories/list?type=observation").json()["items"]
    assert listed[0]["source_memory_ids"] == [str(f.id) for f in facts]

    # The request log holds exactly what the server received, with its tokens.
    n = len(llm.requests)
    log = api.get(f"{BANKS}/llm-requests?limit=500").json()
    assert log["total"] == n == LLMRequest.objects.filter(bank_id=BANK).count()
    assert sum(i["input_tokens"] for i in log["items"]) == n * PROMPT_TOKENS
    assert sum(i["output_tokens"] for i in log["items"]) == n * COMPLETION_TOKENS
    assert {i["operation"] for i in log["items"]} == {"retain", "consolidation",
                                                     "refresh_mental_model"}
    by_trace = api.get(f"{BANKS}/llm-requests?trace_id={op.id}").json()
    assert by_trace["total"] == 1 and by_trace["items"][0]["scope"] == "consolidation"
    stats = api.get(f"{BANKS}/llm-requests/stats?period=1d").json()
    assert sum(b["total"] for b in stats["buckets"]) == n
    assert sum(b["tokens"]["total"] for b in stats["buckets"]) == n * (
        PROMPT_TOKENS + COMPLETION_TOKENS)


def test_untagged_retain_does_not_refresh_a_strictly_tagged_model(llm, api, worker_factory):
    ConsolidatingLLM(llm)
    worker_factory(env=llm.env)
    create_model(api, "team", tags=["team"])
    create_model(api, "any-team", tags=["team"], tags_match="any")
    retain(api, "The office closes at six")
    settle()
    assert ops("consolidation", status="completed").count() == 1
    assert MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation", tags=[]).count() == 1
    # all_strict ignores untagged memories; under "any" a refresh would read them, but
    # staleness never counts an untagged write for a tagged model (docs/behaviour.md#staleness).
    assert refreshes("team").count() == 0
    assert refreshes("any-team").count() == 0


def test_consolidation_in_three_rounds_triggers_the_refresh_once(
    llm, api, worker_factory, settings
):
    ConsolidatingLLM(llm)
    worker_factory(env={**llm.env, "HINDSIGHT_API_CONSOLIDATION_BATCH_SIZE": "2"})
    create_model(api, "team", tags=["team"])
    retain(api, *[f"Team fact number {i}" for i in range(6)], tags=["team"])
    settle()
    op = ops("consolidation").get()
    assert op.result_metadata["consolidation"]["rounds"] == 3
    assert op.result_metadata["consolidation"]["facts"] == 6
    assert sum(1 for b in llm.requests if is_consolidation(b)) == 3
    assert MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation").count() == 3
    assert refreshes("team").count() == 1


def test_concurrent_retains_queue_one_consolidation_at_a_time(llm, api, worker_factory):
    answers = ConsolidatingLLM(llm)
    reply, held = Reply.hold(Reply.json({"create": [], "update": [], "delete": []}))

    def respond(body):
        if is_consolidation(body) and not held.received:
            return reply
        return answers.respond(body)

    llm.respond_with(respond)
    worker_factory(env=llm.env, concurrency=2)
    retain(api, "first fact")
    assert held.wait_received(60)
    for i in range(5):
        retain(api, f"later fact {i}")
    # One runs (held at the LLM); everything retained meanwhile folded into one queued behind.
    assert ops("consolidation", status="processing").count() == 1
    assert ops("consolidation", status="pending").count() == 1
    assert ops("consolidation").count() == 2
    held.release()
    settle()
    assert ops("consolidation").count() == 2
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 0


def test_failed_consolidation_round_is_retried_and_its_facts_stay_pending_meanwhile(
    llm, api, worker_factory, beat
):
    answers = ConsolidatingLLM(llm, fail_consolidations=1)
    reply, held = Reply.hold(Reply.json({"create": [], "update": [], "delete": []}))
    calls = {"n": 0}

    def respond(body):
        if is_consolidation(body):
            calls["n"] += 1
            if calls["n"] == 2:
                return reply  # the retry: hold it while the test looks
        return answers.respond(body)

    llm.respond_with(respond)
    worker_factory(env=llm.env)
    retain(api, "a fact that waits", "another fact that waits")
    assert held.wait_received(60)
    op = ops("consolidation").get()
    assert op.retry_count == 1 and "scripted consolidation failure" in (op.error_message or "")
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 2
    assert api.get(f"{BANKS}/stats").json()["pending_consolidation"] == 2
    held.release()
    settle()
    op.refresh_from_db()
    assert op.status == "completed"
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 0
    assert api.get(f"{BANKS}/stats").json()["pending_consolidation"] == 0


def test_consolidate_with_nothing_pending_completes_without_an_llm_request(
    llm, api, worker_factory
):
    ConsolidatingLLM(llm)
    worker_factory(env=llm.env)
    first = api.post(f"{BANKS}/consolidate", format="json")
    assert first.status_code == 200, first.content
    op_id = first.json()["operation_id"]
    wait_until(lambda: Operation.objects.get(id=op_id).status == "completed", 60,
               message="the consolidation")
    assert llm.requests == []
    assert Operation.objects.get(id=op_id).result_metadata["llm"]["requests"] == 0


def test_burst_of_twenty_retains_inside_the_floor_costs_one_refresh_that_reads_all_twenty(
    llm, api, worker_factory, beat
):
    ConsolidatingLLM(llm)
    worker_factory(env=llm.env)
    # A floor of an hour: the burst lands inside it however slow the machine. Once every
    # consolidation of the burst has ended, the floor is made to pass (the parked refresh's
    # time brought to now) rather than waited out.
    floor = 3600
    create_model(api, "team", tags=["team"], min_refresh_interval_seconds=floor)
    texts = [f"Burst fact {i} about the team" for i in range(20)]
    for text in texts:
        retain(api, text, tags=["team"])
    wait_until(lambda: ops("consolidation").exists() and not ops(
        "consolidation", status__in=("pending", "processing")).exists(), 90,
        message="the burst's consolidations")
    parked = refreshes("team").get()  # one, whatever the burst's pace
    assert parked.status == "pending" and parked.next_retry_at is not None
    assert (parked.next_retry_at - timezone.now()).total_seconds() > floor / 2
    refreshes("team").filter(id=parked.id).update(next_retry_at=ClockTimestamp())
    wait_until(lambda: refreshes("team").filter(status="completed").exists(), 90,
               message="the parked refresh to run")
    settle()
    assert refreshes("team").count() == 1
    op = refreshes("team").get()
    reflect = [b for b in llm.requests if not b.get("response_format")
               and b.get("messages") and any(m.get("role") == "tool" for m in b["messages"])]
    read = {t for b in reflect for t in texts_read(b)}
    assert all(any(text in r for r in read) for text in texts), "the refresh missed a fact"
    assert op.result_metadata["llm"]["requests"] >= 1
    team = MentalModel.objects.get(bank_id=BANK, mental_model_id="team")
    assert all(text in team.content for text in texts)
