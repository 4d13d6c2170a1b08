"""The REST surface of restore and review (docs/api.md): the answers, and a 4xx naming the field
and the rule for every misuse, nothing changed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from tests.factories import make_mental_model
from tests.review.helpers import make_proposal

pytestmark = pytest.mark.django_db

MM = "/v1/default/banks/bank/mental-models"


@pytest.fixture
def model(bank):
    model = make_mental_model(bank, "team", content="# Team\n\nNow.")
    return model


def version(model, content: str = "# Team\n\nBefore.") -> MentalModelHistory:
    return MentalModelHistory.objects.create(model=model, kind="version",
                                             previous_content=content)


def unchanged(model) -> tuple:
    model.refresh_from_db()
    return (model.content, MentalModelHistory.objects.filter(model=model).count(),
            sorted(MentalModelProposal.objects.filter(model=model).values_list("status",
                                                                                flat=True)))


def test_restore_answers_the_model_and_the_history_shows_the_restore(api, model):
    kept = version(model)
    response = api.post(f"{MM}/team/restore", {"version_id": kept.id}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["content"] == "# Team\n\nBefore." and body["id"] == "team"
    assert body["last_memory_seen_at"] is None
    history = api.get(f"{MM}/team/history").json()
    assert [(e["cause"], e["previous_content"]) for e in history] == [
        ("restored", "# Team\n\nNow."), ("refresh", "# Team\n\nBefore.")]
    assert history[0]["id"] != kept.id and history[1]["id"] == kept.id
    assert history[0]["changes"]["counts"]["lines_added"] == 1  # Now. -> Before.
    assert "+Before." in history[0]["changes"]["unified"]


@pytest.mark.parametrize(("body", "status", "loc", "needle"), [
    ([], 422, ["body"], "valid dictionary"),
    ({}, 422, ["body", "version_id"], "Field required"),
    ({"version_id": "7"}, 422, ["body", "version_id"], "valid integer"),
    ({"version_id": 0}, 422, ["body", "version_id"], "greater than or equal to 1"),
    ({"version_id": 1, "extra": 1}, 422, ["body", "extra"], "Extra inputs"),
])
def test_restore_refuses_a_malformed_body(api, model, body, status, loc, needle):
    before = unchanged(model)
    response = api.post(f"{MM}/team/restore", body, format="json")
    assert response.status_code == status, response.content
    [error] = response.json()["detail"]
    assert error["loc"] == loc and needle in error["msg"], error
    assert unchanged(model) == before


def test_restore_refuses_another_models_version_a_failure_and_an_unknown_model(api, bank, model):
    other = make_mental_model(bank, "other", content="other")
    theirs = version(other)
    failure = MentalModelHistory.objects.create(model=model, kind="refresh_failed",
                                                outcome="refresh_failed_error", reason="x")
    before = unchanged(model)
    response = api.post(f"{MM}/team/restore", {"version_id": theirs.id}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": f"Version {theirs.id} not found in the history of "
                                         "mental model 'team'"}
    response = api.post(f"{MM}/team/restore", {"version_id": failure.id}, format="json")
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "version_id"] and "refresh_failed entry" in error["msg"]
    assert api.post(f"{MM}/nope/restore", {"version_id": theirs.id},
                    format="json").status_code == 404
    assert unchanged(model) == before


def test_proposals_list_get_approve_and_the_misuses_of_approve(api, bank, model):
    proposal = make_proposal(model)
    listed = api.get(f"{MM}/team/proposals").json()["items"]
    assert [p["id"] for p in listed] == [str(proposal.id)]
    item = listed[0]
    assert list(item) == ["id", "mental_model_id", "status", "created_at", "expires_at",
                          "decided_at", "reason", "operation_id", "based_on", "content",
                          "changes", "superseded_by", "version_id"]
    assert item["status"] == "pending" and item["changes"]["changed"] is True
    assert api.get(f"{MM}/team/proposals?status=approved").json() == {"items": []}
    bad = api.get(f"{MM}/team/proposals?status=maybe")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "status"]
    assert api.get(f"{MM}/team/proposals/{proposal.id}").json() == item

    response = api.post(f"{MM}/team/proposals/{proposal.id}/approve", {"x": 1}, format="json")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "x"]
    response = api.post(f"{MM}/team/proposals/{proposal.id}/approve")
    assert response.status_code == 200, response.content
    approved = response.json()
    assert approved["status"] == "approved" and approved["version_id"] is not None
    model.refresh_from_db()
    assert model.content == proposal.content
    again = api.post(f"{MM}/team/proposals/{proposal.id}/approve")
    assert again.status_code == 409
    assert again.json() == {"detail": f"Proposal {proposal.id} is approved: only a pending "
                                      "proposal can be approved"}
    assert MentalModelHistory.objects.filter(model=model).count() == 1


@pytest.mark.parametrize("path", ["", "/approve", "/reject"])
def test_a_bad_or_unknown_proposal_id_and_another_models_proposal(api, bank, model, path):
    other = make_mental_model(bank, "other", content="other")
    theirs = make_proposal(other)
    method = api.get if not path else api.post
    body = {"reason": "no"} if path == "/reject" else None
    response = method(f"{MM}/team/proposals/not-a-uuid{path}", body, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "proposal_id"]
    for pid in (uuid.uuid4(), theirs.id):
        response = method(f"{MM}/team/proposals/{pid}{path}", body, format="json")
        assert response.status_code == 404
        assert response.json() == {"detail": f"Proposal {pid} not found for mental model 'team'"}
    assert MentalModelProposal.objects.get(id=theirs.id).status == "pending"


def test_reject_needs_a_reason_and_a_pending_proposal(api, model):
    proposal = make_proposal(model)
    for body in (None, {}, {"reason": "  "}, {"reason": 5}):
        response = api.post(f"{MM}/team/proposals/{proposal.id}/reject", body, format="json")
        assert response.status_code == 422, (body, response.content)
    response = api.post(f"{MM}/team/proposals/{proposal.id}/reject", {"reason": "Wrong team"},
                        format="json")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["reason"]) == ("rejected", "Wrong team")
    again = api.post(f"{MM}/team/proposals/{proposal.id}/approve")
    assert again.status_code == 409 and "is rejected" in again.json()["detail"]
    model.refresh_from_db()
    assert model.content == "# Team\n\nNow."


def test_approving_a_superseded_or_expired_proposal_is_refused(api, model):
    old = make_proposal(model, status="superseded")
    expired = make_proposal(model, expires_at=timezone.now() - timedelta(seconds=1))
    response = api.post(f"{MM}/team/proposals/{old.id}/approve")
    assert response.status_code == 409 and "is superseded" in response.json()["detail"]
    response = api.post(f"{MM}/team/proposals/{expired.id}/approve")
    assert response.status_code == 409 and "expired at" in response.json()["detail"]
    assert MentalModelProposal.objects.get(id=expired.id).status == "expired"
    assert MentalModel.objects.get(uid=model.uid).content == "# Team\n\nNow."


def test_a_trigger_review_that_is_not_a_boolean_is_refused(api, model):
    response = api.patch(f"{MM}/team", {"trigger": {"review": "yes"}}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "trigger", "review"]
    response = api.patch(f"{MM}/team", {"trigger": {"review": True}}, format="json")
    assert response.status_code == 200 and response.json()["trigger"]["review"] is True
