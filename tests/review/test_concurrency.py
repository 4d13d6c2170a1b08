"""Approve and refresh at the same time (docs/behaviour.md#review-before-apply): one of them wins
and nothing is torn, with real concurrent transactions.

The approval bumps the refresh's fence before it locks the model, so a refresh that finishes
after it writes nothing (and one is queued behind the approval); a refresh that finishes first
supersedes the proposal (or, finding nothing to change, moves the watermark), and the approval is
refused. Either way the model's page, its ``reflect_response`` and its history tell one story."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from hindsight.infra.errors import Conflict
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh import pipeline
from mentalmodels.review.models import MentalModelProposal
from mentalmodels.review.services import proposal_approve
from mentalmodels.services import mental_model_refresh_request
from operations.errors import FenceLost
from operations.jobs import Job
from operations.leases import operation_claim, operation_supersede
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.review.helpers import answer_with, make_proposal

pytestmark = pytest.mark.django_db(transaction=True)

OLD = "## Team\n\nAlice prefers async."
PROPOSED = "## Team\n\nAlice prefers async standups."
OTHER = "## Team\n\nBob joined."


@pytest.fixture
def bank_id() -> str:
    return "review-race"


@pytest.fixture
def reviewed(bank, scripted_llm, openai_embeddings):
    """A model under review with a memory in scope; returns the model and the memory."""
    fact = make_memory(bank, "Alice prefers async standups", tags=["team"], embed=True)
    model = make_mental_model(bank, "team", tags=["team"], content=OLD,
                              trigger={"review": True})
    return model, fact


def claimed_job(bank_id: str) -> Job:
    op = mental_model_refresh_request(bank_id=bank_id, mental_model_id="team")
    claimed = operation_claim(operation_id=op.id, holder="race")
    assert isinstance(claimed, Operation)
    return Job(claimed, fence=claimed.fence, key=claimed.lease_key)


def test_an_approval_that_lands_while_a_refresh_runs_wins_and_the_refresh_writes_nothing(
    bank, scripted_llm, reviewed
):
    model, fact = reviewed
    proposal = make_proposal(model, PROPOSED)
    job = claimed_job(bank.id)
    answer_with(scripted_llm, OLD, [str(fact.id)])  # it would move the watermark and answer

    proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    with pytest.raises(FenceLost):
        pipeline.refresh_run(job=job)

    model.refresh_from_db()
    assert model.content == PROPOSED and model.reflect_response == proposal.reflect_response
    assert MentalModelHistory.objects.filter(model=model).count() == 1
    assert MentalModelProposal.objects.get(id=proposal.id).status == "approved"
    # The refresh it fenced out is owed: one queued behind the approval.
    assert Operation.objects.filter(mental_model_id="team", status="pending").count() == 1


def test_a_refresh_that_finishes_first_supersedes_the_proposal_and_the_approval_is_refused(
    bank, scripted_llm, reviewed
):
    model, fact = reviewed
    proposal = make_proposal(model, PROPOSED)
    job = claimed_job(bank.id)
    answer_with(scripted_llm, OTHER, [str(fact.id)])
    pipeline.refresh_run(job=job)

    with pytest.raises(Conflict, match="is superseded"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    model.refresh_from_db()
    assert model.content == OLD
    newer = MentalModelProposal.objects.get(model=model, status="pending")
    assert newer.content == OTHER
    assert MentalModelProposal.objects.get(id=proposal.id).superseded_by_id == newer.id
    assert not MentalModelHistory.objects.filter(model=model).exists()


@pytest.mark.parametrize("answer", [OLD, OTHER], ids=["refresh-keeps-the-page",
                                                      "refresh-proposes"])
def test_approve_and_refresh_racing_end_with_one_winner_and_nothing_torn(
    bank, scripted_llm, reviewed, answer
):
    model, fact = reviewed
    outcomes = []
    for round_ in range(6):
        MentalModel.objects.filter(uid=model.uid).update(content=OLD, document=None,
                                                         reflect_response=None)
        MentalModelProposal.objects.filter(model=model).delete()
        Operation.objects.filter(mental_model_id="team").delete()
        model.refresh_from_db()
        proposal = make_proposal(model, PROPOSED)
        job = claimed_job(bank.id)
        answer_with(scripted_llm, answer, [str(fact.id)])
        versions_before = MentalModelHistory.objects.filter(model=model).count()
        start = threading.Barrier(2)
        refresh_done = threading.Event()
        results: dict[str, object] = {}

        def refresh() -> None:
            try:
                start.wait(5)
                pipeline.refresh_run(job=job)
                results["refresh"] = "completed"
            except FenceLost:
                results["refresh"] = "fenced out"
                operation_supersede(operation_id=job.operation.id, fence=job.fence,
                                    message="test: fenced out")
            finally:
                refresh_done.set()
                connection.close()

        def approve() -> None:
            try:
                start.wait(5)
                if round_ == 5:  # the last round's refresh surely first: both orders occur
                    refresh_done.wait(30)
                time.sleep(round_ * 0.05)  # from "at once" to "after the refresh's LLM calls"
                proposal_approve(bank_id=bank.id, mental_model_id="team",
                                 proposal_id=proposal.id)
                results["approve"] = "approved"
            except Conflict:
                results["approve"] = "refused"
            finally:
                connection.close()

        threads = [threading.Thread(target=refresh), threading.Thread(target=approve)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        model.refresh_from_db()
        proposal.refresh_from_db()
        added = MentalModelHistory.objects.filter(model=model).count() - versions_before
        pending = MentalModelProposal.objects.filter(model=model, status="pending").count()
        assert pending <= 1
        if results["approve"] == "approved":
            # The approval won: the proposal's page, whole, and one version for it.
            assert proposal.status == "approved" and added == 1
            assert (model.content, model.reflect_response) == (PROPOSED,
                                                               proposal.reflect_response)
            assert model.last_memory_seen_at == proposal.watermark
        else:
            # The refresh won: the page untouched, the proposal superseded or out of date.
            assert results["refresh"] == "completed" and added == 0
            assert proposal.status == "superseded" and model.content == OLD
            if answer == OLD:  # it kept the page and read the memories: the answer is OLD's
                assert model.reflect_response["text"] == OLD
        outcomes.append((results["approve"], results["refresh"]))
    # Both orders happened; every round ended whole.
    assert {approve for approve, _ in outcomes} == {"approved", "refused"}, outcomes
