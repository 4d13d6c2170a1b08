"""Wire shapes of the mental-model and operation calls, field by field, against what upstream
(hindsight-api-slim 1.1.0) was seen to send (/work/shared/reference/wire-shapes.md): every key
present, in upstream's order where its examples show one, and every body accepted by the
official client's own models (``hindsight_client_api.models``), whose validators enforce the
enums (outcome, failure_reason, status, modes).

Driven in process (DRF test client, operations run with ``operation_execute``) so the whole
lifecycle is checked in seconds; ``tests/compat/test_client_mental_models.py`` drives the same
calls through the client over HTTP with a real worker.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hindsight_client_api.models import (
    AsyncOperationSubmitResponse,
    CancelOperationResponse,
    CreateMentalModelResponse,
    DeleteOperationResponse,
    HTTPValidationError,
    MentalModelDryRunRefreshResult,
    MentalModelListResponse,
    MentalModelResponse,
    OperationsListResponse,
    OperationStatusResponse,
    RetryOperationResponse,
)

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from operations.engine import operation_execute
from tests.factories import make_memory

pytestmark = pytest.mark.django_db

BANK = "wire-bank"
MM = f"/v1/default/banks/{BANK}/mental-models"
OPS = f"/v1/default/banks/{BANK}/operations"

MODEL_KEYS = [
    "id", "bank_id", "name", "source_query", "content", "tags", "max_tokens", "trigger",
    "last_refreshed_at", "last_memory_seen_at", "last_refresh_failed_at",
    "last_full_refreshed_at", "created_at", "is_knowledge_page", "reflect_response", "is_stale",
]
TRIGGER_KEYS = [
    "budget", "mode", "refresh_after_consolidation", "refresh_cron", "full_refresh_cron",
    "min_refresh_interval_seconds", "fact_types", "exclude_mental_models",
    "exclude_mental_model_ids", "tags_match", "tag_groups", "include_chunks",
    "recall_max_tokens", "recall_chunks_max_tokens", "reflect_search_observations_max_tokens",
    "reflect_search_observations_include_entities", "response_schema", "keep_trace",
    "review",  # ours, after upstream's keys
]
BASED_ON_KEYS = ["world", "opinion", "directives", "experience", "observation", "mental-models"]
OP_STATUS_KEYS = [
    "operation_id", "status", "operation_type", "id", "task_type", "mental_model_id",
    "created_at", "updated_at", "completed_at", "error_message", "retry_count", "next_retry_at",
    "progress", "result_metadata", "details", "child_operations", "task_payload",
]
OP_LIST_ITEM_KEYS = [
    "id", "task_type", "operation_id", "operation_type", "items_count", "document_id",
    "filename", "mental_model_id", "details", "created_at", "updated_at", "status",
    "error_message", "retry_count", "next_retry_at", "progress",
]
COMPLETED_METADATA_KEYS = {
    "name", "outcome", "content_len", "failure_reason", "based_on_counts", "mental_model_id",
    "delta_ops_applied", "delta_ops_skipped", "populated_content",
}
DETAILS_KEYS = ["operation_type", "outcome", "failure_reason"]
DRY_RUN_KEYS = [
    "mental_model_id", "name", "requested_mode", "effective_mode", "mode_fallback_reason",
    "outcome", "would_persist", "scope", "window", "facts", "based_on", "current_content",
    "candidate_content", "preview_content", "diff", "changes",  # ours: the change shape
    "delta_operations", "retraction", "trace",
    "usage", "duration_ms", "warnings",
]
SCOPE_KEYS = ["tags", "tags_match", "tag_groups", "fact_types", "exclude_mental_models",
              "exclude_mental_model_ids"]
WINDOW_KEYS = ["created_after", "created_before", "watermark"]
# Upstream's trace keys, and one of ours beside them: ``directives``, the directives the refresh
# applied (upstream's clients read the trace's known keys and ignore it).
TRACE_KEYS = ["recorded_at", "effective_mode", "mode_fallback_reason", "outcome", "tool_calls",
              "llm_calls", "directives", "delta_operations", "retraction", "usage", "duration_ms",
              "warnings"]
USAGE_KEYS = ["input_tokens", "output_tokens", "total_tokens", "cached_tokens",
              "thoughts_tokens"]
# Upstream's four, then ours: the entry's id, what made the change and the change itself.
VERSION_KEYS = ["previous_content", "previous_reflect_response", "changed_at", "kind", "id",
                "cause", "changes"]


def answer(server, text: str, memory_ids: list[str]) -> None:
    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        if body.get("tools"):
            return Reply.tool_calls([("done", {"answer": text, "memory_ids": memory_ids,
                                               "mental_model_ids": []})])
        return Reply.text(text)

    server.respond_with(respond)


def ok(response, model: Any = None) -> Any:
    assert response.status_code == 200, response.content
    body = response.json()
    if model is not None:
        # The client's own deserialisation: raises on a missing key or an out-of-enum value.
        assert model.from_dict(body) is not None
    return body


def assert_model_shape(body: dict, *, detail: str) -> None:
    assert list(body) == MODEL_KEYS
    MentalModelResponse.from_dict(body)
    if detail == "metadata":
        assert [body[k] for k in ("source_query", "content", "max_tokens", "trigger",
                                  "reflect_response")] == [None] * 5
        return
    assert isinstance(body["content"], str) and isinstance(body["max_tokens"], int)
    assert list(body["trigger"]) == TRIGGER_KEYS
    if detail == "content":
        assert body["reflect_response"] is None


def run(op_id: str) -> str:
    return operation_execute(operation_id=op_id, holder="wire-test")


def test_mental_model_and_operation_bodies_match_upstream_key_for_key(api, llm, sent):
    Bank.objects.create(id=BANK, name="Wire")
    fact = make_memory(BANK, "Alice prefers async communication.", tags=["team"],
                      context="team chat", embed=True)
    answer(llm, "## Team\n\nAlice prefers async.", [str(fact.id)])

    created = ok(api.post(MM, {"id": "team-comms", "name": "Team communication",
                               "source_query": "How does the team communicate?",
                               "tags": ["team"]}, format="json"), CreateMentalModelResponse)
    assert list(created) == ["mental_model_id", "operation_id"]
    op_id = created["operation_id"]

    # The operation while queued: upstream's key order, result_metadata {name, mental_model_id},
    # details null.
    pending = ok(api.get(f"{OPS}/{op_id}"), OperationStatusResponse)
    assert list(pending) == OP_STATUS_KEYS
    assert pending["status"] == "pending" and pending["operation_type"] == "refresh_mental_model"
    assert pending["result_metadata"] == {"name": "Team communication",
                                          "mental_model_id": "team-comms"}
    assert pending["details"] is None and pending["completed_at"] is None
    listed = ok(api.get(OPS), OperationsListResponse)
    assert list(listed) == ["bank_id", "total", "limit", "offset", "operations"]
    assert listed["limit"] == 20 and list(listed["operations"][0]) == OP_LIST_ITEM_KEYS
    assert listed["operations"][0]["items_count"] == 0

    assert run(op_id) == "completed"
    done = ok(api.get(f"{OPS}/{op_id}"), OperationStatusResponse)
    assert list(done) == OP_STATUS_KEYS and done["status"] == "completed"
    assert set(done["result_metadata"]) >= COMPLETED_METADATA_KEYS
    assert sorted(done["result_metadata"]["based_on_counts"]) == sorted(BASED_ON_KEYS)
    assert done["result_metadata"]["based_on_counts"]["world"] == 1
    assert list(done["details"]) == DETAILS_KEYS
    assert done["details"] == {"operation_type": "refresh_mental_model",
                               "outcome": "content_written", "failure_reason": None}
    item = ok(api.get(OPS), OperationsListResponse)["operations"][0]
    assert list(item) == OP_LIST_ITEM_KEYS and item["details"] == done["details"]

    # The model at each detail level, GET defaulting to full.
    full = ok(api.get(f"{MM}/team-comms"))
    assert_model_shape(full, detail="full")
    response = full["reflect_response"]
    assert list(response) == ["text", "outcome", "based_on", "mental_models"]
    assert list(response["based_on"]) == BASED_ON_KEYS
    # Upstream's {id, text, type, context}, plus the optional ReflectFact fields we also keep.
    [entry] = response["based_on"]["world"]
    assert {"id", "text", "type", "context"} <= set(entry) and entry["context"] == "team chat"
    assert response["based_on"]["world"][0]["id"] == str(fact.id)
    for detail in ("metadata", "content", "full"):
        assert_model_shape(ok(api.get(f"{MM}/team-comms?detail={detail}")), detail=detail)

    page = ok(api.get(MM), MentalModelListResponse)
    assert list(page) == ["items", "total", "limit", "offset"] and page["limit"] == 100
    assert_model_shape(page["items"][0], detail="metadata")
    for detail in ("content", "full"):
        assert_model_shape(ok(api.get(f"{MM}?detail={detail}"))["items"][0], detail=detail)

    queued = ok(api.post(f"{MM}/team-comms/refresh", {"mode": "full"}, format="json"),
                AsyncOperationSubmitResponse)
    assert list(queued) == ["operation_id", "status"] and queued["status"] == "queued"
    assert ok(api.post(f"{MM}/team-comms/refresh"))["operation_id"] == queued["operation_id"]

    patched = ok(api.patch(f"{MM}/team-comms", {"name": "Team comms v2", "tags": None,
                                                "source_query": None, "max_tokens": None,
                                                "trigger": None}, format="json"))
    assert_model_shape(patched, detail="full")

    preview = ok(api.post(f"{MM}/team-comms/dry-run-refresh"), MentalModelDryRunRefreshResult)
    assert list(preview) == DRY_RUN_KEYS
    assert list(preview["scope"]) == SCOPE_KEYS and list(preview["window"]) == WINDOW_KEYS
    assert list(preview["facts"]) == ["retrieved", "used"]
    assert list(preview["trace"]) == TRACE_KEYS
    assert list(preview["usage"]) == USAGE_KEYS and list(preview["trace"]["usage"]) == USAGE_KEYS
    assert preview["window"]["created_before"].endswith("Z")
    assert preview["scope"]["exclude_mental_model_ids"] == ["team-comms"]

    cleared = ok(api.post(f"{MM}/team-comms/clear"))
    assert_model_shape(cleared, detail="full")
    assert cleared["content"] == ""

    history = ok(api.get(f"{MM}/team-comms/history"))
    assert isinstance(history, list) and len(history) == 2
    for entry in history:
        assert list(entry) == VERSION_KEYS and entry["kind"] == "version"
        assert list(entry["previous_reflect_response"] or {"based_on": 0}) == ["based_on"]
    assert history[0]["previous_content"] == "## Team\n\nAlice prefers async."
    assert history[1]["previous_content"] == ""

    cancelled = ok(api.delete(f"{OPS}/{queued['operation_id']}"), CancelOperationResponse)
    assert list(cancelled) == ["success", "message", "operation_id"]
    retried = ok(api.post(f"{OPS}/{queued['operation_id']}/retry"), RetryOperationResponse)
    assert list(retried) == ["success", "message", "operation_id"]
    api.delete(f"{OPS}/{queued['operation_id']}")
    deleted = ok(api.delete(f"{OPS}/{queued['operation_id']}/delete"), DeleteOperationResponse)
    assert list(deleted) == ["success", "message", "operation_id"]

    assert ok(api.delete(f"{MM}/team-comms")) == {"status": "deleted"}


def test_a_failed_refresh_reports_details_and_a_failure_entry_inside_the_client_enums(
    api, llm, sent, settings
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    Bank.objects.create(id=BANK)
    make_memory(BANK, "Alice prefers async communication.", embed=True)
    llm.respond_with(lambda body: Reply.error(400, "bad request"))
    op_id = ok(api.post(MM, {"id": "m", "name": "M", "source_query": "q?"},
                        format="json"))["operation_id"]
    assert run(op_id) == "failed"
    failed = ok(api.get(f"{OPS}/{op_id}"), OperationStatusResponse)
    assert list(failed) == OP_STATUS_KEYS and failed["status"] == "failed"
    assert failed["details"] == {"operation_type": "refresh_mental_model",
                                 "outcome": "refresh_failed_error",
                                 "failure_reason": "unexpected_error"}
    assert isinstance(failed["error_message"], str) and failed["completed_at"]
    model = ok(api.get(f"{MM}/m"), MentalModelResponse)
    assert model["last_refresh_failed_at"] is not None and model["content"] == ""
    [entry] = ok(api.get(f"{MM}/m/history"))
    assert list(entry) == ["previous_content", "previous_reflect_response", "changed_at", "kind",
                           "outcome", "failure_reason", "error_message", "operation_id", "id"]
    assert entry["kind"] == "refresh_failed" and entry["previous_content"] is None
    assert (entry["outcome"], entry["failure_reason"]) == ("refresh_failed_error",
                                                           "unexpected_error")
    assert "bad request" in entry["error_message"] and entry["operation_id"] == op_id


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [
        ("get", f"{MM}/does-not-exist", None, 404, "Mental model 'does-not-exist' not found"),
        ("post", f"{MM}/does-not-exist/clear", None, 404,
         "Mental model 'does-not-exist' not found"),
        ("get", f"{MM}/does-not-exist/history", None, 404,
         "Mental model 'does-not-exist' not found"),
        ("patch", f"{MM}/does-not-exist", {"name": "x"}, 404,
         "Mental model 'does-not-exist' not found"),
        ("delete", f"{MM}/does-not-exist", None, 404, "Mental model 'does-not-exist' not found"),
        ("post", f"{MM}/does-not-exist/refresh", None, 404,
         f"Mental model does-not-exist not found in bank {BANK}"),
        ("post", f"{MM}/does-not-exist/dry-run-refresh", None, 404,
         "Mental model does-not-exist not found"),
        ("get", "/v1/default/banks/no-such-bank/mental-models", None, 404,
         "Bank 'no-such-bank' not found"),
        ("get", f"{OPS}/not-a-uuid", None, 400, "Invalid operation_id format: not-a-uuid"),
        ("post", MM, {"id": "taken", "name": "n", "source_query": "q"}, 409,
         f"Mental model 'taken' already exists in bank '{BANK}'"),
    ],
)
def test_error_statuses_and_bodies_are_upstreams(api, sent, method, path, body, status, detail):
    Bank.objects.create(id=BANK)
    api.post(MM, {"id": "taken", "name": "n", "source_query": "q"}, format="json")
    response = getattr(api, method)(path, body, format="json") if body else getattr(api, method)(path)
    assert response.status_code == status
    assert response.json() == {"detail": detail}


@pytest.mark.parametrize(
    ("method", "path", "body", "loc", "type_"),
    [
        ("get", f"{MM}/taken?detail=bogus", None, ["query", "detail"], "literal_error"),
        ("post", MM, {"source_query": "q"}, ["body", "name"], "missing"),
        ("post", MM, {"name": "n", "source_query": "q", "max_tokens": 10}, ["body", "max_tokens"],
         "greater_than_equal"),
        ("post", MM, {"name": "n", "source_query": "q",
                      "trigger": {"response_schema": {"type": "object"}}},
         ["body", "trigger", "response_schema"], "value_error"),
    ],
)
def test_field_errors_are_422_in_fastapis_shape(api, sent, method, path, body, loc, type_):
    Bank.objects.create(id=BANK)
    api.post(MM, {"id": "taken", "name": "n", "source_query": "q"}, format="json")
    response = getattr(api, method)(path, body, format="json") if body else getattr(api, method)(path)
    assert response.status_code == 422
    assert HTTPValidationError.from_dict(response.json()) is not None
    [error] = response.json()["detail"]
    assert error["loc"] == loc and error["type"] == type_


def test_an_unknown_operation_uuid_is_200_not_found_with_every_other_key_null(api, sent):
    Bank.objects.create(id=BANK)
    unknown = "00000000-0000-0000-0000-000000000000"
    body = ok(api.get(f"{OPS}/{unknown}"), OperationStatusResponse)
    assert list(body) == OP_STATUS_KEYS
    assert body["operation_id"] == unknown and body["status"] == "not_found"
    assert all(body[k] is None for k in OP_STATUS_KEYS[2:])


def test_details_are_null_while_a_failed_refresh_waits_for_its_retry(api, llm, sent, settings):
    """Upstream: ``details`` is null for operations still in flight; a retry is still in flight
    (its last failure shows in ``error_message``), and the failed outcome lands on completion."""
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=1)
    Bank.objects.create(id=BANK)
    make_memory(BANK, "Alice prefers async communication.", embed=True)
    llm.respond_with(lambda body: Reply.error(400, "bad request"))
    op_id = ok(api.post(MM, {"id": "m", "name": "M", "source_query": "q?"},
                        format="json"))["operation_id"]
    assert run(op_id) == "retrying"
    waiting = ok(api.get(f"{OPS}/{op_id}"), OperationStatusResponse)
    assert waiting["status"] == "pending" and waiting["retry_count"] == 1
    assert waiting["error_message"] and waiting["details"] is None
    assert ok(api.get(OPS))["operations"][0]["details"] is None
