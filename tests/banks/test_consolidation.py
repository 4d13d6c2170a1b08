"""Consolidation rounds run in-process (the engine's ``operation_execute``, no worker), the
refresh_after_consolidation listener's cost, the background's cost at rest, and the API's
answers to malformed consolidation and LLM-request-log requests."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from fakes.consolidation_llm import ConsolidatingLLM
from fakes.llm_server import Reply
from hindsight.banks.consolidation import (
    consolidation_submit,
    consolidation_submit_after_retain,
)
from hindsight.banks.hooks import ConsolidationCompleted
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.selectors import bank_last_memory_write_at
from hindsight.infra import metrics
from mentalmodels.models import MentalModel
from mentalmodels.triggers_auto import mental_models_cron_tick, on_consolidation_completed
from operations.engine import operation_execute
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.workers import run_beat_once

# Every test commits (the consolidation and its listener run on their own connections).
pytestmark = pytest.mark.django_db(transaction=True)

BANK = "consolidation-unit"


@pytest.fixture
def bank_id() -> str:
    return BANK


def run_consolidation() -> Operation:
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    return Operation.objects.get(id=op.id)


def consolidation_answer(**answer) -> Reply:
    return Reply.json({"create": [], "update": [], "delete": [], **answer})


def test_each_tag_set_is_consolidated_apart_and_observations_carry_its_tags(bank, llm):
    team = make_memory(bank, "Alice likes tea", tags=["team"], embed=True)
    ops_fact = make_memory(bank, "The pager rotates weekly", tags=["ops", "team"], embed=True)
    ConsolidatingLLM(llm)
    op = run_consolidation()
    # One LLM request per tag set: a request never shows facts of two tag sets together.
    prompts = [b["messages"][-1]["content"] for b in llm.requests]
    assert len(prompts) == 2
    assert all(("Alice" in p) != ("pager" in p) for p in prompts)
    observations = {tuple(o.tags): o for o in
                    MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation")}
    assert set(observations) == {("team",), ("ops", "team")}
    assert observations[("team",)].source_memory_ids == [team.id]
    assert observations[("ops", "team")].source_memory_ids == [ops_fact.id]
    assert observations[("team",)].embedding is not None
    assert op.result_metadata["consolidation"]["observations_created"] == 2
    assert op.result_metadata["llm"] == {"requests": 2, "errors": 0, "input_tokens": 22,
                                         "output_tokens": 10, "total_tokens": 32}


def test_update_moves_the_observation_clock_and_merges_sources_but_facts_keep_theirs(
    bank, llm
):
    first = make_memory(bank, "Alice likes tea", tags=["team"], embed=True)
    ConsolidatingLLM(llm)
    run_consolidation()
    observation = MemoryUnit.objects.get(bank_id=BANK, fact_type="observation")
    second = make_memory(bank, "Alice now drinks coffee", tags=["team"], embed=True)
    before = bank_last_memory_write_at(bank_id=BANK)
    llm.script(consolidation_answer(update=[
        {"observation_id": "O1", "text": "Alice switched from tea to coffee",
         "source_fact_ids": ["F1"]}]))
    run_consolidation()
    observation.refresh_from_db()
    assert observation.text == "Alice switched from tea to coffee"
    assert observation.source_memory_ids == [first.id, second.id]
    assert observation.updated_at > before  # an updated observation is new information
    second_after = MemoryUnit.objects.get(id=second.id)
    assert second_after.updated_at == second.updated_at and second_after.consolidated_at


def test_facts_the_llm_places_nowhere_are_still_marked_and_invented_ids_are_dropped(bank, llm):
    make_memory(bank, "Noise", embed=True)
    llm.script(consolidation_answer(
        create=[{"text": "Cites nothing real", "source_fact_ids": ["F9"]}],
        update=[{"observation_id": "O7", "text": "no such observation", "source_fact_ids": []}],
        delete=[{"observation_id": "O3"}],
    ))
    op = run_consolidation()
    assert not MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation").exists()
    assert not MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).exists()
    assert op.result_metadata["consolidation"]["facts"] == 1
    # A second consolidation finds nothing to do and asks nothing.
    run_consolidation()
    assert len(llm.requests) == 1


def test_unreadable_llm_answer_fails_the_round_and_leaves_its_facts_pending(bank, llm, settings):
    make_memory(bank, "A fact", embed=True)
    llm.script(Reply.text("not json at all"))
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "retrying"
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 1
    op.refresh_from_db()
    assert op.status == "pending" and op.retry_count == 1
    assert op.result_metadata["llm"]["requests"] == 1


def test_a_consolidation_that_failed_for_good_counts_its_facts_as_failed(bank, llm, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    make_memory(bank, "A fact", embed=True)
    llm.script(Reply.error(400, "no"))
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "failed"
    stats = APIClient().get(f"/v1/default/banks/{BANK}/stats").json()
    assert stats["failed_consolidation"] == 1 and stats["pending_consolidation"] == 0
    listed = APIClient().get(
        f"/v1/default/banks/{BANK}/memories/list?consolidation_state=failed").json()
    assert listed["total"] == 1
    # The next consolidation takes them up again.
    ConsolidatingLLM(llm)
    run_consolidation()
    stats = APIClient().get(f"/v1/default/banks/{BANK}/stats").json()
    assert stats["failed_consolidation"] == 0 and stats["pending_consolidation"] == 0


def test_listener_costs_the_same_queries_for_five_or_fifty_fresh_flagged_models(bank):
    make_memory(bank, "A fact", tags=["team"])
    watermark = bank_last_memory_write_at(bank_id=BANK)
    event = ConsolidationCompleted(bank_id=BANK, operation_id=str(uuid.uuid4()),
                                   scopes=frozenset({(("team",), "world")}))

    def cost(count: int) -> int:
        MentalModel.objects.filter(bank_id=BANK).delete()
        for i in range(count):
            make_mental_model(bank, f"m{i}", tags=["team"], last_memory_seen_at=watermark,
                      trigger={"refresh_after_consolidation": True})
        with CaptureQueriesContext(connection) as queries:
            assert on_consolidation_completed(event) != []
        return len(queries)

    assert cost(5) == cost(50)
    assert not Operation.objects.filter(bank_id=BANK).exists()  # all fresh: nothing queued


def test_listener_skips_models_whose_scope_the_chain_did_not_touch(bank):
    make_memory(bank, "An ops fact", tags=["ops"])
    make_mental_model(bank, "team", tags=["team"], trigger={"refresh_after_consolidation": True})
    make_mental_model(bank, "ops", tags=["ops"], trigger={"refresh_after_consolidation": True})
    make_mental_model(bank, "cron", tags=["ops"], trigger={"refresh_cron": "0 * * * *"})
    event = ConsolidationCompleted(bank_id=BANK, operation_id=str(uuid.uuid4()),
                                   scopes=frozenset({(("ops",), "world")}))
    results = on_consolidation_completed(event)
    assert [(r.mental_model_id, r.action) for r in results] == [("ops", "queued")]


def test_a_hundred_cron_ticks_and_beats_over_an_unchanged_bank_cost_no_llm_request(bank, llm):
    make_memory(bank, "A fact", tags=["team"])
    seen = bank_last_memory_write_at(bank_id=BANK)
    past = timezone.now() - timedelta(days=1)
    for i in range(5):
        make_mental_model(bank, f"cron-{i}", tags=["team"], trigger={"refresh_cron": "* * * * *"},
                  last_refreshed_at=past, last_memory_seen_at=seen)
    make_mental_model(bank, "after", trigger={"refresh_after_consolidation": True},
              last_refreshed_at=past, last_memory_seen_at=seen)
    MentalModel.objects.filter(bank_id=BANK).update(created_at=past)
    now = timezone.now()
    for tick in range(100):
        mental_models_cron_tick(now=now + timedelta(minutes=tick))
        run_beat_once()
    assert llm.requests == []
    assert not Operation.objects.filter(bank_id=BANK).exists()


# --- the API's answers to malformed requests ---------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [({"observation_scopes": "all"}, "observation_scopes"),
     ({"observation_scopes": [["a", 1]]}, "observation_scopes"),
     ({"observation_scope": []}, "observation_scope")],
)
def test_consolidate_refuses_a_malformed_body_naming_the_field(bank, llm, body, field):
    response = APIClient().post(f"/v1/default/banks/{BANK}/consolidate", body, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == field


def test_consolidate_coalesces_and_says_so(bank, llm):
    api = APIClient()
    first = api.post(f"/v1/default/banks/{BANK}/consolidate", format="json").json()
    second = api.post(f"/v1/default/banks/{BANK}/consolidate",
                      {"observation_scopes": [["team"]]}, format="json").json()
    assert first["deduplicated"] is False and second["deduplicated"] is True
    assert first["operation_id"] == second["operation_id"]


def test_consolidate_without_an_llm_is_a_400_naming_the_settings(bank):
    response = APIClient().post(f"/v1/default/banks/{BANK}/consolidate", format="json")
    assert response.status_code == 400
    assert "HINDSIGHT_API_LLM_PROVIDER" in response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=501", "limit"), ("offset=-1", "offset"),
     ("status=done", "status"), ("call_type=x", "call_type"), ("trace_id=nope", "trace_id"),
     ("start_date=yesterday", "start_date"), ("group=maybe", "group")],
)
def test_llm_requests_refuses_malformed_query_parameters_naming_them(bank, query, field):
    response = APIClient().get(f"/v1/default/banks/{BANK}/llm-requests?{query}")
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["query", field]


def test_llm_request_stats_refuses_an_unknown_period(bank):
    response = APIClient().get(f"/v1/default/banks/{BANK}/llm-requests/stats?period=2d")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "period"]


def test_llm_requests_of_an_unknown_bank_are_a_404(transactional_db):
    assert APIClient().get("/v1/default/banks/nope/llm-requests").status_code == 404
    assert APIClient().get("/v1/default/banks/nope/llm-requests/stats").status_code == 404


@pytest.mark.parametrize("key", ["enable_auto_consolidation", "enable_observations"])
def test_retain_queues_no_consolidation_when_the_bank_turns_it_off(bank, llm, key):
    api = APIClient()
    assert api.patch(f"/v1/default/banks/{BANK}/config", {"updates": {key: False}},
                     format="json").status_code == 200
    body = {"items": [{"content": "A fact", "strategy": "verbatim"}]}
    assert api.post(f"/v1/default/banks/{BANK}/memories", body, format="json").status_code == 200
    assert not Operation.objects.filter(bank_id=BANK, operation_type="consolidation").exists()
    assert api.get(f"/v1/default/banks/{BANK}/stats").json()["pending_consolidation"] == 1


def test_retain_queues_one_consolidation_for_many_retains_while_it_waits(bank, llm):
    api = APIClient()
    for i in range(3):
        body = {"items": [{"content": f"Fact {i}", "strategy": "verbatim"}]}
        assert api.post(f"/v1/default/banks/{BANK}/memories", body,
                        format="json").status_code == 200
    [op] = Operation.objects.filter(bank_id=BANK, operation_type="consolidation")
    assert op.status == "pending" and op.automatic is True


@pytest.mark.parametrize("queued", ["automatic", "manual", "parked"])
def test_retains_fold_into_the_queued_consolidation_as_the_general_submit_does(bank, queued):
    other = Bank.objects.create(id=f"{BANK}-general")
    fields = ("status", "automatic", "payload", "next_retry_at", "dedupe_key", "operation_type")
    rows = {}
    park = timezone.now() + timedelta(hours=1)
    for bank_id, submit in ((BANK, lambda b: consolidation_submit_after_retain(bank_id=b)),
                            (other.id, lambda b: consolidation_submit(bank_id=b))):
        op = consolidation_submit(bank_id=bank_id, automatic=queued != "automatic").operation
        if queued == "parked":
            Operation.objects.filter(id=op.id).update(
                automatic=True, next_retry_at=park)
        before = Operation.objects.get(id=op.id)
        submit(bank_id)
        [after] = Operation.objects.filter(bank_id=bank_id)
        assert after.id == op.id and after.updated_at > before.updated_at
        rows[bank_id] = {f: getattr(after, f) for f in fields}
    assert rows[BANK] == {**rows[other.id], "dedupe_key": f"consolidate:{BANK}"}


def test_a_retain_queues_a_consolidation_behind_a_running_one(bank):
    running = consolidation_submit(bank_id=BANK).operation
    Operation.objects.filter(id=running.id).update(status="processing")
    consolidation_submit_after_retain(bank_id=BANK)
    consolidation_submit_after_retain(bank_id=BANK)
    ops = Operation.objects.filter(bank_id=BANK).order_by("created_at")
    assert [(o.status, o.automatic) for o in ops] == [("processing", True), ("pending", True)]


def test_a_consolidation_run_without_an_llm_fails_at_once_without_retries(bank, llm, settings):
    make_memory(bank, "A fact", embed=True)
    op = consolidation_submit(bank_id=BANK).operation
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")
    assert operation_execute(operation_id=str(op.id), holder="test") == "failed"
    op.refresh_from_db()
    assert op.retry_count == 0 and "needs an LLM" in (op.error_message or "")
    assert MemoryUnit.objects.filter(bank_id=BANK, consolidated_at__isnull=True).count() == 1


def test_recall_and_the_memory_list_return_observations_with_their_sources(bank, llm):
    fact = make_memory(bank, "Alice likes green tea", tags=["team"], embed=True)
    ConsolidatingLLM(llm)
    run_consolidation()
    api = APIClient()
    recalled = api.post(f"/v1/default/banks/{BANK}/memories/recall",
                        {"query": "green tea", "types": ["observation"], "tags": ["team"]},
                        format="json").json()["results"]
    assert [(r["type"], r["source_fact_ids"], r["tags"]) for r in recalled] == [
        ("observation", [str(fact.id)], ["team"])]
    listed = api.get(f"/v1/default/banks/{BANK}/memories/list?type=observation").json()
    assert [i["source_memory_ids"] for i in listed["items"]] == [[str(fact.id)]]


def test_consolidation_runs_are_counted_by_outcome(bank, llm, settings):
    def runs(outcome: str) -> float:
        return metrics.consolidation_runs_total.labels(outcome=outcome)._value.get()

    completed, failed = runs("completed"), runs("failed")
    make_memory(bank, "A fact", embed=True)
    ConsolidatingLLM(llm)
    run_consolidation()
    assert (runs("completed"), runs("failed")) == (completed + 1, failed)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    make_memory(bank, "Another fact", embed=True)
    llm.script(Reply.error(400, "no"))
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "failed"
    assert (runs("completed"), runs("failed")) == (completed + 1, failed + 1)
