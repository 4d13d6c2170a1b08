"""The refresh pipeline against the scripted OpenAI-compatible server (docs/behaviour.md#a-refresh, dry run)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.db import transaction

from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock
from mentalmodels.api.preview import MentalModelDryRunRefreshResultSerializer
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.pipeline import NOTHING_READABLE, refresh_dry_run
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _scripted(scripted_llm, openai_embeddings):
    return scripted_llm


def answer_with(server, answer: str, memory_ids=(), model_ids=()):
    """Every forced turn calls its tool; the first free turn calls ``done`` with ``answer``."""

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        if body.get("tools"):
            return Reply.tool_calls([("done", {"answer": answer, "memory_ids": list(memory_ids),
                                               "mental_model_ids": list(model_ids)})])
        return Reply.text(answer)

    server.respond_with(respond)


def choices(server) -> list:
    out = []
    for body in server.requests:
        choice = body.get("tool_choice")
        out.append(choice["function"]["name"] if isinstance(choice, dict) else choice)
    return out


def row(model: MentalModel) -> dict:
    model.refresh_from_db()
    return {f.attname: getattr(model, f.attname) for f in MentalModel._meta.concrete_fields
            if f.attname != "embedding"}


def test_nothing_in_reach_completes_with_zero_llm_requests(bank, scripted_llm):
    make_memory(bank, "untagged fact")
    model = make_mental_model(bank, "team", tags=["team"])
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert scripted_llm.requests == []
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    assert NOTHING_READABLE in report.warnings
    model.refresh_from_db()
    assert model.content == "" and model.last_refreshed_at is not None
    assert model.last_memory_seen_at is None
    assert model.reflect_response["outcome"] == "content_preserved_no_new_facts"


def test_refresh_writes_answer_based_on_watermark_history_and_embedding(bank, scripted_llm):
    fact = make_memory(bank, "Alice prefers async communication", tags=["team"], embed=True)
    newest = make_memory(bank, "Bob likes standups", tags=["team", "bob"], embed=True)
    make_memory(bank, "Elsewhere: cats", tags=["cats"], embed=True)
    model = make_mental_model(bank, "team", tags=["team"])
    answer_with(scripted_llm, "## Team\n\nAlice prefers async.", [str(fact.id)])

    report = refresh_run(bank_id=bank.id, mental_model_id="team")

    # No sibling model is visible: observations, then raw facts, then the model's own turn.
    assert choices(scripted_llm) == ["search_observations", "recall", "auto"]
    assert report.outcome.outcome == "content_written"
    model.refresh_from_db()
    assert model.content == "## Team\n\nAlice prefers async."
    assert [e["id"] for e in model.reflect_response["based_on"]["world"]] == [str(fact.id)]
    assert set(model.reflect_response["based_on"]) == {
        "world", "experience", "opinion", "observation", "mental-models", "directives"}
    assert model.reflect_response["outcome"] == "content_written"
    # docs/behaviour.md#the-snapshot-cutoff: the newest in-scope memory visible at the snapshot, not now().
    assert model.last_memory_seen_at == newest.updated_at
    assert model.last_full_refreshed_at is not None and model.last_refresh_failed_at is None
    assert model.last_refresh_source_query == model.source_query
    assert model.embedding is not None and model.embedding_content_hash
    [version] = MentalModelHistory.objects.filter(model=model)
    assert version.kind == "version" and version.previous_content == ""


def test_answer_citing_nothing_keeps_content_and_advances_watermark(bank, scripted_llm):
    unit = make_memory(bank, "some fact", embed=True)
    model = make_mental_model(bank, "team", content="old document",
                      reflect_response={"text": "old document", "outcome": "content_written",
                                        "based_on": {"world": [{"id": "x"}]}, "mental_models": []})
    answer_with(scripted_llm, "I don't have information about that.", [])

    report = refresh_run(bank_id=bank.id, mental_model_id="team")

    assert len(scripted_llm.requests) > 0
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    model.refresh_from_db()
    assert model.content == "old document"
    assert model.reflect_response["based_on"] == {"world": [{"id": "x"}]}
    assert model.last_memory_seen_at == unit.updated_at
    assert MentalModelHistory.objects.count() == 0


def test_answer_citing_nothing_on_first_refresh_leaves_content_empty(bank, scripted_llm):
    make_memory(bank, "some fact", embed=True)
    model = make_mental_model(bank, "team")
    answer_with(scripted_llm, "Generic words.", [])
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == ""


def test_empty_answer_fails_and_never_overwrites(bank, scripted_llm):
    unit = make_memory(bank, "some fact", embed=True)
    model = make_mental_model(bank, "team", content="kept")
    before = row(model)
    answer_with(scripted_llm, "   ", [str(unit.id)])
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.details == {"operation_type": "refresh_mental_model",
                                  "outcome": "refresh_failed_empty_candidate",
                                  "failure_reason": "empty_candidate"}
    assert row(model) == before


def test_embedder_failing_mid_refresh_fails_and_leaves_content_and_watermark(bank, scripted_llm):
    unit = make_memory(bank, "some fact", embed=True)
    model = make_mental_model(bank, "team", content="kept",
                      reflect_response={"structured_output": {"a": 1}})
    before = row(model)
    seen = {"n": 0}

    def respond(body: dict) -> Reply:
        seen["n"] += 1
        if seen["n"] == 2:
            # The first lookup has already succeeded; the embedder breaks for the next one.
            scripted_llm.fail_embeddings(50)
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            # Another text for the second lookup: a run embeds each query text once.
            query = "fact" if seen["n"] == 1 else "another fact"
            return Reply.tool_calls([(choice["function"]["name"], {"query": query})])
        return Reply.tool_calls([("done", {"answer": "new", "memory_ids": [str(unit.id)],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.failure_reason == "retrieval_failed"
    assert info.value.details["outcome"] == "refresh_failed_error"
    assert len(scripted_llm.requests) == 2  # the first tool ran; the second lookup failed
    assert len(scripted_llm.embedding_requests) >= 2
    assert row(model) == before


def test_llm_error_is_a_refresh_failed_error(bank, scripted_llm):
    make_memory(bank, "some fact", embed=True)
    make_mental_model(bank, "team")
    scripted_llm.respond_with(lambda body: Reply.error(500, "provider down"))
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert (info.value.outcome, info.value.failure_reason) == ("refresh_failed_error", "unexpected_error")


def test_wall_timeout_is_a_failed_attempt(bank, scripted_llm, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, reflect_wall_timeout_seconds=0.5)
    make_memory(bank, "some fact", embed=True)
    model = make_mental_model(bank, "team", content="kept")
    scripted_llm.respond_with(lambda body: Reply.delay(3, Reply.text("late")))
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.failure_reason == "unexpected_error"
    assert "HINDSIGHT_API_REFLECT_WALL_TIMEOUT" in str(info.value)
    model.refresh_from_db()
    assert model.content == "kept"


def test_refresh_never_reads_its_own_model(bank, scripted_llm):
    unit = make_memory(bank, "team fact", embed=True)
    make_mental_model(bank, "team", content="my own content about the team")
    make_mental_model(bank, "sibling", name="Sibling", content="sibling content about the team")
    answer_with(scripted_llm, "answer", [str(unit.id)])
    refresh_run(bank_id=bank.id, mental_model_id="team")
    assert choices(scripted_llm)[0] == "search_mental_models"
    tool_message = scripted_llm.requests[1]["messages"][-1]
    ids = [m["id"] for m in json.loads(tool_message["content"])["mental_models"]]
    assert ids == ["sibling"]


def test_sibling_model_with_content_is_in_reach_without_memories(bank, scripted_llm):
    make_mental_model(bank, "team")
    make_mental_model(bank, "sibling", content="sibling content")
    answer_with(scripted_llm, "from the sibling", [], ["sibling"])
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert len(scripted_llm.requests) > 0
    assert report.outcome.outcome == "content_written"


def test_structured_output_is_extracted_from_the_stored_document(bank, scripted_llm):
    unit = make_memory(bank, "risk is high", embed=True)
    schema = {"type": "object", "properties": {"risk_level": {"type": "string"}},
              "required": ["risk_level"]}
    model = make_mental_model(bank, "team", trigger={"response_schema": schema})

    def respond(body):
        if body.get("response_format"):
            assert "## Risk\n\nHigh." in body["messages"][-1]["content"]
            return Reply.json({"risk_level": "high"})
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "risk"})])
        return Reply.tool_calls([("done", {"answer": "## Risk\n\nHigh.", "memory_ids": [str(unit.id)],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == "## Risk\n\nHigh."
    assert model.reflect_response["structured_output"] == {"risk_level": "high"}


def test_structured_output_not_matching_the_schema_fails_and_keeps_previous(bank, scripted_llm):
    unit = make_memory(bank, "risk is high", embed=True)
    schema = {"type": "object", "properties": {"risk_level": {"type": "string"}},
              "required": ["risk_level"]}
    model = make_mental_model(bank, "team", content="old", trigger={"response_schema": schema},
                      reflect_response={"text": "old", "structured_output": {"risk_level": "low"}})
    before = row(model)

    def respond(body):
        if body.get("response_format"):
            return Reply.json({"risk_level": 7})
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "risk"})])
        return Reply.tool_calls([("done", {"answer": "new doc", "memory_ids": [str(unit.id)],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert info.value.details["outcome"] == "refresh_failed_structured_output"
    assert info.value.failure_reason == "structured_output_failed"
    assert row(model) == before


def test_dry_run_twice_is_identical_and_writes_nothing(bank, scripted_llm):
    unit = make_memory(bank, "Alice prefers async", embed=True)
    model = make_mental_model(bank, "team", content="old line\n")
    answer_with(scripted_llm, "new line", [str(unit.id)])
    before = row(model)
    first = MentalModelDryRunRefreshResultSerializer.render(refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    second = MentalModelDryRunRefreshResultSerializer.render(refresh_dry_run(bank_id=bank.id, mental_model_id="team"))
    assert row(model) == before
    assert MentalModelHistory.objects.count() == 0
    volatile = ("duration_ms", "trace", "window")
    assert {k: v for k, v in first.items() if k not in volatile} == {
        k: v for k, v in second.items() if k not in volatile}
    assert first["outcome"] == "content_written" and first["would_persist"] is True
    assert first["preview_content"] == "new line"
    assert first["diff"].startswith("--- current\n+++ preview\n")
    assert first["scope"]["exclude_mental_model_ids"] == ["team"]
    assert first["window"]["watermark"].endswith("Z")
    assert first["facts"]["used"] == {"world": 1}
    assert first["delta_operations"] is None and first["retraction"] is None
    assert [c["tool"] for c in first["trace"]["tool_calls"]] == ["search_observations", "recall"]
    assert all("output" in c for c in first["trace"]["tool_calls"])


def test_keep_trace_stores_a_bounded_trace_without_tool_outputs(bank, scripted_llm):
    with transaction.atomic():
        hold_bank_write_lock(bank.id)
        MemoryUnit.objects.bulk_create([
            MemoryUnit(bank=bank, text=f"team fact number {i} " + "detail " * 30,
                       fact_type="world" if i % 2 else "observation")
            for i in range(1000)
        ])
    ids = [str(i) for i in MemoryUnit.objects.values_list("id", flat=True)[:50]]
    model = make_mental_model(bank, "team", trigger={"keep_trace": True})
    answer_with(scripted_llm, "A team summary.", ids)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    trace = model.reflect_response["trace"]
    assert trace["outcome"] in ("content_written", "content_preserved_no_new_facts")
    assert trace["tool_calls"] and all("output" not in c for c in trace["tool_calls"])
    assert all(isinstance(c["result_count"], int) for c in trace["tool_calls"])
    assert len(json.dumps(trace)) < 16 * 1024


def test_delta_with_content_and_same_query_edits_instead_of_rewriting(bank, scripted_llm):
    unit = make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "team", content="doc", trigger={"mode": "delta"},
                      last_refresh_source_query="How does the team work?")

    def respond(body: dict) -> Reply:
        if body.get("response_format"):  # the ops call: edit, never rewrite
            return Reply.json({"operations": [
                {"op": "append_block", "section_id": "preamble", "markdown": "fact"}]})
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        return Reply.tool_calls([("done", {"answer": "A REWRITE", "memory_ids": [str(unit.id)],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "delta"
    model.refresh_from_db()
    assert model.content == "doc\n\nfact"


def test_delta_without_content_falls_back_to_full(bank, scripted_llm):
    unit = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team", trigger={"mode": "delta"})
    answer_with(scripted_llm, "doc", [str(unit.id)])
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "full"
    assert report.plan.mode_fallback_reason == "no_baseline_content"


def test_budget_caps_the_refresh_loop_with_a_final_tool_less_synthesis(bank, scripted_llm):
    unit = make_memory(bank, "Alice prefers async", embed=True)
    model = make_mental_model(bank, "team", trigger={"budget": "low"})

    def respond(body: dict) -> Reply:
        if not body.get("tools"):
            return Reply.text(f"## Team\n\nAlice prefers async.\n\nSources: {unit.id}")
        choice = body.get("tool_choice")
        name = choice["function"]["name"] if isinstance(choice, dict) else "recall"
        return Reply.tool_calls([(name, {"query": "Alice"})])  # never calls done

    scripted_llm.respond_with(respond)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert len(scripted_llm.requests) == 5  # budget low = 5 iterations
    assert choices(scripted_llm)[:3] == ["search_observations", "recall", "auto"]
    assert "tools" not in scripted_llm.requests[-1] or not scripted_llm.requests[-1]["tools"]
    # Every tool result went back to the model before the next turn.
    assert sum(1 for m in scripted_llm.requests[-1]["messages"] if m["role"] == "tool") == 4
    assert report.outcome.outcome == "content_written"
    model.refresh_from_db()
    assert model.content == "## Team\n\nAlice prefers async."
    assert [e["id"] for e in model.reflect_response["based_on"]["world"]] == [str(unit.id)]


@pytest.mark.parametrize("failure, status", [("retrieval", 503), ("llm", 502), ("delta", 502)])
def test_dry_run_of_a_refresh_that_would_fail_answers_an_error_and_writes_nothing(
    api, bank, scripted_llm, failure, status
):
    make_memory(bank, "fact", embed=True)
    trigger = {"mode": "delta"} if failure == "delta" else {}
    model = make_mental_model(bank, "team", content="doc", trigger=trigger,
                      last_refresh_source_query="How does the team work?")
    before = row(model)
    if failure == "retrieval":
        answer_with(scripted_llm, "x", [])
        scripted_llm.fail_embeddings(50)
    else:
        scripted_llm.respond_with(lambda body: Reply.error(400, "bad request"))
    response = api.post(f"/v1/default/banks/{bank.id}/mental-models/team/dry-run-refresh")
    assert response.status_code == status
    assert response.json()["detail"].startswith("Dry run: a refresh would fail")
    assert row(model) == before
