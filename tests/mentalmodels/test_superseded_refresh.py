"""Edits during a running refresh, one refresh of a model at a time (docs/behaviour.md#scheduling): a refresh superseded by an edit (clear, PATCH of scope, delete) writes nothing —
not even its own failure. A superseded run that then fails says nothing about the model's
current configuration: it must not add a failure entry, pause the model, or push its retry
(count and backoff) onto the refresh the edit queued behind it.

Driven in process: claim the operation, make the edit, then run the claimed job's handler.
"""

from __future__ import annotations

import dataclasses

import pytest

from fakes.llm_server import Reply
from mentalmodels import services
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.handler import RefreshMentalModelHandler
from mentalmodels.services import (
    mental_model_clear,
    mental_model_delete,
    mental_model_refresh_request,
    mental_model_update,
    refresh_dedupe_key,
)
from operations.engine import _run_handler
from operations.jobs import Job
from operations.leases import operation_claim
from operations.models import CANCELLED, PENDING, Operation
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def failing_llm(scripted_llm, openai_embeddings, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    scripted_llm.respond_with(lambda body: Reply.error(400, "refused"))
    return scripted_llm


def claimed_job(bank_id: str, mental_model_id: str) -> Job:
    op = mental_model_refresh_request(bank_id=bank_id, mental_model_id=mental_model_id)
    claimed = operation_claim(operation_id=op.id, holder="w")
    assert isinstance(claimed, Operation)
    return Job(claimed, fence=claimed.fence,
               key=refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id))


@pytest.mark.parametrize("edit", ["clear", "patch_source_query"])
def test_a_superseded_refresh_that_fails_records_no_failure_and_leaves_its_follower_alone(
    bank, sent, failing_llm, edit
):
    make_memory(bank, "Alice prefers async communication", tags=["team"], embed=True)
    make_mental_model(bank, "team", content="old doc", tags=["team"])
    job = claimed_job(bank.id, "team")

    if edit == "clear":
        mental_model_clear(bank_id=bank.id, mental_model_id="team")
    else:
        mental_model_update(bank_id=bank.id, mental_model_id="team", source_query="Who is Alice?")
    follower = Operation.objects.get(dedupe_key=job.key, status=PENDING)

    assert _run_handler(RefreshMentalModelHandler(), job) == "superseded"

    ended = Operation.objects.get(id=job.id)
    assert ended.status == CANCELLED and "superseded" in ended.error_message
    model = MentalModel.objects.get(bank_id=bank.id, mental_model_id="team")
    assert model.last_refresh_failed_at is None  # not paused by a run that no longer counts
    assert not MentalModelHistory.objects.filter(model=model, kind="refresh_failed").exists()
    follower.refresh_from_db()
    assert follower.status == PENDING and follower.retry_count == 0
    assert follower.next_retry_at is None  # runs at once, not after a backoff


def test_a_refresh_whose_model_was_deleted_and_that_fails_ends_cancelled_at_once(
    bank, sent, failing_llm
):
    make_memory(bank, "Alice prefers async communication", embed=True)
    make_mental_model(bank, "team", content="old doc")
    job = claimed_job(bank.id, "team")
    mental_model_delete(bank_id=bank.id, mental_model_id="team")

    assert _run_handler(RefreshMentalModelHandler(), job) == "superseded"
    ended = Operation.objects.get(id=job.id)
    assert ended.status == CANCELLED and ended.retry_count == 0


# --- an edit racing the end of a refresh ------------------------------------------------------


@pytest.mark.parametrize("edit", ["patch", "clear"])
def test_an_edit_that_arrives_while_a_refresh_runs_queues_one_even_if_it_finishes_first(
    bank, monkeypatch, edit
):
    """The refresh commits its write (old configuration) while the edit waits for the lease:
    the edit still arrived while it ran, so one refresh is queued behind it (docs/behaviour.md#edits-during-a-running-refresh)."""
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    make_mental_model(bank, "team", content="old document")
    op = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    operation_claim(operation_id=op.id, holder="test")
    key = refresh_dedupe_key(bank_id=bank.id, mental_model_id="team")

    real_bump = services.lease_bump

    def refresh_finishes_first(*, key: str) -> int:
        Operation.objects.filter(id=op.id).update(status="completed")
        return real_bump(key=key)

    monkeypatch.setattr(services, "lease_bump", refresh_finishes_first)
    if edit == "patch":
        mental_model_update(bank_id=bank.id, mental_model_id="team", source_query="a new question")
    else:
        mental_model_clear(bank_id=bank.id, mental_model_id="team")

    assert Operation.objects.filter(dedupe_key=key, status=PENDING).count() == 1
