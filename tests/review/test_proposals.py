"""Review before apply (docs/behaviour.md#review-before-apply): a refresh of a model under review
writes a proposal; approve applies it as a version, reject keeps a reason; a newer proposal
supersedes an older one; proposals expire; automatic refreshes do not pile up behind one; a
proposal of a paused model or of a spent bank."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from hindsight.banks.budget import BudgetSpent
from hindsight.banks.models import Bank
from hindsight.infra.errors import Conflict, FieldError
from hindsight.infra.llm.models import LLMRequest
from hindsight.infra.tagscope import TagScope
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.reflect.mm_search import mental_models_search
from mentalmodels.refresh import pipeline
from mentalmodels.review.models import MentalModelProposal
from mentalmodels.review.services import (
    proposal_approve,
    proposal_reject,
    proposals_expire,
)
from mentalmodels.services import (
    mental_model_refresh_request,
    mental_model_refresh_submit,
    mental_model_restore,
)
from mentalmodels.staleness import stale_flags
from mentalmodels.tasks import cron_tick
from mentalmodels.triggers_auto import SKIPPED_REVIEW, mental_model_refresh_auto
from operations.jobs import Job
from operations.leases import operation_claim
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import last_operation
from tests.review.helpers import answer_with, page, refreshed

pytestmark = pytest.mark.django_db

OLD = "## Team\n\nAlice prefers async."
NEW = "## Team\n\nAlice prefers async standups.\n\n## Tools\n\nSlack."
NEWER = "## Team\n\nBob joined the team."


@pytest.fixture
def reviewed(bank, scripted_llm, openai_embeddings):
    """A model under review with a page and a memory newer than its watermark (stale)."""
    model = make_mental_model(bank, "team", tags=["team"], content=OLD, fresh=True,
                              trigger={"review": True})
    fact = make_memory(bank, "Alice prefers async standups", tags=["team"], embed=True)
    model.fact = fact
    return model


def propose(server, model, text: str = NEW, **kwargs) -> MentalModelProposal:
    refreshed(server, model.bank_id, model.mental_model_id, text, [str(model.fact.id)], **kwargs)
    return MentalModelProposal.objects.filter(model_id=model.uid).latest("created_at")


def test_a_refresh_under_review_proposes_and_leaves_the_page_and_its_staleness(
    bank, scripted_llm, reviewed
):
    model = reviewed
    before_page = page(model)
    watermark = model.last_memory_seen_at
    assert stale_flags([model])[model.uid]

    proposal = propose(scripted_llm, model)

    assert proposal.status == "pending" and proposal.content == NEW
    assert proposal.operation_id == last_operation(bank_id=bank.id, mental_model_id="team").id
    assert [m["id"] for m in proposal.reflect_response["based_on"]["world"]] == [
        str(model.fact.id)]
    assert proposal.changes["changed"] and "+Alice prefers async standups." in \
        proposal.changes["unified"]
    assert {s["id"]: s["change"] for s in proposal.changes["sections"]}["tools"] == "added"
    assert proposal.watermark == model.fact.updated_at
    # The page, its watermark and its history stay; the model still reads stale.
    assert page(model) == before_page
    model.refresh_from_db()
    assert model.last_memory_seen_at == watermark and model.last_refreshed_at is not None
    assert stale_flags([model])[model.uid]
    assert not MentalModelHistory.objects.filter(model=model).exists()


def test_reflect_reads_the_current_page_while_a_proposal_waits(bank, scripted_llm, reviewed):
    model = reviewed
    propose(scripted_llm, model)
    search = mental_models_search(bank_id=bank.id, query="standups", scope=TagScope())
    [found] = [r.model for r in search.ranked if r.model.mental_model_id == "team"]
    assert found.content == OLD


def test_approve_applies_the_proposal_as_a_version_of_its_own(bank, scripted_llm, reviewed):
    model = reviewed
    proposal = propose(scripted_llm, model)

    approved = proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)

    model.refresh_from_db()
    assert approved.status == "approved" and approved.decided_at is not None
    assert model.content == NEW and model.document == proposal.document
    assert model.last_memory_seen_at == proposal.watermark
    assert model.reflect_response["based_on"] == proposal.reflect_response["based_on"]
    assert not stale_flags([model])[model.uid]
    [version] = MentalModelHistory.objects.filter(model=model)
    assert (version.reason, version.previous_content) == ("approved", OLD)
    assert approved.version_id == version.id and version.operation_id == proposal.operation_id
    # Approving twice: refused, nothing applied again.
    with pytest.raises(Conflict, match="is approved: only a pending proposal can be approved"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    assert MentalModelHistory.objects.filter(model=model).count() == 1


def test_undoing_an_approval_restores_the_page_it_replaced(bank, scripted_llm, reviewed):
    model = reviewed
    before = page(model)
    approved = proposal_approve(bank_id=bank.id, mental_model_id="team",
                                proposal_id=propose(scripted_llm, model).id)
    mental_model_restore(bank_id=bank.id, mental_model_id="team", version_id=approved.version_id)
    assert page(model) == before


def test_reject_keeps_the_reason_and_the_page(bank, scripted_llm, reviewed):
    model = reviewed
    before = page(model)
    proposal = propose(scripted_llm, model)
    with pytest.raises(FieldError, match="reason is required"):
        proposal_reject(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id,
                        reason="  ")
    rejected = proposal_reject(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id,
                               reason="Standups are not async here")
    assert (rejected.status, rejected.reason) == ("rejected", "Standups are not async here")
    assert page(model) == before
    with pytest.raises(Conflict, match="is rejected"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    with pytest.raises(Conflict, match="is rejected"):
        proposal_reject(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id,
                        reason="again")
    assert page(model) == before


def test_a_newer_proposal_supersedes_the_pending_one(bank, scripted_llm, reviewed):
    model = reviewed
    first = propose(scripted_llm, model)
    second = propose(scripted_llm, model, NEWER)
    first.refresh_from_db()
    assert first.status == "superseded" and first.superseded_by_id == second.id
    assert first.reason == "superseded by a newer proposal"
    assert list(MentalModelProposal.objects.filter(model_id=model.uid, status="pending")) == [
        second]
    with pytest.raises(Conflict, match="is superseded"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=first.id)
    proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=second.id)
    model.refresh_from_db()
    assert model.content == NEWER


def test_a_refresh_that_changes_nothing_proposes_nothing(bank, scripted_llm, reviewed):
    model = reviewed
    refreshed(scripted_llm, bank.id, "team", OLD, [str(model.fact.id)])
    assert not MentalModelProposal.objects.exists()
    model.refresh_from_db()
    assert model.last_memory_seen_at == model.fact.updated_at  # read, nothing to review


def test_the_bank_default_and_the_model_s_own_switch(bank, scripted_llm, reviewed):
    model = reviewed
    Bank.objects.filter(id=bank.id).update(config={"mental_model_review": True})
    MentalModel.objects.filter(uid=model.uid).update(trigger={**model.trigger, "review": None})
    assert propose(scripted_llm, model).status == "pending"
    # The model's own false wins over the bank's true: applied at once.
    MentalModel.objects.filter(uid=model.uid).update(trigger={**model.trigger, "review": False})
    refreshed(scripted_llm, bank.id, "team", NEWER, [str(model.fact.id)])
    model.refresh_from_db()
    assert model.content == NEWER


def test_a_restore_makes_a_pending_proposal_unapprovable(bank, scripted_llm, reviewed):
    model = reviewed
    proposal_approve(bank_id=bank.id, mental_model_id="team",
                     proposal_id=propose(scripted_llm, model).id)
    pending = propose(scripted_llm, model, NEWER)
    version = MentalModelHistory.objects.get(model=model)
    mental_model_restore(bank_id=bank.id, mental_model_id="team", version_id=version.id)
    with pytest.raises(Conflict, match="no longer the current one"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=pending.id)
    pending.refresh_from_db()
    assert pending.status == "superseded"
    model.refresh_from_db()
    assert model.content == OLD


def test_a_proposal_left_behind_by_a_restore_holds_back_no_automatic_refresh(
    bank, scripted_llm, reviewed
):
    model = reviewed
    proposal_approve(bank_id=bank.id, mental_model_id="team",
                     proposal_id=propose(scripted_llm, model).id)
    make_memory(bank, "Bob joined the team", tags=["team"], embed=True)  # stale again
    propose(scripted_llm, model, NEWER)
    model.refresh_from_db()
    assert mental_model_refresh_auto(model=model, reason="cron").action == SKIPPED_REVIEW
    mental_model_restore(bank_id=bank.id, mental_model_id="team",
                         version_id=MentalModelHistory.objects.get(model=model).id)
    model.refresh_from_db()
    # Still pending (approving it would be refused), but no longer approvable: the restored
    # page is stale and its automatic refreshes run.
    assert MentalModelProposal.objects.filter(model=model, status="pending").exists()
    assert mental_model_refresh_auto(model=model, reason="cron").action == "queued"


def test_proposals_expire_by_the_beat_and_at_approval(bank, scripted_llm, reviewed, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             mental_model_proposal_ttl_seconds=60.0)
    model = reviewed
    proposal = propose(scripted_llm, model)
    assert 55 <= (proposal.expires_at - proposal.created_at).total_seconds() <= 65
    assert cron_tick()["proposals_expired"] == 0  # not yet
    assert proposals_expire(now=timezone.now() + timedelta(seconds=61)) == 1
    proposal.refresh_from_db()
    assert proposal.status == "expired" and "60 s" in proposal.reason
    with pytest.raises(Conflict, match="is expired"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)

    # Past its time before the sweep came: approving marks it expired and refuses.
    late = propose(scripted_llm, model, NEWER)
    MentalModelProposal.objects.filter(id=late.id).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(Conflict, match="expired at"):
        proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=late.id)
    late.refresh_from_db()
    assert late.status == "expired"
    assert cron_tick()["proposals_expired"] == 0
    model.refresh_from_db()
    assert model.content == OLD


def test_automatic_refreshes_do_not_pile_up_behind_a_pending_proposal(
    bank, scripted_llm, reviewed
):
    model = reviewed
    running = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    claimed = operation_claim(operation_id=running.id, holder="w")
    assert isinstance(claimed, Operation)
    # An automatic refresh queued behind the running one.
    queued = mental_model_refresh_submit(model=model, automatic=True,
                                         not_before=timezone.now() + timedelta(hours=1))
    answer_with(scripted_llm, NEW, [str(model.fact.id)])
    pipeline.refresh_run(job=Job(claimed, fence=claimed.fence, key=claimed.lease_key))
    proposal = MentalModelProposal.objects.get(model_id=model.uid)
    assert proposal.status == "pending"
    # The proposal cancelled the automatic refresh queued behind it ...
    cancelled = Operation.objects.get(id=queued.id)
    assert cancelled.status == "cancelled" and "waits for review" in cancelled.error_message
    # ... and automatic triggers queue none while it waits (the model is stale).
    model.refresh_from_db()
    assert mental_model_refresh_auto(model=model, reason="cron").action == SKIPPED_REVIEW
    assert not Operation.objects.filter(mental_model_id="team", status="pending").exists()
    # A manual refresh still runs (and its proposal supersedes the pending one).
    assert mental_model_refresh_request(bank_id=bank.id, mental_model_id="team").status == \
        "pending"
    Operation.objects.filter(mental_model_id="team", status="pending").update(status="cancelled")
    proposal_reject(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id,
                    reason="no")
    # Reviewed: the automatic triggers resume (the model is still stale).
    assert mental_model_refresh_auto(model=model, reason="cron").action == "queued"


def test_a_paused_model_s_proposal_can_be_approved_and_the_pause_stays(
    bank, scripted_llm, reviewed
):
    model = reviewed
    proposal = propose(scripted_llm, model)
    MentalModel.objects.filter(uid=model.uid).update(last_refresh_failed_at=timezone.now(),
                                                     last_refresh_failure_transient=False)
    model.refresh_from_db()
    assert model.paused
    assert mental_model_refresh_auto(model=model, reason="cron").action == "skipped_paused"
    proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    model.refresh_from_db()
    assert model.content == NEW and model.paused


def test_a_refresh_under_review_of_a_paused_model_lifts_the_pause(bank, scripted_llm, reviewed):
    model = reviewed
    MentalModel.objects.filter(uid=model.uid).update(last_refresh_failed_at=timezone.now(),
                                                     last_refresh_failure_transient=False)
    propose(scripted_llm, model)  # a manual refresh runs while paused, and succeeds
    model.refresh_from_db()
    assert not model.paused and model.content == OLD


def test_a_spent_bank_s_proposal_is_approved_without_the_llm(bank, scripted_llm, reviewed,
                                                            settings):
    model = reviewed
    proposal = propose(scripted_llm, model)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_token_budget_per_day=10)
    LLMRequest.objects.create(bank_id=bank.id, status="success", input_tokens=50,
                              output_tokens=0, started_at=timezone.now())
    with pytest.raises(BudgetSpent):
        mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    requests = len(scripted_llm.requests)
    proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    model.refresh_from_db()
    assert model.content == NEW and len(scripted_llm.requests) == requests
