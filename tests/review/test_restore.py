"""Restore a version (docs/behaviour.md#restore) and the diff every history entry carries
(docs/behaviour.md#history, docs/behaviour.md#the-change-shape)."""

from __future__ import annotations

import json

import pytest

from hindsight.infra.errors import FieldError, NotFound
from mentalmodels.models import MentalModelHistory
from mentalmodels.selectors import mental_model_history
from mentalmodels.services import (
    history_record_failure,
    mental_model_refresh_request,
    mental_model_restore,
)
from mentalmodels.staleness import stale_flags
from operations.errors import FenceLost
from operations.jobs import Job
from operations.leases import operation_claim
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.review.helpers import page, refreshed

pytestmark = pytest.mark.django_db

FIRST = "## Team\n\nAlice prefers async.\n\n## Tools\n\nSlack."
SECOND = "## Team\n\nAlice prefers async standups.\n\n## Tools\n\nSlack and email."
THIRD = "## Team\n\nBob joined.\n\n## Rituals\n\nFriday demos."


@pytest.fixture
def three_versions(bank, scripted_llm, openai_embeddings):
    """A delta model refreshed three times: history keeps "", FIRST and SECOND."""
    fact = make_memory(bank, "Alice prefers async communication", tags=["team"], embed=True)
    model = make_mental_model(bank, "team", tags=["team"], trigger={"mode": "delta"})
    for text in (FIRST, SECOND, THIRD):
        refreshed(scripted_llm, bank.id, "team", text, [str(fact.id)], mode="full")
    return model


def versions(model) -> list[MentalModelHistory]:
    return list(MentalModelHistory.objects.filter(model=model, kind="version")
                .order_by("-changed_at", "-id"))


def test_restore_then_restore_back_is_byte_identical_both_ways(bank, three_versions):
    model = three_versions
    current = page(model)
    assert current[0] == THIRD and model.document is not None
    kept_second = versions(model)[0]  # replaced SECOND: keeps SECOND's page
    assert kept_second.previous_content == SECOND
    second_page = (kept_second.previous_content, page_of_entry(kept_second))

    restored = mental_model_restore(bank_id=bank.id, mental_model_id="team",
                                    version_id=kept_second.id)
    assert page(restored) == second_page
    # The restore is a version of its own, keeping the page it replaced.
    undo = versions(model)[0]
    assert (undo.reason, undo.previous_content) == ("restored", THIRD)

    back = mental_model_restore(bank_id=bank.id, mental_model_id="team", version_id=undo.id)
    assert page(back) == current
    assert [v.reason for v in versions(model)[:2]] == ["restored", "restored"]


def page_of_entry(entry: MentalModelHistory) -> str:
    return json.dumps(entry.previous_document, sort_keys=True)


def test_a_restore_forgets_the_watermark_so_the_model_is_stale(
    bank, three_versions
):
    model = three_versions
    model.refresh_from_db()
    assert model.last_memory_seen_at is not None and not stale_flags([model])[model.uid]
    mental_model_restore(bank_id=bank.id, mental_model_id="team",
                         version_id=versions(model)[1].id)
    model.refresh_from_db()
    assert model.content == FIRST
    assert model.last_memory_seen_at is None and model.last_refresh_source_query is None
    assert stale_flags([model])[model.uid]


def test_the_next_refresh_after_a_restore_reads_the_whole_scope(bank, scripted_llm,
                                                                three_versions):
    model = three_versions
    mental_model_restore(bank_id=bank.id, mental_model_id="team",
                         version_id=versions(model)[1].id)
    report = refreshed(scripted_llm, bank.id, "team", THIRD)
    # A delta model edits the restored page, its window the whole scope (no watermark).
    assert report.plan.effective_mode == "delta" and report.plan.window_after is None


def test_a_restore_supersedes_a_running_refresh_and_queues_none(bank, scripted_llm,
                                                               three_versions):
    model = three_versions
    op = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    claimed = operation_claim(operation_id=op.id, holder="w")
    assert isinstance(claimed, Operation)
    fence = claimed.fence
    mental_model_restore(bank_id=bank.id, mental_model_id="team",
                         version_id=versions(model)[0].id)
    job = Job(claimed, fence=fence, key=claimed.lease_key)
    with pytest.raises(FenceLost):
        job.check_fence()
    assert not Operation.objects.filter(mental_model_id="team", status="pending").exists()


def test_every_version_carries_its_change_to_the_page_after_it(bank, three_versions):
    entries = mental_model_history(bank_id=bank.id, mental_model_id="team")
    newest, middle, oldest = entries
    # newest kept SECOND and was replaced by THIRD (the current page)
    assert newest.changes["changed"] is True
    assert "+Bob joined." in newest.changes["unified"]
    assert "-Alice prefers async standups." in newest.changes["unified"]
    added = {s["id"]: s["change"] for s in newest.changes["sections"]}
    assert added.get("rituals") == "added" and added.get("tools") == "removed"
    # middle kept FIRST, replaced by SECOND (a full rewrite: new blocks in the same sections)
    counts = middle.changes["counts"]
    assert (counts["sections_changed"], counts["sections_added"]) == (2, 0)
    assert (counts["blocks_added"], counts["blocks_removed"]) == (2, 2)
    # the oldest kept the empty page: everything was added
    assert oldest.previous_content == ""
    assert oldest.changes["counts"]["sections_added"] == 2


def test_restore_refuses_a_failure_entry_and_another_models_version(bank, three_versions):
    other = make_mental_model(bank, "other", content="x")
    failure = history_record_failure(model_uid=three_versions.uid, reason="unexpected_error",
                                     exception="boom", operation_id=None)
    assert failure is not None
    with pytest.raises(FieldError, match="refresh_failed entry"):
        mental_model_restore(bank_id=bank.id, mental_model_id="team", version_id=failure.id)
    with pytest.raises(NotFound, match="not found in the history of mental model 'other'"):
        mental_model_restore(bank_id=bank.id, mental_model_id="other",
                             version_id=versions(three_versions)[0].id)
    other.refresh_from_db()
    assert other.content == "x"
    assert not MentalModelHistory.objects.filter(model=other).exists()
