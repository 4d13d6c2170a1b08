"""What the official hindsight-client 1.1.0 reads where a refresh fails: the history entry in
upstream's ``refresh_failed`` shape, and a dry run whose answer is empty as a 200 preview with
the ``refresh_failed_empty_candidate`` outcome (not a 502)."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from tests.compat.test_client_mental_models import wait_operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-mm"  # wait_operation's bank


def test_the_client_reads_a_failed_refresh_as_upstreams_refresh_failed_entry(
    client: Hindsight, scripted_llm, openai_embeddings, worker_factory
) -> None:
    client.create_bank(BANK, name="Compat failures")
    client.retain(BANK, "Alice prefers async communication.", strategy="verbatim")
    scripted_llm.respond_with(lambda body: Reply.error(400, "scripted refusal"))
    worker_factory(env={**scripted_llm.env, "HINDSIGHT_API_WORKER_MAX_RETRIES": "0"})
    created = client.create_mental_model(BANK, "Team", "How does the team work?", id="team")
    assert wait_operation(client, created.operation_id).status == "failed"

    history = client.get_mental_model_history(BANK, "team")
    # What a client of upstream filters on: the kind, and upstream's keys with their values.
    failures = [e for e in history if e["kind"] == "refresh_failed"]
    assert len(failures) == len(history) == 1
    [entry] = failures
    assert {k: entry[k] for k in ("previous_content", "outcome", "failure_reason")} == {
        "previous_content": None, "outcome": "refresh_failed_error",
        "failure_reason": "unexpected_error"}
    assert "scripted refusal" in entry["error_message"] and entry["changed_at"]
    assert entry["operation_id"] == created.operation_id
    assert list(entry)[:7] == ["previous_content", "previous_reflect_response", "changed_at",
                               "kind", "outcome", "failure_reason", "error_message"]


def test_a_dry_run_whose_answer_is_empty_is_a_preview_with_the_empty_candidate_outcome(
    client: Hindsight, scripted_llm, openai_embeddings
) -> None:
    client.create_bank(BANK, name="Compat empty answer")
    client.retain(BANK, "Alice prefers async communication.", strategy="verbatim")
    model = MentalModel.objects.create(bank_id=BANK, mental_model_id="team", name="Team",
                                       source_query="How does the team work?", content="# Kept",
                                       trigger={})
    before = {f.attname: getattr(model, f.attname) for f in MentalModel._meta.concrete_fields}

    def empty(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        if body.get("tools"):
            return Reply.tool_calls([("done", {"answer": "   ", "memory_ids": [],
                                               "mental_model_ids": []})])
        return Reply.text("")

    scripted_llm.respond_with(empty)
    preview = client.dry_run_refresh_mental_model(BANK, "team")  # raises on a non-2xx
    assert preview.outcome == "refresh_failed_empty_candidate"
    assert preview.would_persist is False and preview.diff == ""
    assert preview.current_content == preview.preview_content == "# Kept"
    assert any("empty answer" in w for w in preview.warnings)
    assert scripted_llm.requests  # the LLM was asked, as a real refresh would ask it
    model.refresh_from_db()
    assert {f.attname: getattr(model, f.attname)
            for f in MentalModel._meta.concrete_fields} == before
    assert not MentalModelHistory.objects.filter(model=model).exists()
