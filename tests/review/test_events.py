"""A restore and an approved proposal send the page event a refresh sends, with the same change
shape (docs/behaviour.md#page-events); a refresh that only proposes sends it with nothing
changed."""

from __future__ import annotations

import json

import pytest

from hindsight.webhooks.models import Webhook, WebhookDelivery
from mentalmodels.models import MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from mentalmodels.review.services import proposal_approve
from mentalmodels.services import mental_model_restore
from tests.factories import make_memory, make_mental_model
from tests.review.helpers import refreshed

pytestmark = pytest.mark.django_db

OLD = "## Team\n\nAlice prefers async."
NEW = "## Team\n\nAlice prefers async standups."


def events() -> list[dict]:
    return [json.loads(d.payload) for d in WebhookDelivery.objects.filter(
        event_type="mental_model.refreshed").order_by("created_at")]


def test_a_proposal_then_its_approval_then_a_restore_each_send_the_page_event(
    bank, scripted_llm, openai_embeddings
):
    Webhook.objects.create(bank=bank, url="https://hooks.example.com/in",
                           event_types=["mental_model.refreshed"])
    model = make_mental_model(bank, "team", tags=["team"], content=OLD,
                              trigger={"review": True})
    fact = make_memory(bank, "Alice prefers async standups", tags=["team"], embed=True)
    refreshed(scripted_llm, bank.id, "team", NEW, [str(fact.id)])
    proposal = MentalModelProposal.objects.get(model=model)

    [proposed] = events()
    assert proposed["data"]["changes"]["changed"] is False  # the page did not change yet
    assert proposed["data"]["outcome"] == "content_written"

    proposal_approve(bank_id=bank.id, mental_model_id="team", proposal_id=proposal.id)
    approved = events()[-1]["data"]
    assert (approved["outcome"], approved["mode"]) == ("approved", "full")
    assert approved["operation_id"] == str(proposal.operation_id)
    assert approved["changes"] == proposal.changes  # the change the reviewer saw

    version = MentalModelHistory.objects.get(model=model)
    mental_model_restore(bank_id=bank.id, mental_model_id="team", version_id=version.id)
    restored = events()[-1]["data"]
    assert (restored["outcome"], restored["mode"]) == ("restored", "restore")
    assert "-Alice prefers async standups." in restored["changes"]["unified"]
    assert "+Alice prefers async." in restored["changes"]["unified"]
    assert len(events()) == 3
