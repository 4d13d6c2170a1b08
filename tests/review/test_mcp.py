"""The review-and-undo MCP tools, driven by the SDK's client over the live server's /mcp: an agent
reads a page's history with each change, restores a version and back, lists a proposal with its
diff, approves one and rejects another; refusals are tool errors carrying the API's message."""

from __future__ import annotations

import pytest
from mcp import Client

from mentalmodels.models import MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from tests.factories import make_bank, make_mental_model
from tests.knowledge.test_mcp import session
from tests.review.helpers import make_proposal
from tests.surfaces.mcp_server.test_mcp import call
from tests.surfaces.mcp_server.test_mcp import call_error as refused

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "mcp-kb"  # the bank session() pins
NOW = "# Team\n\nNow."
BEFORE = "# Team\n\nBefore."


def test_an_agent_restores_a_version_and_reviews_proposals(live_server):
    make_bank(BANK)
    model = make_mental_model(BANK, "team", content=NOW)
    MentalModelHistory.objects.create(model=model, kind="version", previous_content=BEFORE)
    first = make_proposal(model, "# Team\n\nProposed.")

    async def body(client: Client) -> None:
        history = (await call(client, "get_mental_model_history",
                              mental_model_id="team"))["items"]
        [kept] = history
        assert kept["cause"] == "refresh" and "+Now." in kept["changes"]["unified"]
        restored = await call(client, "restore_mental_model_version", mental_model_id="team",
                              version_id=kept["id"])
        assert (restored["status"], restored["content"]) == ("restored", BEFORE)
        undo = (await call(client, "get_mental_model_history", mental_model_id="team"))["items"][0]
        assert undo["cause"] == "restored"
        await call(client, "restore_mental_model_version", mental_model_id="team",
                   version_id=undo["id"])

        listed = await call(client, "list_mental_model_proposals", mental_model_id="team",
                            status="pending")
        assert [p["id"] for p in listed["items"]] == [str(first.id)]
        assert "+Proposed." in listed["items"][0]["changes"]["unified"]
        # Made from NOW, restored twice since: the same page, so still approvable.
        approved = await call(client, "approve_mental_model_proposal", mental_model_id="team",
                              proposal_id=str(first.id))
        assert approved["status"] == "approved" and approved["version_id"]
        message = await refused(client, "approve_mental_model_proposal", mental_model_id="team",
                                proposal_id=str(first.id))
        assert "409" in message and "is approved" in message

        assert "404" in await refused(client, "restore_mental_model_version",
                                      mental_model_id="team", version_id=999999999)

    session(live_server, body)
    model.refresh_from_db()
    assert model.content == "# Team\n\nProposed."
    second = make_proposal(model, "# Team\n\nOther.")

    async def reject(client: Client) -> None:
        rejected = await call(client, "reject_mental_model_proposal", mental_model_id="team",
                              proposal_id=str(second.id), reason="Wrong team")
        assert (rejected["status"], rejected["reason"]) == ("rejected", "Wrong team")
        assert "reason" in await refused(client, "reject_mental_model_proposal",
                                         mental_model_id="team", proposal_id=str(second.id),
                                         reason="")

    session(live_server, reject)
    model.refresh_from_db()
    assert model.content == "# Team\n\nProposed."
    assert MentalModelProposal.objects.filter(model=model, status="rejected").count() == 1
