"""A refresh that fails only because no LLM is configured: recorded, not paused, and caught up
by itself once a worker with an LLM runs (mentalmodels.refresh.awaiting_llm), with real workers."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank
from hindsight.infra.errors import LLMNotConfigured
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.awaiting_llm import (
    LLM_NOT_CONFIGURED,
    mental_model_await_llm,
    mental_models_refresh_awaiting_llm,
    refresh_failed_for_missing_llm,
)
from mentalmodels.refresh.errors import RefreshFailed
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.test_refresh_worker import answering, wait_status
from tests.workers import wait_until

BASE = "/v1/default/banks/awaiting-llm/mental-models"


@pytest.mark.integration
def test_a_refresh_without_an_llm_does_not_pause_and_runs_once_a_worker_has_one(
    transactional_db, llm, worker_factory
):
    bank = Bank.objects.create(id="awaiting-llm")
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    no_llm = worker_factory(env={**llm.env, "HINDSIGHT_API_LLM_PROVIDER": "none",
                                 "HINDSIGHT_API_LLM_MODEL": ""})
    api = APIClient()
    created = api.post(BASE, {"id": "team", "name": "Team", "source_query": "How does it work?"},
                       format="json")
    assert created.status_code == 200, created.content
    failed = wait_status(created.json()["operation_id"], "completed", "failed")

    # Recorded with a reason a reader understands, inside the client's enums on the operation.
    assert failed.status == "failed"
    assert failed.details["failure_reason"] == "unexpected_error"
    assert "no LLM is configured" in failed.error_message
    assert "HINDSIGHT_API_LLM_PROVIDER" in failed.error_message
    assert failed.retry_count == 0  # a missing configuration is not retried on a timer
    model = MentalModel.objects.get(bank_id="awaiting-llm", mental_model_id="team")
    assert model.last_refresh_failed_at is None  # not paused
    assert model.awaiting_llm_since is not None
    history = api.get(f"{BASE}/team/history").json()
    assert [(e["kind"], e["outcome"], e["failure_reason"],
             "HINDSIGHT_API_LLM_MODEL" in (e["error_message"] or ""))
            for e in history] == [("refresh_failed", "refresh_failed_error", LLM_NOT_CONFIGURED,
                                   True)]
    assert llm.requests == []  # no LLM was asked

    # The LLM gets configured: the worker restarts with it. No refresh call from anyone.
    no_llm.stop()
    answering(llm, ["## Team\n\nAlice prefers async."], [str(fact.id)])
    worker_factory(env=llm.env)
    wait_until(lambda: MentalModel.objects.get(uid=model.uid).content, 60,
               message="the model's first document")
    model.refresh_from_db()
    assert model.content == "## Team\n\nAlice prefers async."
    assert model.awaiting_llm_since is None and model.last_refresh_failed_at is None
    caught_up = Operation.objects.filter(mental_model_id="team").order_by("created_at")
    assert [op.status for op in caught_up] == ["failed", "completed"]


def test_a_missing_llm_is_told_apart_from_other_failures() -> None:
    missing = RefreshFailed("x", outcome="refresh_failed_error", failure_reason="unexpected_error")
    missing.__cause__ = LLMNotConfigured("refresh")
    other = RefreshFailed("x", outcome="refresh_failed_error", failure_reason="unexpected_error")
    other.__cause__ = TimeoutError("slow")
    assert refresh_failed_for_missing_llm(missing)
    assert not refresh_failed_for_missing_llm(other)
    assert not refresh_failed_for_missing_llm(RuntimeError("bug"))


def _awaiting(bank: Bank, mental_model_id: str) -> MentalModel:
    model = make_mental_model(bank, mental_model_id)
    mental_model_await_llm(model_uid=model.uid, exception="LLMNotConfigured", operation_id=None)
    model.refresh_from_db()
    return model


def test_the_catch_up_does_nothing_without_an_llm(
    bank, settings, django_capture_on_commit_callbacks
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")
    model = _awaiting(bank, "team")
    with django_capture_on_commit_callbacks():
        assert mental_models_refresh_awaiting_llm() == []
    model.refresh_from_db()
    assert model.awaiting_llm_since is not None


def test_the_catch_up_queues_one_refresh_per_awaiting_model_and_skips_paused_ones(
    bank, scripted_llm, django_capture_on_commit_callbacks
):
    waiting = _awaiting(bank, "waiting")
    paused = _awaiting(bank, "paused")
    MentalModel.objects.filter(uid=paused.uid).update(last_refresh_failed_at=paused.created_at)
    make_mental_model(bank, "never-failed")
    with django_capture_on_commit_callbacks():
        queued = mental_models_refresh_awaiting_llm()
        again = mental_models_refresh_awaiting_llm()
    assert [op.mental_model_id for op in queued] == ["waiting"]
    assert again == []
    waiting.refresh_from_db()
    assert waiting.awaiting_llm_since is None
    entries = MentalModelHistory.objects.filter(model_id=waiting.uid, kind="refresh_failed")
    assert [e.reason for e in entries] == [LLM_NOT_CONFIGURED]
