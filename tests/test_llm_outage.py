"""An LLM outage, with real workers: the provider answers 503 to every request.

- Spend is bounded: each refresh operation makes ``1 + WORKER_MAX_RETRIES`` attempts of one
  request each, times ``1 + LLM_MAX_RETRIES`` when the gateway's own transient-error retries
  are on (the two multiply: with the defaults, 3 × 4 = 12 requests per operation).
- Nothing is lost: every operation ends ``failed`` (visibly, with a failure history entry per
  attempt), the content is untouched. A 503 is transient: the model is *not* paused
  (``last_refresh_failed_at`` is set, ``paused`` is not), and its automatic refreshes back off
  (``mentalmodels.refresh.failure_class``).
- The backoff costs nothing: ten triggers — a memory in scope written and a cron tick each,
  automatic triggers fired directly — inside the backoff make 0 requests; they fold into one
  parked refresh per model, due when the backoff ends.
- Resumable: once the provider answers again, a manual refresh completes each model at once
  and clears the failure (the parked automatic one folds into it).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.triggers_auto import mental_models_cron_tick, mental_models_refresh_auto
from operations.models import Operation
from tests.factories import make_bank, make_memory, make_mental_model
from tests.workers import TEST_TIMINGS, wait_until

pytestmark = pytest.mark.integration

BANK = "outage-bank"
MODELS = ("cron-model", "plain-model")
MARK = re.compile(r"\[outage:([a-z-]+)\]")


def _model_of(body: dict[str, Any]) -> str | None:
    for message in body.get("messages", []):
        found = MARK.search(str(message.get("content") or ""))
        if found:
            return found.group(1)
    return None


def _answer(body: dict[str, Any]) -> Reply:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
    if not _memory_ids(body):  # the forced lookups were released: look the facts up first
        return Reply.tool_calls([("recall", {"query": "team"})])
    return Reply.tool_calls([("done", {"answer": "## Back\n\nThe provider answers again.",
                                       "memory_ids": _memory_ids(body), "mental_model_ids": []})])


def _memory_ids(body: dict[str, Any]) -> list[str]:
    """The ids of the facts the lookups returned (what the answer cites)."""
    ids: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            payload = json.loads(message["content"])
            ids += [item["id"] for item in payload.get("facts", [])[:2]]
    return ids


@pytest.mark.parametrize("llm_retries", [0, 1])
def test_an_outage_costs_bounded_requests_loses_nothing_and_resumes_by_hand(
    transactional_db: None, scripted_llm: Any, openai_embeddings: Any, settings: Any,
    worker_factory: Any, beat: Any, llm_retries: int,
) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=llm_retries)
    make_bank(BANK)
    make_memory(BANK, "Alice runs the team.", tags=["team"], embed=True)
    for mm_id in MODELS:
        trigger = {"refresh_cron": "* * * * *"} if mm_id == "cron-model" else {}
        make_mental_model(BANK, mm_id, content=f"# {mm_id}\n\nbefore the outage", tags=["team"],
                          source_query=f"What does the team do? [outage:{mm_id}]",
                          trigger=trigger)
    scripted_llm.track_concurrency(_model_of)
    scripted_llm.respond_with(lambda body: Reply.error(503, "scripted outage"))
    worker_factory(env=scripted_llm.env, concurrency=2)
    api = APIClient()

    op_ids = {mm_id: api.post(f"/v1/default/banks/{BANK}/mental-models/{mm_id}/refresh",
                              format="json").json()["operation_id"] for mm_id in MODELS}
    wait_until(lambda: all(Operation.objects.get(id=op).status == "failed"
                           for op in op_ids.values()), 60, message="both operations failed")

    attempts = 1 + TEST_TIMINGS["worker_max_retries"]
    for mm_id, op_id in op_ids.items():
        assert scripted_llm.requests_by_key[mm_id] == attempts * (1 + llm_retries), mm_id
        models = MentalModel.objects.filter(bank_id=BANK, mental_model_id=mm_id)
        # The failure record and the last failure entry follow the operation's final write.
        wait_until(lambda: models.get().last_refresh_failed_at, 10, message=f"{mm_id} failed")
        model = models.get()
        assert not model.paused and model.last_refresh_failure_transient  # 503: transient
        assert model.auto_refresh_not_before is not None
        assert model.content == f"# {mm_id}\n\nbefore the outage"
        failures = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
        wait_until(lambda: failures.count() == attempts, 10, message="a failure per attempt")
        assert {str(f.operation_id) for f in failures} == {op_id}
    assert not scripted_llm.overlaps

    # Ten triggers inside the backoff: new facts in scope, a cron tick each.
    spent = dict(scripted_llm.requests_by_key)
    for minute in range(1, 11):
        make_memory(BANK, f"Minute {minute}: the team shipped.", tags=["team"], embed=True)
        report = mental_models_cron_tick(now=timezone.now())
        assert report.counts().get("queued", 0) == 0, report.counts()
        results = mental_models_refresh_auto(
            models=list(MentalModel.objects.filter(bank_id=BANK)), reason="consolidation")
        assert {r.action for r in results} == {"parked"}, [r.action for r in results]
        assert all(r.not_before == MentalModel.objects.get(
            bank_id=BANK, mental_model_id=r.mental_model_id).auto_refresh_not_before
            for r in results)
    parked = Operation.objects.filter(bank_id=BANK, status="pending")
    assert parked.count() == len(MODELS)  # one parked refresh per model, triggers folded in
    assert not Operation.objects.filter(bank_id=BANK, status="processing").exists()
    assert dict(scripted_llm.requests_by_key) == spent  # 0 requests inside the backoff

    # The provider is back: a manual refresh resumes each model.
    scripted_llm.respond_with(_answer)
    for mm_id in MODELS:
        op_id = api.post(f"/v1/default/banks/{BANK}/mental-models/{mm_id}/refresh",
                         format="json").json()["operation_id"]
        wait_until(lambda op_id=op_id: Operation.objects.get(id=op_id).status in
                   ("completed", "failed"), 30, message=f"{mm_id} resumed")
        done = Operation.objects.get(id=op_id)
        assert done.status == "completed", done.error_message
        assert done.details["outcome"] == "content_written", (mm_id, done.details)
        model = MentalModel.objects.get(bank_id=BANK, mental_model_id=mm_id)
        assert model.last_refresh_failed_at is None and model.auto_refresh_not_before is None
        assert model.content == "## Back\n\nThe provider answers again."
