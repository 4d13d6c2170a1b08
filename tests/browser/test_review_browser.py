"""Review before apply in the admin, in a real browser against a live server: a proposal's page
shows its change side by side with the current page, and the curator approves it from there (the
model reads the proposed page, the approval is a version of its own); another is rejected with a
reason (docs/behaviour.md#review-before-apply), and the approval is undone from the history's diff
page (docs/behaviour.md#restore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from tests.factories import make_mental_model
from tests.review.helpers import make_proposal

pytestmark = pytest.mark.integration

BANK = "browser-review"
LIST = "/admin/review/mentalmodelproposal/"


@pytest.fixture
def bank_id() -> str:
    return BANK


def test_approve_a_proposal_from_its_side_by_side_diff_then_reject_another(
    admin_page, live_server, bank, screenshots: Path
):
    page = admin_page
    model = make_mental_model(BANK, "team", name="Team",
                              content="## Team\n\nAlice prefers async.\n")
    proposal = make_proposal(model, "## Team\n\nAlice prefers async standups.\n\n## Tools\n\n"
                                    "Slack.\n")

    page.goto(f"{live_server.url}{LIST}")
    page.click("a.proposal-review:text-is('review')")
    page.wait_for_url(f"**/{proposal.id}/review/")
    left = page.locator("table.diff td.diff_left").all_inner_texts()
    right = page.locator("table.diff td.diff_right").all_inner_texts()
    assert "Alice prefers async." in left and "Alice prefers async standups." in right
    assert "Slack." in right and "Slack." not in left
    assert "Tools: added" in page.inner_text("ul.proposal-sections")
    page.screenshot(path=str(screenshots / "proposal.png"), full_page=True)

    page.click("#approve-proposal")
    page.wait_for_url(f"**/{proposal.id}/review/")
    assert "Approved" in page.inner_text("ul.messagelist")
    assert page.inner_text("strong.proposal-status") == "approved"
    assert page.locator("#approve-proposal").count() == 0  # decided: no buttons
    model.refresh_from_db()
    assert model.content == proposal.content
    [version] = MentalModelHistory.objects.filter(model=model)
    assert (version.reason, version.previous_content) == ("approved",
                                                          "## Team\n\nAlice prefers async.\n")

    other = make_proposal(MentalModel.objects.get(uid=model.uid), "## Team\n\nBob.\n")
    page.goto(f"{live_server.url}{LIST}{other.id}/review/")
    page.fill("#reject-reason", "Bob is on another team")
    page.click("#reject-proposal")
    page.wait_for_url(f"**/{other.id}/review/")
    assert "Rejected" in page.inner_text("ul.messagelist")
    other.refresh_from_db()
    assert (other.status, other.reason) == ("rejected", "Bob is on another team")
    assert MentalModel.objects.get(uid=model.uid).content == proposal.content
    assert (screenshots / "proposal.png").stat().st_size > 0

    # Undo the approval: the version it recorded, restored from its diff page.
    page.goto(f"{live_server.url}/admin/mentalmodels/mentalmodel/{model.uid}/diff/{version.id}/")
    page.click("#restore-version")
    page.wait_for_url(f"**/mentalmodel/{model.uid}/change/")
    assert "Restored" in page.inner_text("ul.messagelist")
    assert MentalModel.objects.get(uid=model.uid).content == "## Team\n\nAlice prefers async.\n"
    assert MentalModelProposal.objects.filter(status="pending").count() == 0
