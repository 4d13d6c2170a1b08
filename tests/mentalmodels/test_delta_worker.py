"""Delta refreshes run by a real Celery worker against the scripted server: fifty successive
edits, and failed attempts that are retried by the engine (not a pause) over the same window."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from fakes.delta_llm import append_each_fact, delta_llm
from mentalmodels.document.structure import render_json, split
from mentalmodels.models import MentalModel, MentalModelHistory
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.workers import wait_until

pytestmark = pytest.mark.integration

BANK = "mm-delta-bank"
URL = f"/v1/default/banks/{BANK}/mental-models"
BASELINE = "## Team\n\nAlice leads.\n\n```text\n# a comment\n\nmore\n```\n\n## Log\n\n- started"


@pytest.fixture
def bank_id() -> str:
    return BANK


def finished(op_id: str, timeout: float = 60.0) -> Operation:
    wait_until(lambda: Operation.objects.get(id=op_id).status in ("completed", "failed"), timeout,
               message=f"operation {op_id} finished")
    return Operation.objects.get(id=op_id)


def delta_model(bank) -> MentalModel:
    first = make_memory(bank, "Alice leads", embed=True)
    return make_mental_model(bank, "team", content=BASELINE, document=split(BASELINE).as_json(),
                     trigger={"mode": "delta", "keep_trace": True},
                     last_refresh_source_query="How does the team work?",
                     last_memory_seen_at=first.updated_at)


def test_fifty_delta_refreshes_keep_every_earlier_block_byte_identical(bank, llm, worker_factory):
    model = delta_model(bank)
    delta_llm(llm, append_each_fact("log"))
    worker_factory(env=llm.env)
    api = APIClient()
    seen: dict[str, str] = {}
    for n in range(50):
        make_memory(bank, f"Fact {n}: the team shipped release {n}", embed=True)
        op_id = api.post(f"{URL}/team/refresh", format="json").json()["operation_id"]
        op = finished(op_id)
        assert op.status == "completed", op.error_message
        assert op.result_metadata["delta_ops_applied"] == 1, op.result_metadata
        model.refresh_from_db()
        assert render_json(model.document) == model.content
        blocks = {b["id"]: b["text"] for s in model.document["sections"] for b in s["blocks"]}
        for block_id, text in seen.items():
            assert blocks[block_id] == text  # byte-identical, same id
        seen = blocks
    paragraphs = [b for s in model.document["sections"] for b in s["blocks"]]
    assert len(paragraphs) == len({b["text"] for b in paragraphs}) == 2 + 1 + 50
    assert model.content.startswith(BASELINE)
    assert model.content.count("the team shipped release 7\n") == 1
    assert len(model.reflect_response["based_on"]["world"]) == 50  # docs/behaviour.md#cumulative-grounding: the union of all 50


def test_all_invalid_twice_fails_the_attempt_then_the_retry_reads_the_same_window(
    bank, llm, worker_factory, beat
):
    model = delta_model(bank)
    make_memory(bank, "Bob joined", embed=True)
    lock = threading.Lock()

    def ops(call):
        with lock:
            if len(seen_facts) < 2:  # the first attempt's call and its one retry
                seen_facts.append(call.facts)
                return [{"op": "append_block", "section_id": "b-nope", "markdown": "- Bob"}]
            seen_facts.append(call.facts)
            return [{"op": "append_block", "section_id": "log", "markdown": "- Bob joined"}]

    seen_facts: list[list[str]] = []
    delta_llm(llm, ops)
    worker_factory(env=llm.env)
    op_id = APIClient().post(f"{URL}/team/refresh", format="json").json()["operation_id"]
    op = finished(op_id)
    assert op.status == "completed", op.error_message
    assert op.retry_count == 1
    assert seen_facts == [["Bob joined"]] * 3  # the retry read the same window
    (failure,) = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert failure.reason == "delta_ops_all_skipped"
    model.refresh_from_db()
    assert model.last_refresh_failed_at is None
    assert model.content == BASELINE + "\n\n- Bob joined"


def test_a_delta_model_is_not_paused_by_its_first_failed_attempt(
    bank, llm, worker_factory, beat
):
    model = delta_model(bank)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(llm, lambda call: [{"op": "remove_block", "section_id": "log",
                                  "block_id": "b-missing"}])
    worker_factory(env=llm.env)
    op_id = APIClient().post(f"{URL}/team/refresh", format="json").json()["operation_id"]
    failures = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    wait_until(lambda: failures.count() >= 1, 60, message="first failed attempt")
    assert MentalModel.objects.get(uid=model.uid).last_refresh_failed_at is None
    op = finished(op_id)
    assert op.status == "failed" and op.retry_count == 3
    assert op.details["outcome"] == "refresh_failed_delta_not_applied"
    assert op.result_metadata["delta_ops_skipped"] == 2
    wait_until(lambda: MentalModel.objects.get(uid=model.uid).last_refresh_failed_at, 10,
               message="paused after the last retry")
    model.refresh_from_db()
    assert model.content == BASELINE and render_json(model.document) == BASELINE


def test_changed_source_query_falls_back_to_full_and_a_failed_refresh_does_not_record_it(
    bank, llm, worker_factory, beat
):
    model = delta_model(bank)
    make_memory(bank, "Release on Friday", embed=True)
    api = APIClient()
    delta_llm(llm, lambda call: [], answer="")  # every attempt fails: an empty answer
    worker_factory(env=llm.env)
    assert api.patch(f"{URL}/team", {"source_query": "What ships next?"},
                     format="json").status_code == 200
    op_ids = {o.id for o in Operation.objects.filter(mental_model_id="team")}
    for op_id in op_ids:  # the PATCH may have queued one (docs/behaviour.md#edits-during-a-running-refresh) besides ours
        finished(str(op_id))
    op = finished(api.post(f"{URL}/team/refresh", format="json").json()["operation_id"])
    assert op.status == "failed"
    model.refresh_from_db()
    assert model.content == BASELINE
    assert model.last_refresh_source_query == "How does the team work?"

    delta_llm(llm, lambda call: [], answer="## Next\n\nRelease on Friday.")
    op = finished(api.post(f"{URL}/team/refresh", format="json").json()["operation_id"])
    assert op.status == "completed", op.error_message
    assert op.result_metadata["effective_mode"] == "full"
    assert op.result_metadata["mode_fallback_reason"] == "source_query_changed"
    model.refresh_from_db()
    assert model.content == "## Next\n\nRelease on Friday."
    assert model.last_refresh_source_query == "What ships next?"
    assert render_json(model.document) == model.content


def test_wrong_ids_are_dropped_and_reported_on_the_operation_while_the_rest_apply(
    bank, llm, worker_factory
):
    model = delta_model(bank)
    team_block = model.document["sections"][1]["blocks"][0]["id"]
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(llm, lambda call: [
        {"op": "replace_block", "section_id": "team", "block_id": "b-deadbeef", "markdown": "x"},
        {"op": "append_block", "section_id": team_block, "markdown": "- misplaced"},
        {"op": "append_block", "section_id": "log", "markdown": "- Bob joined"},
    ])
    worker_factory(env=llm.env)
    op = finished(APIClient().post(f"{URL}/team/refresh", format="json").json()["operation_id"])
    assert op.status == "completed", op.error_message
    meta = op.result_metadata
    assert (meta["delta_ops_applied"], meta["delta_ops_skipped"]) == (1, 2)
    reasons = [s["reason"] for s in meta["delta_operations"]["skipped"]]
    assert "'b-deadbeef': no such block" in reasons[0]
    assert f"section_id {team_block!r} is a block id" in reasons[1]
    body = APIClient().get(f"{URL}/team").json()
    assert body["content"] == BASELINE + "\n\n- Bob joined"
    assert len(body["reflect_response"]["trace"]["delta_operations"]["skipped"]) == 2
