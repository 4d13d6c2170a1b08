"""Refreshes run by real Celery workers: end to end, retries and pause, coalescing, edits during
a running refresh (docs/behaviour.md#edits-during-a-running-refresh), all against the scripted OpenAI-compatible server."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.workers import wait_until

pytestmark = pytest.mark.integration

BASE = "/v1/default/banks/{bank}/mental-models"


@pytest.fixture
def bank_id() -> str:
    return "mm-worker-bank"


def url(*parts: str) -> str:
    return "/".join([BASE.format(bank="mm-worker-bank"), *parts])


def answering(server, answers: list[str], memory_ids: list[str]):
    state = {"n": 0}
    lock = threading.Lock()

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        with lock:
            index = min(state["n"], len(answers) - 1)
            state["n"] += 1
        return Reply.tool_calls([("done", {"answer": answers[index], "memory_ids": memory_ids,
                                           "mental_model_ids": []})])

    server.respond_with(respond)
    return state


def hold_first_request(server):
    """The first chat request blocks at the server until the test releases it."""
    reply, handle = Reply.hold(Reply.tool_calls([("search_observations", {"query": "team"})]))
    server.script(reply)
    return handle


def op_status(op_id: str) -> str:
    return Operation.objects.get(id=op_id).status


def wait_status(op_id: str, *statuses: str, timeout: float = 60.0) -> Operation:
    wait_until(lambda: op_status(op_id) in statuses, timeout, message=f"{op_id} in {statuses}")
    return Operation.objects.get(id=op_id)


def test_create_refreshes_through_the_worker_and_writes_the_answer(bank, llm, worker_factory):
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    answering(llm, ["## Team\n\nAlice prefers async."], [str(fact.id)])
    worker_factory(env=llm.env)
    api = APIClient()
    created = api.post(url(), {"id": "team", "name": "Team", "source_query": "How?"},
                       format="json").json()
    op = wait_status(created["operation_id"], "completed", "failed")
    assert op.status == "completed", op.error_message
    assert op.details == {"operation_type": "refresh_mental_model", "outcome": "content_written",
                          "failure_reason": None}
    assert op.result_metadata["based_on_counts"]["world"] == 1
    body = api.get(url("team")).json()
    assert body["content"] == "## Team\n\nAlice prefers async."
    assert [e["id"] for e in body["reflect_response"]["based_on"]["world"]] == [str(fact.id)]
    assert body["is_stale"] is False


def test_llm_that_always_errors_fails_after_retries_records_each_and_pauses(
    bank, llm, worker_factory, beat
):
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "team", content="v1")
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="")
    llm.respond_with(lambda body: Reply.error(400, "this prompt is too large"))
    worker_factory(env=llm.env)
    api = APIClient()
    op_id = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    op = wait_status(op_id, "failed", timeout=40)
    retries = 3  # TEST_TIMINGS worker_max_retries
    assert op.retry_count == retries
    assert len(llm.requests) == 1 + retries
    failures = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    wait_until(lambda: failures.count() == 1 + retries, 10, message="failure entries")
    assert {f.reason for f in failures} == {"unexpected_error"}
    assert all(str(f.operation_id) == op_id for f in failures)
    model.refresh_from_db()
    wait_until(lambda: MentalModel.objects.get(uid=model.uid).last_refresh_failed_at, 10,
               message="pause flag")
    assert model.content == "v1"
    assert MentalModelHistory.objects.filter(model=model, kind="version").count() == 1
    history = api.get(url("team", "history")).json()
    assert history[0]["kind"] == "refresh_failed" and history[0]["operation_id"] == op_id

    # Fix the cause; a manual refresh that succeeds clears the flag.
    fact = make_memory(bank, "another fact", embed=True)
    llm.reset()
    answering(llm, ["fixed doc"], [str(fact.id)])
    op2 = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    assert wait_status(op2, "completed", "failed").status == "completed"
    model.refresh_from_db()
    assert model.last_refresh_failed_at is None and model.content == "fixed doc"


def test_refresh_requests_while_one_runs_queue_exactly_one_more(bank, llm, worker_factory):
    fact = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team")
    handle = hold_first_request(llm)
    answering(llm, ["doc"], [str(fact.id)])
    worker_factory(env=llm.env)
    api = APIClient()
    running = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    assert handle.wait_received(20)
    assert op_status(running) == "processing"
    queued = {api.post(url("team", "refresh"), format="json").json()["operation_id"] for _ in range(3)}
    assert len(queued) == 1 and running not in queued
    (queued_id,) = queued
    assert op_status(queued_id) == "pending"
    handle.release()
    assert wait_status(running, "completed", "failed").status == "completed"
    assert wait_status(queued_id, "completed", "failed").status == "completed"
    assert Operation.objects.filter(mental_model_id="team").count() == 2


def test_clear_during_a_held_refresh_refuses_its_write_and_rebuilds_from_empty(
    bank, llm, worker_factory
):
    fact = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team", content="old document")
    handle = hold_first_request(llm)
    answering(llm, ["STALE written from the old state", "FRESH after the clear"], [str(fact.id)])
    worker_factory(env=llm.env)
    api = APIClient()
    first = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    assert handle.wait_received(20)

    cleared = api.post(url("team", "clear"), format="json").json()
    assert cleared["content"] == ""
    follow_up = Operation.objects.filter(mental_model_id="team", status="pending").get()
    handle.release()

    assert wait_status(first, "cancelled", "completed", "failed").status == "cancelled"
    assert wait_status(str(follow_up.id), "completed", "failed").status == "completed"
    model = MentalModel.objects.get(mental_model_id="team")
    assert model.content == "FRESH after the clear"
    versions = [h.previous_content for h in model.history.order_by("changed_at", "id")]
    assert versions == ["old document", ""]  # the clear, then the rebuild from empty


def test_patch_of_source_query_during_a_held_refresh_reruns_under_the_new_query(
    bank, llm, worker_factory
):
    fact = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team", content="old")
    handle = hold_first_request(llm)
    answering(llm, ["from the old query", "from the new query"], [str(fact.id)])
    worker_factory(env=llm.env)
    api = APIClient()
    first = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    assert handle.wait_received(20)
    response = api.patch(url("team"), {"source_query": "What changed?"}, format="json")
    assert response.status_code == 200
    handle.release()
    assert wait_status(first, "cancelled", "completed", "failed").status == "cancelled"
    follow_up = Operation.objects.filter(mental_model_id="team").exclude(id=first).get()
    assert wait_status(str(follow_up.id), "completed", "failed").status == "completed"
    model = MentalModel.objects.get(mental_model_id="team")
    assert model.content == "from the new query"
    assert model.last_refresh_source_query == "What changed?"


def test_delete_during_a_held_refresh_ends_it_cancelled_with_nothing_written(
    bank, llm, worker_factory
):
    fact = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team")
    handle = hold_first_request(llm)
    answering(llm, ["never stored"], [str(fact.id)])
    worker_factory(env=llm.env)
    api = APIClient()
    first = api.post(url("team", "refresh"), format="json").json()["operation_id"]
    assert handle.wait_received(20)
    assert api.delete(url("team")).json() == {"status": "deleted"}
    handle.release()
    assert wait_status(first, "cancelled", "completed", "failed").status == "cancelled"
    assert not MentalModel.objects.filter(mental_model_id="team").exists()
    assert Operation.objects.filter(mental_model_id="team").count() == 1


def test_wall_timeout_through_the_worker_is_a_recorded_failed_attempt(
    bank, llm, worker_factory, settings
):
    import dataclasses

    # The refresh's own deadline (2 s) ends it before the engine's backstop (1 s later) does,
    # with room for a fresh worker's first LLM call (it imports the SDK) on a loaded machine.
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, reflect_wall_timeout_seconds=2.0, worker_max_retries=0
    )
    make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team", content="kept")
    llm.respond_with(lambda body: Reply.delay(6, Reply.text("too late")))
    worker = worker_factory(env=llm.env)
    op_id = APIClient().post(url("team", "refresh"), format="json").json()["operation_id"]
    op = wait_status(op_id, "failed", "completed", timeout=30)
    assert op.status == "failed"
    assert op.details == {"operation_type": "refresh_mental_model",
                          "outcome": "refresh_failed_error", "failure_reason": "unexpected_error"}
    assert "HINDSIGHT_API_REFLECT_WALL_TIMEOUT" in op.error_message
    model = MentalModel.objects.get(mental_model_id="team")
    wait_until(lambda: MentalModelHistory.objects.filter(model=model, kind="refresh_failed").exists(), 10,
               message="failure entry")
    assert model.content == "kept"
    assert worker.alive()
