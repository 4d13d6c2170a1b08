"""The retraction step of a delta refresh (docs/behaviour.md#retracted-facts): memories a page cites
that were removed or edited since its watermark are shown to the edit call as retracted, its
operations take out what rested on them, and the result, the trace and the dry run name them."""

from __future__ import annotations

import pytest
from django.db import transaction

from fakes.delta_llm import delta_llm, remove_retracted
from fakes.llm_server import Reply
from hindsight.banks import curation
from hindsight.banks.models import MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.db import ClockTimestamp
from mentalmodels.api.preview import MentalModelDryRunRefreshResultSerializer
from mentalmodels.models import MentalModel
from mentalmodels.refresh.pipeline import (
    RETRACTED_EVERYTHING,
    RETRACTION_IGNORED,
    RETRACTION_STANDS,
    refresh_dry_run,
)
from mentalmodels.staleness import is_stale
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import last_operation, refresh_run

pytestmark = pytest.mark.django_db

DOC = "## Team\n\n- Alice leads the team\n\n- Bob runs the release\n\n## Log\n\n- started"


@pytest.fixture(autouse=True)
def _scripted(scripted_llm, openai_embeddings):
    return scripted_llm


def cited(model: MentalModel) -> set[str]:
    based_on = model.reflect_response["based_on"]
    return {e["id"] for key in ("world", "experience", "opinion", "observation")
            for e in based_on.get(key) or []}


def page(bank, scripted_llm, texts=("Alice leads the team", "Bob runs the release"), doc=DOC):
    """A delta page whose first (full) refresh wrote ``doc`` citing one memory per text."""
    memories = [make_memory(bank, text, embed=True) for text in texts]
    model = make_mental_model(bank, "team", trigger={"mode": "delta", "keep_trace": True})
    delta_llm(scripted_llm, lambda call: [], answer=doc)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == doc and cited(model) == {str(m.id) for m in memories}
    scripted_llm.reset()
    return model, memories


def edit(memory: MemoryUnit, text: str) -> None:
    """An edit as a write makes it: the text changed, stamped by the write clock."""
    with transaction.atomic():
        hold_bank_write_lock(memory.bank_id)
        MemoryUnit.objects.filter(id=memory.id).update(text=text, updated_at=ClockTimestamp())


def retraction(ids, texts, *, applied=True, edited=()):
    return {"fact_ids": [str(i) for i in ids], "fact_texts": list(texts), "applied": applied,
            "deferred_reason": None, "edited_fact_ids": [str(i) for i in edited]}


def test_a_deleted_fact_is_shown_retracted_and_the_claim_resting_on_it_is_removed(
    bank, scripted_llm
):
    model, (alice, bob) = page(bank, scripted_llm)
    MemoryUnit.objects.filter(id=bob.id).delete()
    calls = delta_llm(scripted_llm, remove_retracted)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    # Nothing new in the window: the edit call alone, shown the retracted fact as recorded.
    assert len(scripted_llm.requests) == 1
    assert [(c.retracted, c.facts) for c in calls] == [
        ([("Bob runs the release", "removed", None)], [])]
    assert "Retracted facts" in calls[0].body["messages"][1]["content"]
    model.refresh_from_db()
    assert model.content == "## Team\n\n- Alice leads the team\n\n## Log\n\n- started"
    assert report.plan.effective_mode == "delta" and report.outcome.outcome == "content_written"
    assert cited(model) == {str(alice.id)}  # the gone memory is no longer cited
    expected = retraction([bob.id], ["Bob runs the release"])
    trace = model.reflect_response["trace"]
    assert trace["retraction"] == expected
    assert [a["operation"]["op"] for a in trace["delta_operations"]["applied"]] == ["remove_block"]
    assert last_operation(bank_id=bank.id, mental_model_id="team").result_metadata[
        "retraction"] == expected
    # Retracted once: the next refresh has nothing to retract and nothing new, so no LLM call.
    scripted_llm.reset()
    again = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert scripted_llm.requests == [] and again.trace["retraction"] is None


