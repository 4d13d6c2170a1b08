"""A bank's LLM token budget, in-process (the engine's ``operation_execute``, no worker): what
is counted, when a spent bank frees, the 429 of every call that would spend (a retain is
parked instead: ``test_budget_retain``), the parking of due work at claim time, its release
when the budget changes, the stats and the gauges."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fakes.consolidation_llm import COMPLETION_TOKENS, PROMPT_TOKENS, ConsolidatingLLM
from hindsight.banks.budget import BUDGET_KEY, PARKED_BY_BUDGET, bank_spend
from hindsight.banks.consolidation import consolidation_submit
from hindsight.banks.models import MemoryUnit
from hindsight.infra.llm.log import llm_requests_purge
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.triggers_auto import mental_model_refresh_auto
from operations.engine import operation_execute
from operations.models import Operation
from tests.factories import make_memory, make_mental_model

BANK = "budget-bank"
API = f"/v1/default/banks/{BANK}"


@pytest.fixture
def bank_id() -> str:
    return BANK


def spend(bank_id: str, tokens: int, *, hours_ago: float = 0.0) -> LLMRequest:
    """One logged request of ``tokens`` (input) tokens, ``hours_ago`` hours ago."""
    return LLMRequest.objects.create(
        bank_id=bank_id, status="success", input_tokens=tokens, output_tokens=0,
        started_at=timezone.now() - timedelta(hours=hours_ago),
    )


def set_budget(client: APIClient, value: int | None) -> None:
    response = client.patch(f"{API}/config", {"updates": {BUDGET_KEY: value}}, format="json")
    assert response.status_code == 200, response.content


def test_spend_counts_the_bank_s_requests_of_the_last_24_hours_only(bank):
    spend(BANK, 100, hours_ago=1)
    spend(BANK, 10, hours_ago=23.9)
    spend(BANK, 1000, hours_ago=24.1)  # out of the window
    spend("another-bank", 5000)
    LLMRequest.objects.create(bank_id=BANK, status="success", input_tokens=3, output_tokens=4,
                              started_at=timezone.now())
    state = bank_spend(bank_id=BANK)
    assert state.spent == 117 and state.budget is None and not state.exhausted


def test_a_spent_bank_frees_when_its_oldest_requests_leave_the_window(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_token_budget_per_day=150)
    oldest = spend(BANK, 100, hours_ago=20)
    middle = spend(BANK, 60, hours_ago=10)
    spend(BANK, 40, hours_ago=1)
    state = bank_spend(bank_id=BANK)
    # 200 spent: once the oldest 100 leave, 100 < 150 remain.
    assert state.exhausted and state.spent == 200
    assert state.frees_at == oldest.started_at + timedelta(hours=24)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_token_budget_per_day=50)
    # Budget 50: 100 and 60 must both leave (40 < 50).
    assert bank_spend(bank_id=BANK).frees_at == middle.started_at + timedelta(hours=24)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_token_budget_per_day=0)
    assert bank_spend(bank_id=BANK).frees_at is None  # nothing is under a budget of 0


def test_the_bank_s_own_budget_wins_over_the_deployment_s_and_null_resets_it(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_token_budget_per_day=1000)
    client = APIClient()
    assert client.get(f"{API}/config").json()["config"][BUDGET_KEY] == 1000
    set_budget(client, 10)
    assert bank_spend(bank_id=BANK).budget == 10
    set_budget(client, None)
    assert bank_spend(bank_id=BANK).budget == 1000
    bad = client.patch(f"{API}/config", {"updates": {BUDGET_KEY: -1}}, format="json")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "updates", BUDGET_KEY]
    assert "must be >= 0" in bad.json()["detail"][0]["msg"]


def test_bank_stats_carry_the_tokens_of_the_last_24_hours_and_the_budget(bank):
    client = APIClient()
    spend(BANK, 70)
    stats = client.get(f"{API}/stats").json()
    assert stats["llm_tokens_last_24h"] == 70 and stats["llm_token_budget_per_day"] is None
    set_budget(client, 500)
    stats = client.get(f"{API}/stats").json()
    assert stats["llm_tokens_last_24h"] == 70 and stats["llm_token_budget_per_day"] == 500


def test_a_manual_refresh_of_a_spent_bank_answers_429_naming_the_budget(bank, llm):
    make_mental_model(BANK, "team", content="# Team")
    make_memory(BANK, "Alice runs the team", embed=True)
    client = APIClient()
    set_budget(client, 100)
    oldest = spend(BANK, 120, hours_ago=2)
    response = client.post(f"{API}/mental-models/team/refresh", format="json")
    assert response.status_code == 429
    body = response.json()
    assert BUDGET_KEY in body["detail"] and "120 tokens" in body["detail"], body
    assert body["budget"] == {
        BUDGET_KEY: 100, "llm_tokens_last_24h": 120,
        "frees_at": (oldest.started_at + timedelta(hours=24)).isoformat(),
    }
    assert 21 * 3600 < int(response["Retry-After"]) <= 22 * 3600
    assert not Operation.objects.filter(bank_id=BANK).exists()  # nothing queued
    assert llm.requests == []


def test_every_call_that_would_spend_answers_429_and_verbatim_retain_does_not(bank, llm):
    make_mental_model(BANK, "team", content="# Team")
    client = APIClient()
    set_budget(client, 10)
    spend(BANK, 10)
    calls = {
        "reflect": client.post(f"{API}/reflect", {"query": "who?"}, format="json"),
        "dry run": client.post(f"{API}/mental-models/team/dry-run-refresh", format="json"),
        "consolidate": client.post(f"{API}/consolidate", format="json"),
    }
    assert {name: r.status_code for name, r in calls.items()} == dict.fromkeys(calls, 429)
    assert all(BUDGET_KEY in r.json()["detail"] and r.json()["budget"][BUDGET_KEY] == 10
               for r in calls.values())
    assert llm.requests == [] and not MemoryUnit.objects.filter(bank_id=BANK).exists()
    # (A retain the LLM would extract is parked instead: tests/banks/test_budget_retain.py.)
    verbatim = client.post(f"{API}/memories",
                           {"items": [{"content": "kept as said", "strategy": "verbatim"}]},
                           format="json")
    assert verbatim.status_code == 200, verbatim.content
    assert llm.requests == []


def test_a_due_refresh_of_a_spent_bank_is_parked_at_claim_until_it_frees(bank, llm):
    model = make_mental_model(BANK, "team", content="# Team")
    make_memory(BANK, "Alice runs the team", embed=True)
    result = mental_model_refresh_auto(model=model, reason="refresh_cron")
    assert result.action == "queued"
    client = APIClient()
    set_budget(client, 100)
    oldest = spend(BANK, 150, hours_ago=3)

    assert operation_execute(operation_id=str(result.operation.id), holder="test") == "parked"
    op = Operation.objects.get(id=result.operation.id)
    assert op.status == "pending" and op.retry_count == 0
    assert op.next_retry_at == oldest.started_at + timedelta(hours=24)
    parked_by = op.result_metadata["parked_by"]
    assert parked_by["reason"] == PARKED_BY_BUDGET and parked_by["llm_tokens_last_24h"] == 150
    assert BUDGET_KEY in op.error_message
    assert llm.requests == []  # nothing sent to the LLM
    # Parked: a message for it (beat's, a redelivery) finds nothing to run.
    assert operation_execute(operation_id=str(op.id), holder="test") == "skipped"


def test_raising_the_budget_releases_the_parked_work_at_once(
    bank, llm, django_capture_on_commit_callbacks
):
    make_memory(BANK, "A fact", embed=True)
    client = APIClient()
    set_budget(client, 5)
    spend(BANK, 5)
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "parked"
    assert Operation.objects.get(id=op.id).next_retry_at is not None

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        set_budget(client, 1000)
    assert len(callbacks) == 1  # the release sends it after the config commits
    op.refresh_from_db()
    assert op.status == "pending" and op.next_retry_at is None
    ConsolidatingLLM(llm)
    assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    op.refresh_from_db()
    assert "parked_by" not in op.result_metadata and op.error_message is None
    assert op.result_metadata["llm"]["requests"] == 1


def test_consolidation_stops_between_rounds_once_the_bank_is_spent(bank, llm, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, consolidation_batch_size=1)
    for text in ("Alice likes tea", "Bob likes coffee", "Carol likes water"):
        make_memory(BANK, text, embed=True)
    ConsolidatingLLM(llm)
    client = APIClient()
    set_budget(client, PROMPT_TOKENS + COMPLETION_TOKENS)  # the first round's request spends it
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    assert len(llm.requests) == 1
    assert Operation.objects.get(id=op.id).result_metadata["consolidation"]["rounds"] == 1
    follower = Operation.objects.get(bank_id=BANK, status="pending")
    assert operation_execute(operation_id=str(follower.id), holder="test") == "parked"
    assert len(llm.requests) == 1
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 2


def test_the_purge_keeps_a_day_of_tokens_whatever_the_retention(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             llm_request_log_retention_hours=1)
    LLMRequest.objects.create(bank_id=BANK, status="success", input_tokens=9, prompt="secret",
                              response="answer", started_at=timezone.now() - timedelta(hours=5))
    spend(BANK, 1000, hours_ago=30)
    assert llm_requests_purge() == 1
    kept = LLMRequest.objects.get()
    assert kept.input_tokens == 9 and kept.prompt == "" and kept.response == ""
    assert bank_spend(bank_id=BANK).spent == 9


def test_metrics_show_each_bank_s_spend_and_budget(bank):
    client = APIClient()
    set_budget(client, 300)
    spend(BANK, 42)
    spend("no-budget-bank", 8)
    text = client.get("/metrics").content.decode()
    assert f'hindsight_llm_tokens_last_24h{{bank="{BANK}"}} 42.0' in text
    assert f'hindsight_llm_token_budget_per_day{{bank="{BANK}"}} 300.0' in text
    assert 'hindsight_llm_tokens_last_24h{bank="no-budget-bank"} 8.0' in text
    assert 'hindsight_llm_token_budget_per_day{bank="no-budget-bank"}' not in text


def test_the_admin_shows_each_model_s_tokens_and_each_bank_s_budget(bank, admin_client):
    from mentalmodels.services import refresh_dedupe_key
    from tests.factories import make_operation

    model = make_mental_model(BANK, "team", content="# Team")
    make_mental_model(BANK, "quiet", content="# Quiet")
    key = refresh_dedupe_key(bank_id=BANK, mental_model_id="team")
    earlier = make_operation(bank_id=BANK, dedupe_key=key, status="completed",
                             completed_at=timezone.now() - timedelta(hours=2),
                             result_metadata={"llm": {"total_tokens": 999}})
    last = make_operation(bank_id=BANK, dedupe_key=key, status="completed",
                          completed_at=timezone.now(),
                          result_metadata={"llm": {"total_tokens": 1234}})
    for op, tokens in ((earlier, 999), (last, 1234)):
        LLMRequest.objects.create(bank_id=BANK, operation_id=op.id, status="success",
                                  input_tokens=tokens, started_at=timezone.now())
    LLMRequest.objects.create(bank_id=BANK, operation_id=earlier.id, status="success",
                              input_tokens=5000, started_at=timezone.now() - timedelta(hours=30))
    page = admin_client.get("/admin/mentalmodels/mentalmodel/").content.decode()
    assert "column-last_refresh_tokens" in page and "column-tokens_last_24h" in page
    row = page[page.index(f"/{model.uid}/change/"):]
    row = row[:row.index("</tr>")]
    assert "1,234" in row and "2,233" in row  # the last refresh; both of the last 24 h
    quiet = page[page.index("quiet"):]
    assert '<td class="field-last_refresh_tokens">-</td>' in quiet[:quiet.index("</tr>")]

    APIClient().patch(f"{API}/config", {"updates": {BUDGET_KEY: 50000}}, format="json")
    banks = admin_client.get("/admin/banks/bank/").content.decode()
    assert "50,000" in banks and "2,233" in banks
