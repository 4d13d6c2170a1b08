"""Delta refreshes through the pipeline against the scripted server (docs/behaviour.md#delta-mode, docs/behaviour.md#no-llm-when-nothing-is-in-reach, docs/behaviour.md#structured-output, docs/behaviour.md#cumulative-grounding,
the dry run's delta fields)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fakes.delta_llm import append_each_fact, delta_llm
from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit
from mentalmodels.api.preview import MentalModelDryRunRefreshResultSerializer
from mentalmodels.document.structure import render_json, split
from mentalmodels.models import MentalModel
from mentalmodels.refresh.errors import DryRunFailed, RefreshFailed
from mentalmodels.refresh.pipeline import refresh_dry_run
from mentalmodels.services import mental_model_clear
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import last_operation, refresh_run

pytestmark = pytest.mark.django_db

BASELINE = "## Team\n\nAlice leads the team.\n\n| who | role |\n|---|---|\n| Alice | lead |\n\n## Log\n\n- started"


@pytest.fixture(autouse=True)
def _scripted(scripted_llm, openai_embeddings):
    return scripted_llm


def baseline(bank, scripted_llm, **trigger):
    """A delta model whose first refresh (a full one: no content yet) wrote ``BASELINE``."""
    make_memory(bank, "Alice leads the team", embed=True)
    model = make_mental_model(bank, "team", trigger={"mode": "delta", "keep_trace": True, **trigger})
    delta_llm(scripted_llm, lambda call: [], answer=BASELINE, structured=lambda body: {"lines": 0})
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert (report.plan.effective_mode, report.plan.mode_fallback_reason) == (
        "full", "no_baseline_content")
    model.refresh_from_db()
    assert model.content == BASELINE
    assert render_json(model.document) == BASELINE  # stored split, ready for a delta edit
    scripted_llm.reset()
    return model


def block_ids(model: MentalModel, section_id: str) -> list[str]:
    section = next(s for s in model.document["sections"] if s["id"] == section_id)
    return [b["id"] for b in section["blocks"]]


def test_delta_appends_the_new_fact_and_leaves_everything_else_byte_identical(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined the team", embed=True)
    calls = delta_llm(scripted_llm, append_each_fact("log"))
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "delta" and report.plan.mode_fallback_reason is None
    model.refresh_from_db()
    assert model.content == BASELINE + "\n\n- Bob joined the team"
    assert render_json(model.document) == model.content
    # The ops call saw the window's fact, not the one the document already rests on.
    assert [c.facts for c in calls] == [["Bob joined the team"]]
    assert "Alice leads the team" not in str(calls[0].body["messages"][1]["content"]).split(
        "New facts")[1]
    trace = model.reflect_response["trace"]
    assert trace["effective_mode"] == "delta"
    assert [a["operation"]["op"] for a in trace["delta_operations"]["applied"]] == ["append_block"]
    assert trace["delta_operations"]["skipped"] == []
    assert model.reflect_response["text"] == model.content


def test_delta_retrieval_reads_only_the_window(bank, scripted_llm):
    baseline(bank, scripted_llm)
    new = make_memory(bank, "Carol runs the release", embed=True)
    delta_llm(scripted_llm, append_each_fact("log"))
    refresh_run(bank_id=bank.id, mental_model_id="team")
    tool_outputs = [m["content"] for body in scripted_llm.requests for m in body["messages"]
                    if m.get("role") == "tool"]
    assert tool_outputs and all("Alice leads the team" not in out for out in tool_outputs)
    assert any(str(new.id) in out for out in tool_outputs)


def test_nothing_new_in_the_window_makes_no_llm_call(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert scripted_llm.requests == []
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    model.refresh_from_db()
    assert model.content == BASELINE


def test_an_op_against_a_missing_id_is_dropped_and_reported_while_the_others_apply(
    bank, scripted_llm
):
    model = baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [
        {"op": "replace_block", "section_id": "team", "block_id": "b-00000000", "markdown": "x"},
        {"op": "append_block", "section_id": "log", "markdown": "- Bob joined"},
    ])
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content.endswith("- started\n\n- Bob joined")
    ops = model.reflect_response["trace"]["delta_operations"]
    assert len(ops["applied"]) == 1
    assert "'b-00000000': no such block" in ops["skipped"][0]["reason"]


def test_a_block_id_sent_as_section_id_is_dropped_with_a_reason_naming_it(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    alice = block_ids(model, "team")[0]
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [
        {"op": "append_block", "section_id": alice, "markdown": "wrong"},
        {"op": "append_block", "section_id": "log", "markdown": "- Bob joined"},
    ])
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    (skipped,) = model.reflect_response["trace"]["delta_operations"]["skipped"]
    assert f"section_id {alice!r} is a block id" in skipped["reason"]
    assert "wrong" not in model.content


def test_all_invalid_then_valid_on_the_retry_succeeds_and_the_retry_names_the_ids(
    bank, scripted_llm
):
    model = baseline(bank, scripted_llm)
    alice = block_ids(model, "team")[0]
    make_memory(bank, "Bob joined", embed=True)

    def ops(call):
        if call.attempt == 1:
            return [{"op": "append_block", "section_id": alice, "markdown": "- Bob joined"}]
        return [{"op": "append_block", "section_id": "log", "markdown": "- Bob joined"}]

    calls = delta_llm(scripted_llm, ops)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.outcome.outcome == "content_written"
    assert [c.attempt for c in calls] == [1, 2]
    retry = calls[1].retry_message
    assert alice in retry and "'team'" in retry and "'log'" in retry
    model.refresh_from_db()
    assert model.content.endswith("- Bob joined")
    ops_record = model.reflect_response["trace"]["delta_operations"]
    assert [(e["attempt"]) for e in ops_record["skipped"]] == [1]
    assert [(e["attempt"]) for e in ops_record["applied"]] == [2]


def test_all_invalid_twice_fails_retryable_with_document_and_window_untouched(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    before = {f: getattr(model, f) for f in ("content", "document", "last_memory_seen_at",
                                             "last_refreshed_at")}
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [
        {"op": "append_block", "section_id": "nope", "markdown": "- Bob joined"}])
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.retryable
    assert info.value.details["outcome"] == "refresh_failed_delta_not_applied"
    assert info.value.details["failure_reason"] == "delta_ops_all_skipped"
    assert len(info.value.trace["delta_operations"]["skipped"]) == 2
    record = last_operation(bank_id=bank.id, mental_model_id="team").result_metadata
    assert record["delta_ops_skipped"] == 2
    model.refresh_from_db()
    assert {f: getattr(model, f) for f in before} == before


def test_an_unreadable_answer_is_asked_once_more_then_fails(bank, scripted_llm):
    baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    calls = delta_llm(scripted_llm, lambda call: "this is not json")
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert len(calls) == 2 and "could not be read" in calls[1].retry_message
    assert info.value.failure_reason == "structured_doc_unreadable"


def test_a_provider_error_on_the_ops_call_fails_the_attempt(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [])

    original = scripted_llm._responder

    def respond(body):
        if body.get("response_format"):
            return Reply.error(400, "bad request")
        return original(body)

    scripted_llm.respond_with(respond)
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.failure_reason == "delta_ops_failed" and info.value.retryable
    model.refresh_from_db()
    assert model.content == BASELINE


def test_facts_reach_the_ops_call_oldest_first_by_event_time(bank, scripted_llm):
    baseline(bank, scripted_llm)
    late = make_memory(bank, "The release moved to Friday", embed=True)
    early = make_memory(bank, "The release is on Monday", embed=True)
    MemoryUnit.objects.filter(id=late.id).update(occurred_start=datetime(2026, 3, 2, tzinfo=UTC))
    MemoryUnit.objects.filter(id=early.id).update(occurred_start=datetime(2026, 3, 1, tzinfo=UTC))
    calls = delta_llm(scripted_llm, append_each_fact("log"))
    refresh_run(bank_id=bank.id, mental_model_id="team")
    assert calls[0].facts == ["The release is on Monday", "The release moved to Friday"]
    prompt = calls[0].body["messages"][1]["content"]
    # How recent the document already is, so a backfilled older fact is not taken for news.
    assert "The document already reflects facts up to" in prompt


def test_based_on_after_three_deltas_is_the_union_of_their_citations(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    first = [e["id"] for e in model.reflect_response["based_on"]["world"]]
    ids = list(first)
    for n in range(3):
        ids.append(str(make_memory(bank, f"fact number {n}", embed=True).id))
        delta_llm(scripted_llm, append_each_fact("log"))
        refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert [e["id"] for e in model.reflect_response["based_on"]["world"]] == ids


def test_structured_output_is_extracted_from_the_merged_document(bank, scripted_llm):
    model = baseline(bank, scripted_llm, response_schema={
        "type": "object", "properties": {"lines": {"type": "integer"}}, "required": ["lines"]})
    make_memory(bank, "Bob joined", embed=True)
    seen = []

    def structured(body):
        seen.append(body["messages"][-1]["content"])
        return {"lines": 1}

    delta_llm(scripted_llm, append_each_fact("log"), structured=structured)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert "Alice leads the team." in seen[-1] and "- Bob joined" in seen[-1]
    assert model.reflect_response["structured_output"] == {"lines": 1}


def test_changed_source_query_falls_back_to_full_and_a_failure_does_not_record_it(
    bank, scripted_llm
):
    model = baseline(bank, scripted_llm)
    MentalModel.objects.filter(uid=model.uid).update(source_query="What ships next?")
    make_memory(bank, "Release on Friday", embed=True)
    delta_llm(scripted_llm, lambda call: [], answer="")  # an empty answer: the attempt fails
    with pytest.raises(RefreshFailed):
        refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.last_refresh_source_query == "How does the team work?"
    delta_llm(scripted_llm, lambda call: [], answer="## Next\n\nRelease on Friday.")
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert (report.plan.effective_mode, report.plan.mode_fallback_reason) == (
        "full", "source_query_changed")
    model.refresh_from_db()
    assert model.content == "## Next\n\nRelease on Friday."
    assert model.last_refresh_source_query == "What ships next?"
    assert render_json(model.document) == model.content


def test_clear_and_mode_full_force_the_next_refresh_full(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [], answer="## Rebuilt\n\nAll of it.")
    report = refresh_run(bank_id=bank.id, mental_model_id="team", mode="full")
    assert report.plan.effective_mode == "full"
    mental_model_clear(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.document is None and model.content == ""
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert (report.plan.effective_mode, report.plan.mode_fallback_reason) == (
        "full", "no_baseline_content")


def test_dry_run_reports_delta_operations_preview_and_diff_and_writes_nothing(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    calls = delta_llm(scripted_llm, lambda call: [
        {"op": "append_block", "section_id": "log", "markdown": "- Bob joined"},
        {"op": "remove_block", "section_id": "log", "block_id": "b-nope"},
    ])
    body = MentalModelDryRunRefreshResultSerializer.render(refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    again = MentalModelDryRunRefreshResultSerializer.render(refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    assert body["effective_mode"] == "delta" and body["mode_fallback_reason"] is None
    # The same window twice (the cutoff is each run's own snapshot).
    assert body["window"]["created_after"] == again["window"]["created_after"]
    assert body["window"]["watermark"] == again["window"]["watermark"]
    assert body["window"]["created_after"] is not None
    assert [a["operation"]["op"] for a in body["delta_operations"]["applied"]] == ["append_block"]
    assert "b-nope" in body["delta_operations"]["skipped"][0]["reason"]
    assert body["preview_content"].endswith("- Bob joined") and body["would_persist"] is True
    assert "+- Bob joined" in body["diff"]
    assert calls[0].facts == calls[1].facts == ["Bob joined"]
    fresh = MentalModel.objects.get(uid=model.uid)
    assert (fresh.content, fresh.document, fresh.last_memory_seen_at) == (
        model.content, model.document, model.last_memory_seen_at)


def test_dry_run_of_a_delta_that_cannot_apply_answers_its_outcome(bank, scripted_llm):
    baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [{"op": "remove_section", "section_id": "nope"}])
    body = MentalModelDryRunRefreshResultSerializer.render(refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    assert body["outcome"] == "refresh_failed_delta_not_applied"
    assert body["would_persist"] is False and body["preview_content"] == BASELINE
    assert len(body["delta_operations"]["skipped"]) == 2 and body["diff"] == ""


def test_a_legacy_model_with_content_but_no_document_is_split_and_edited(bank, scripted_llm):
    make_memory(bank, "old fact", embed=True)
    model = make_mental_model(bank, "team", content="## Log\n\n- old", trigger={"mode": "delta"},
                      last_refresh_source_query="How does the team work?",
                      last_memory_seen_at=MemoryUnit.objects.get().updated_at)
    make_memory(bank, "new fact", embed=True)
    delta_llm(scripted_llm, append_each_fact("log"))
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == "## Log\n\n- old\n\n- new fact"
    assert model.document == split(model.content).as_json() or render_json(model.document) == model.content


def test_a_refresh_that_keeps_the_old_document_does_not_record_a_changed_query(bank, scripted_llm):
    model = baseline(bank, scripted_llm)
    MentalModel.objects.filter(uid=model.uid).update(source_query="What ships next?")
    make_memory(bank, "Release on Friday", embed=True)

    def cites_nothing(body):
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "x"})])
        return Reply.tool_calls([("done", {"answer": "nothing on that", "memory_ids": []})])

    scripted_llm.respond_with(cites_nothing)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    model.refresh_from_db()
    assert model.content == BASELINE
    assert model.last_refresh_source_query == "How does the team work?"


def test_dry_run_of_a_delta_whose_provider_fails_is_an_error(bank, scripted_llm):
    baseline(bank, scripted_llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(scripted_llm, lambda call: [])
    original = scripted_llm._responder
    scripted_llm.respond_with(
        lambda body: Reply.error(400, "refused") if body.get("response_format") else original(body))
    with pytest.raises(DryRunFailed) as info:
        refresh_dry_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.status_code == 502 and "delta_ops_failed" in str(info.value)