def test_an_edited_fact_is_shown_with_its_new_text_and_the_claim_is_rewritten(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    edit(bob, "Bob and Carol run the release")
    calls = delta_llm(scripted_llm, remove_retracted)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    # The edit is in the window too: the reflect loop ran and cited it again.
    assert [(c.retracted, c.facts) for c in calls] == [
        ([("Bob runs the release", "edited", "Bob and Carol run the release")],
         ["Bob and Carol run the release"])]
    # Shown in the edit call the window's facts get anyway: not one call more.
    assert [c["scope"] for c in report.trace["llm_calls"]] == [
        "agent_1", "agent_2", "agent_3", "delta_1"]
    model.refresh_from_db()
    assert model.content == DOC.replace("Bob runs the release", "Bob and Carol run the release")
    assert report.plan.effective_mode == "delta"
    world = {e["id"]: e["text"] for e in model.reflect_response["based_on"]["world"]}
    assert world == {str(alice.id): "Alice leads the team",
                     str(bob.id): "Bob and Carol run the release"}
    assert model.reflect_response["trace"]["retraction"] == retraction(
        [bob.id], ["Bob runs the release"], edited=[bob.id])


def test_an_invalidated_fact_makes_the_page_stale_and_its_next_delta_refresh_removes_the_claim(
    bank, scripted_llm
):
    model, (alice, bob) = page(bank, scripted_llm)
    curation.memory_update(bank_id=bank.id, memory_id=str(bob.id), edits={},
                           state="invalidated", reason="Bob left")
    assert is_stale(MentalModel.objects.get(uid=model.uid))
    calls = delta_llm(scripted_llm, remove_retracted)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    # The window holds the change and no memory: the edit call alone, shown the retraction.
    assert len(scripted_llm.requests) == 1
    assert [(c.retracted, c.facts) for c in calls] == [
        ([("Bob runs the release", "removed", None)], [])]
    model.refresh_from_db()
    assert model.content == "## Team\n\n- Alice leads the team\n\n## Log\n\n- started"
    assert not is_stale(model) and cited(model) == {str(alice.id)}
    expected = retraction([bob.id], ["Bob runs the release"])
    assert report.trace["retraction"] == model.reflect_response["trace"]["retraction"] == expected
    assert last_operation(bank_id=bank.id, mental_model_id="team").result_metadata[
        "retraction"] == expected


def test_a_fact_edited_through_the_api_is_retracted_as_edited(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    curation.memory_update(bank_id=bank.id, memory_id=str(bob.id),
                           edits={"text": "Carol runs the release"})
    calls = delta_llm(scripted_llm, remove_retracted)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    assert [c.retracted for c in calls] == [
        [("Bob runs the release", "edited", "Carol runs the release")]]
    model.refresh_from_db()
    assert model.content == DOC.replace("Bob runs the release", "Carol runs the release")


def test_a_citation_kept_without_text_is_shown_with_the_archived_or_last_recorded_text(
    bank, scripted_llm
):
    texts = ("Alice leads the team", "Bob runs the release", "Carol writes the docs")
    model, (alice, bob, carol) = page(
        bank, scripted_llm, texts=texts, doc="## Team\n\n" + "\n\n".join(f"- {t}" for t in texts))
    response = model.reflect_response
    for entry in response["based_on"]["world"]:
        entry.pop("text")  # a page written before citations kept their text
    MentalModel.objects.filter(uid=model.uid).update(reflect_response=response)
    curation.memory_update(bank_id=bank.id, memory_id=str(bob.id), edits={},
                           state="invalidated")  # in the archive
    with transaction.atomic():  # deleted: its change row recorded what it said
        stamp = hold_bank_write_lock(bank.id)
        curation.memories_remove(bank_id=bank.id, rows=[MemoryUnit.objects.get(id=carol.id)],
                                 stamp=stamp)
    calls = delta_llm(scripted_llm, remove_retracted)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    assert sorted(c.retracted for c in calls) == [sorted([
        ("Bob runs the release", "removed", None), ("Carol writes the docs", "removed", None)])]
    model.refresh_from_db()
    # (The block before a removed last one keeps its separator: the document's own rule.)
    assert model.content.rstrip() == "## Team\n\n- Alice leads the team"


def test_a_fact_tagged_out_of_the_page_scope_is_retracted_as_removed(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    MentalModel.objects.filter(uid=model.uid).update(tags=["team"])
    MemoryUnit.objects.filter(id=alice.id).update(tags=["team"])
    MemoryUnit.objects.filter(id=bob.id).update(tags=["other"])
    calls = delta_llm(scripted_llm, remove_retracted)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    assert [c.retracted for c in calls] == [[("Bob runs the release", "removed", None)]]


def test_an_edit_that_keeps_the_text_retracts_nothing(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    edit(bob, "Bob runs the release")  # re-stamped, same text
    calls = delta_llm(scripted_llm, remove_retracted)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert [c.retracted for c in calls] == [[]]
    assert "Retracted facts" not in calls[0].body["messages"][1]["content"]
    assert report.trace["retraction"] is None


def test_a_page_with_nothing_retracted_makes_the_same_calls_with_the_same_prompt(
    bank, scripted_llm
):
    page(bank, scripted_llm)
    make_memory(bank, "Dana joined the team", embed=True)
    calls = delta_llm(scripted_llm, remove_retracted)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    # The reflect loop's turns and the one edit call: no call of its own for retractions.
    scopes = [c["scope"] for c in report.trace["llm_calls"]]
    assert scopes == ["agent_1", "agent_2", "agent_3", "delta_1"]
    assert len(scripted_llm.requests) == len(scopes) and len(calls) == 1
    assert calls[0].retracted == [] and calls[0].facts == ["Dana joined the team"]
    assert "Retracted" not in calls[0].body["messages"][1]["content"]
    assert report.trace["retraction"] is None and report.trace["effective_mode"] == "delta"


def test_an_answer_that_ignores_the_retraction_rewrites_the_page_in_full(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    MemoryUnit.objects.filter(id=bob.id).delete()
    rewrite = "## Team\n\n- Alice leads the team"
    calls = delta_llm(scripted_llm, lambda call: [
        {"op": "append_block", "section_id": "log", "markdown": "- nothing to remove"}],
        answer=rewrite)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert len(calls) == 1  # asked once; the full rewrite asks for no edits
    model.refresh_from_db()
    assert model.content == rewrite
    assert (report.plan.requested_mode, report.plan.effective_mode,
            report.plan.mode_fallback_reason) == ("delta", "full", None)
    trace = model.reflect_response["trace"]
    assert trace["effective_mode"] == "full" and RETRACTION_IGNORED in trace["warnings"]
    assert trace["retraction"] == retraction([bob.id], ["Bob runs the release"])
    assert cited(model) == {str(alice.id)}
    # The rewrite is stored split: the next delta refresh edits it again.
    scripted_llm.reset()
    make_memory(bank, "Dana joined the team", embed=True)
    delta_llm(scripted_llm, remove_retracted)
    assert refresh_run(bank_id=bank.id, mental_model_id="team").plan.effective_mode == "delta"


def test_edits_that_would_empty_the_page_rewrite_it_in_full_instead(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm, doc="## Team\n\n- Alice leads the team, Bob "
                               "runs the release")
    MemoryUnit.objects.filter(id=bob.id).delete()
    calls = delta_llm(scripted_llm, lambda call: [
        {"op": "remove_section", "section_id": "team"}], answer="## Team\n\n- Alice leads the team")
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert len(calls) == 1 and report.plan.effective_mode == "full"
    model.refresh_from_db()
    assert model.content == "## Team\n\n- Alice leads the team"
    assert RETRACTION_IGNORED in report.warnings and report.trace["retraction"]["applied"]


def test_every_cited_fact_retracted_rewrites_in_full_without_asking_for_edits(bank, scripted_llm):
    model, (alice,) = page(bank, scripted_llm, texts=("Alice leads the team",),
                           doc="## Team\n\n- Alice leads the team")
    MemoryUnit.objects.filter(id=alice.id).delete()
    dana = make_memory(bank, "Dana leads the team", embed=True)
    calls = delta_llm(scripted_llm, remove_retracted, answer="## Team\n\n- Dana leads the team")
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert calls == []
    model.refresh_from_db()
    assert model.content == "## Team\n\n- Dana leads the team"
    assert report.plan.effective_mode == "full" and RETRACTED_EVERYTHING in report.warnings
    assert cited(model) == {str(dana.id)}
    assert report.trace["retraction"] == retraction([alice.id], ["Alice leads the team"])


def test_a_full_rewrite_that_cites_nothing_keeps_the_page_but_drops_the_citation(
    bank, scripted_llm
):
    model, (alice, bob) = page(bank, scripted_llm)
    MemoryUnit.objects.filter(id=bob.id).delete()

    def respond(body):
        if body.get("response_format") or not body.get("tools"):
            return Reply.json({"operations": []})  # the edit call: removes nothing
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        return Reply.tool_calls([("done", {"answer": "nothing", "memory_ids": [],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == DOC and report.outcome.outcome == "content_preserved_no_new_facts"
    assert RETRACTION_STANDS in report.warnings
    assert cited(model) == {str(alice.id)}
    assert report.trace["retraction"] == retraction([bob.id], ["Bob runs the release"],
                                                    applied=False)


def test_an_automatic_refresh_takes_a_retraction_in_when_the_page_does_not_read_stale(
    bank, scripted_llm
):
    model, (alice, bob) = page(bank, scripted_llm)
    MemoryUnit.objects.filter(id=bob.id).delete()
    calls = delta_llm(scripted_llm, remove_retracted)
    refresh_run(bank_id=bank.id, mental_model_id="team", automatic=True)
    assert len(calls) == 1
    model.refresh_from_db()
    assert "Bob" not in model.content


def test_the_dry_run_names_the_retraction_and_writes_nothing(bank, scripted_llm):
    model, (alice, bob) = page(bank, scripted_llm)
    MemoryUnit.objects.filter(id=bob.id).delete()
    delta_llm(scripted_llm, remove_retracted)
    body = MentalModelDryRunRefreshResultSerializer.render(
        refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    expected = retraction([bob.id], ["Bob runs the release"])
    assert body["retraction"] == body["trace"]["retraction"] == expected
    assert "Bob" not in body["preview_content"] and body["would_persist"] is True
    fresh = MentalModel.objects.get(uid=model.uid)
    assert (fresh.content, fresh.reflect_response) == (model.content, model.reflect_response)
