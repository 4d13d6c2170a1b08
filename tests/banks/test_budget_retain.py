"""Over budget nothing is lost: a retain the LLM would extract from, sync or async, on a bank that
has spent its token budget answers 200 with its operation id and when it frees; its content is
kept in the operation, parked — nothing sent to the LLM — until the bank frees (beat sends it)
or its budget is raised (sent at once); then it runs and its memories are recalled. In process
(``operation_execute``), and end to end with a real worker and beat."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hindsight_client_api.models import RetainResponse
from rest_framework.test import APIClient

from fakes.consolidation_llm import ConsolidatingLLM
from hindsight.banks.budget import BUDGET_KEY, PARKED_BY_BUDGET, WINDOW
from hindsight.banks.models import MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.infra.llm.models import LLMRequest
from operations.engine import operation_execute, release_due
from operations.models import Operation
from tests.banks.test_budget import API, BANK, set_budget, spend
from tests.factories import make_bank
from tests.workers import wait_until


@pytest.fixture
def bank_id() -> str:
    return BANK


def retain(client: APIClient, *contents: str, sent_async: bool = False) -> dict[str, Any]:
    response = client.post(f"{API}/memories", {
        "items": [{"content": text} for text in contents], "async": sent_async,
    }, format="json")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def recalled(client: APIClient, query: str) -> list[str]:
    response = client.post(f"{API}/memories/recall", {"query": query}, format="json")
    assert response.status_code == 200, response.content
    return [hit["text"] for hit in response.json()["results"]]


@pytest.mark.parametrize("sent_async", [False, True], ids=["sync", "async"])
def test_a_retain_of_a_spent_bank_is_kept_parked_and_answered_with_when_it_frees(
    bank, llm, sent_async
):
    client = APIClient()
    set_budget(client, 100)
    oldest = spend(BANK, 120, hours_ago=2)
    frees_at = oldest.started_at + WINDOW
    response = client.post(f"{API}/memories", {"items": [
        {"content": "Alice prefers green tea", "tags": ["team"]},
        {"content": "kept as said", "strategy": "verbatim"},  # the batch stays whole
    ], "async": sent_async}, format="json")

    assert response.status_code == 200, response.content  # never a 429 that drops it
    body = response.json()
    assert RetainResponse.from_dict(body) is not None  # the official client reads it
    assert body["success"] is True and body["async"] is True and body["items_count"] == 2
    assert body["operation_ids"] == [body["operation_id"]] and body["usage"] is None
    parked = body["parked"]
    assert parked["reason"] == PARKED_BY_BUDGET and BUDGET_KEY in parked["message"]
    assert parked["until"] == parked["frees_at"] == frees_at.isoformat()
    assert parked[BUDGET_KEY] == 100 and parked["llm_tokens_last_24h"] == 120

    # Stored durably: every item in the operation's row, parked until the bank frees.
    op = Operation.objects.get(id=body["operation_id"])
    assert op.operation_type == "retain" and op.status == "pending" and op.retry_count == 0
    assert op.next_retry_at == frees_at and op.dispatched_at is None  # not sent
    assert [RetainItem.from_json(item) for item in op.payload["items"]] == [
        RetainItem(content="Alice prefers green tea", tags=["team"]),
        RetainItem(content="kept as said", strategy="verbatim"),
    ]
    assert op.result_metadata["parked_by"]["reason"] == PARKED_BY_BUDGET
    assert BUDGET_KEY in op.error_message
    # A message for it (a redelivery) and beat before its time run nothing.
    assert operation_execute(operation_id=str(op.id), holder="test") == "skipped"
    assert op.id not in release_due()
    assert llm.requests == [] and not MemoryUnit.objects.filter(bank_id=BANK).exists()


def test_a_retain_of_a_bank_whose_budget_is_0_is_parked_a_day_and_says_it_never_frees(bank, llm):
    client = APIClient()
    set_budget(client, 0)
    body = retain(client, "Alice prefers green tea")
    assert body["parked"]["frees_at"] is None and body["parked"]["llm_tokens_last_24h"] == 0
    op = Operation.objects.get(id=body["operation_id"])
    assert body["parked"]["until"] == op.next_retry_at.isoformat()
    assert timedelta(hours=23) < op.next_retry_at - timezone.now() <= WINDOW
    assert llm.requests == []


def test_raising_the_budget_runs_the_parked_retain_and_its_memory_is_recalled(bank, llm):
    ConsolidatingLLM(llm)
    client = APIClient()
    set_budget(client, 100)
    spend(BANK, 120, hours_ago=1)
    body = retain(client, "Alice prefers green tea")
    assert llm.requests == []

    set_budget(client, 1000)  # raised: released at once
    op = Operation.objects.get(id=body["operation_id"])
    assert op.status == "pending" and op.next_retry_at is None
    assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    op.refresh_from_db()
    assert "parked_by" not in op.result_metadata and op.error_message is None
    assert op.result_metadata["llm"]["requests"] == 1
    assert "Alice prefers green tea" in recalled(client, "Alice green tea")


def test_beat_sends_a_parked_retain_once_the_bank_frees_and_it_runs(bank, llm):
    ConsolidatingLLM(llm)
    client = APIClient()
    set_budget(client, 100)
    oldest = spend(BANK, 120, hours_ago=2)
    body = retain(client, "Bob drinks his coffee black", sent_async=True)
    op_id = body["operation_id"]

    # The day rolls over: the spend leaves the window and the park's time comes.
    LLMRequest.objects.filter(id=oldest.id).update(started_at=timezone.now() - WINDOW * 2)
    Operation.objects.filter(id=op_id).update(next_retry_at=timezone.now() - timedelta(seconds=1))
    assert [str(i) for i in release_due()] == [op_id]
    assert operation_execute(operation_id=op_id, holder="test") == "completed"
    assert "Bob drinks his coffee black" in recalled(client, "Bob coffee")


@pytest.mark.integration
def test_with_a_worker_and_beat_a_parked_retain_asks_nothing_until_raised_then_is_recalled(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any,
) -> None:
    make_bank(BANK)
    ConsolidatingLLM(llm)
    client = APIClient()
    set_budget(client, 100)
    spend(BANK, 120, hours_ago=1)
    worker_factory(env=llm.env)

    sync = retain(client, "Alice prefers green tea")
    queued = retain(client, "Bob drinks his coffee black", sent_async=True)
    ids = [sync["operation_id"], queued["operation_id"]]
    assert sync["parked"] and queued["parked"]
    beat.wait_ticks(4)  # beat runs meanwhile: nothing is due
    ops = Operation.objects.filter(id__in=ids)
    assert {op.status for op in ops} == {"pending"}
    assert all(op.next_retry_at is not None for op in ops)
    assert llm.requests == []  # 0 chat requests while parked
    assert not MemoryUnit.objects.filter(bank_id=BANK).exists()

    set_budget(client, None)  # the budget lifted: the worker runs both
    wait_until(lambda: set(ops.values_list("status", flat=True)) == {"completed"}, 60,
               message="the parked retains ran")
    assert "Alice prefers green tea" in recalled(client, "Alice green tea")
    assert "Bob drinks his coffee black" in recalled(client, "Bob coffee")
