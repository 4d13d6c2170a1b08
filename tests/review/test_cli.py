"""``hindsight mental-model restore|proposals|approve|reject`` in-process against the live server
over HTTP: JSON output is the API's answer, the table says what happened, a refused call is one
line and exit code 1."""

from __future__ import annotations

import pytest

from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from tests.factories import make_bank, make_mental_model
from tests.review.helpers import make_proposal
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-review"
NOW = "# Team\n\nNow."
BEFORE = "# Team\n\nBefore."


@pytest.fixture
def cli(live_server):
    make_bank(BANK)
    return cli_against(live_server.url)


def test_restore_then_restore_back_and_the_history_names_the_ids(cli):
    model = make_mental_model(BANK, "team", content=NOW)
    kept = MentalModelHistory.objects.create(model=model, kind="version", previous_content=BEFORE)
    restored = as_json(cli("-o", "json", "mental-model", "restore", BANK, "team", str(kept.id)))
    assert restored["content"] == BEFORE
    history = as_json(cli("-o", "json", "mental-model", "history", BANK, "team"))
    assert [e["cause"] for e in history] == ["restored", "refresh"]
    table = cli("-o", "table", "mental-model", "history", BANK, "team").stdout
    assert f"id {history[0]['id']} (restored)" in table and "+Before." in table
    assert "Restored version" in cli("-o", "table", "mental-model", "restore", BANK, "team",
                                     str(history[0]["id"])).stdout
    assert MentalModel.objects.get(uid=model.uid).content == NOW


def test_proposals_approve_and_reject(cli):
    model = make_mental_model(BANK, "team", content=NOW)
    first = make_proposal(model, "# Team\n\nProposed.")
    listed = as_json(cli("-o", "json", "mental-model", "proposals", BANK, "team"))
    assert [p["id"] for p in listed["items"]] == [str(first.id)]
    table = cli("-o", "table", "mental-model", "proposals", BANK, "team").stdout
    assert str(first.id) in table and "+Proposed." in table and "pending" in table

    approved = cli("-o", "table", "mental-model", "approve", BANK, "team", str(first.id)).stdout
    version = MentalModelHistory.objects.get(model=model)
    assert f"version {version.id}" in approved
    assert MentalModel.objects.get(uid=model.uid).content == "# Team\n\nProposed."

    model.refresh_from_db()
    second = make_proposal(model, "# Team\n\nOther.")
    rejected = as_json(cli("-o", "json", "mental-model", "reject", BANK, "team", str(second.id),
                           "--reason", "Not ours"))
    assert (rejected["status"], rejected["reason"]) == ("rejected", "Not ours")
    assert as_json(cli("-o", "json", "mental-model", "proposals", BANK, "team", "--status",
                       "pending")) == {"items": []}


def test_a_refused_review_call_is_one_line_and_exit_code_1(cli):
    model = make_mental_model(BANK, "team", content=NOW)
    proposal = make_proposal(model, status="rejected")
    refused = cli("mental-model", "approve", BANK, "team", str(proposal.id), code=1)
    assert str(refused.exception) == (
        f"HTTP 409: Proposal {proposal.id} is rejected: only a pending proposal can be approved")
    refused = cli("mental-model", "restore", BANK, "team", "999999999", code=1)
    assert str(refused.exception) == (
        "HTTP 404: Version 999999999 not found in the history of mental model 'team'")
    refused = cli("mental-model", "reject", BANK, "team", "nope", "--reason", "x", code=1)
    assert "HTTP 422: path.proposal_id: proposal_id must be a UUID" in str(refused.exception)
    assert MentalModelProposal.objects.get(id=proposal.id).status == "rejected"
