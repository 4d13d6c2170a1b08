"""POST /v1/default/banks/{bank_id}/reflect: wire format, validation, error mapping."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from tests.mentalmodels.reflect.conftest import add_memory, add_model

pytestmark = pytest.mark.django_db


def _url(bank_id: str = "reflect-bank") -> str:
    return f"/v1/default/banks/{bank_id}/reflect"


def _post(api: APIClient, body: dict, bank_id: str = "reflect-bank"):
    return api.post(_url(bank_id), body, format="json")


def test_reflect_returns_text_based_on_usage_and_trace(api, bank, scripted_llm):
    fact = add_memory(bank, "Alice prefers async communication", context="standup")
    add_model(bank, "team-comms", name="Team communication", content="Async on Slack.",
              fresh=False)
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "communication"})]),
        Reply.tool_calls([("search_observations", {"query": "communication"})]),
        Reply.tool_calls([("recall", {"query": "communication"})]),
        Reply.tool_calls([("done", {"answer": "Alice prefers async.",
                                    "memory_ids": [str(fact.id)],
                                    "mental_model_ids": ["team-comms"]})]),
    )

    response = _post(api, {"query": "How does Alice communicate?", "budget": "mid",
                           "include": {"facts": {}, "tool_calls": {"output": False}}})

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["text"] == "Alice prefers async."
    assert [(m["id"], m["type"], m["context"]) for m in body["based_on"]["memories"]] == [
        (str(fact.id), "world", "standup")
    ]
    assert [m["id"] for m in body["based_on"]["mental_models"]] == ["team-comms"]
    assert body["based_on"]["directives"] == []
    assert body["usage"]["total_tokens"] > 0
    assert body["usage"]["total_tokens"] == (
        body["usage"]["input_tokens"] + body["usage"]["output_tokens"]
    )
    assert [c["tool"] for c in body["trace"]["tool_calls"]] == [
        "search_mental_models", "search_observations", "recall",
    ]
    assert all(c["output"] is None for c in body["trace"]["tool_calls"])
    assert [c["scope"] for c in body["trace"]["llm_calls"]] == [
        "agent_1", "agent_2", "agent_3", "agent_4",
    ]
    assert body["structured_output"] is None


def test_reflect_without_include_omits_based_on_and_trace(api, bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "x"})]),
        Reply.tool_calls([("recall", {"query": "x"})]),
        Reply.tool_calls([("done", {"answer": "Nothing known."})]),
    )

    body = _post(api, {"query": "Anything?"}).json()

    assert body["text"] == "Nothing known."
    assert body["based_on"] is None and body["trace"] is None
    # Default budget is upstream's "low": still three forced turns, then auto.
    assert len(scripted_llm.requests) == 3


def test_context_is_appended_to_the_query(api, bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("done", {"answer": "ok"})]),
    )

    _post(api, {"query": "Who leads?", "context": "the platform team", "fact_types": ["world"]})

    assert "the platform team" in scripted_llm.requests[0]["messages"][1]["content"]


def test_response_schema_returns_structured_output(api, bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "x"})]),
        Reply.tool_calls([("done", {"answer": "Slack it is."})]),
        Reply.json({"channel": "Slack"}),
    )
    schema = {"type": "object", "properties": {"channel": {"type": "string"}}}

    body = _post(api, {"query": "Which channel?", "fact_types": ["world"],
                       "response_schema": schema}).json()

    assert body["structured_output"] == {"channel": "Slack"}


def test_structured_output_failure_is_reported_not_raised(api, bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("done", {"answer": "Slack it is."})]),
        Reply.error(400, "bad schema"),
    )
    schema = {"type": "object", "properties": {"channel": {"type": "string"}}}

    response = _post(api, {"query": "Which channel?", "fact_types": ["world"],
                           "response_schema": schema})

    assert response.status_code == 200
    assert response.json()["structured_output"] is None
    assert response.json()["structured_output_error"]


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"query": "q", "bogus": 1}, ["body", "bogus"]),
        ({}, ["body", "query"]),
        ({"query": "   "}, ["body", "query"]),
        ({"query": 5}, ["body", "query"]),
        (["not", "an", "object"], ["body"]),
        ({"query": "q", "budget": "huge"}, ["body", "budget"]),
        ({"query": "q", "tags_match": "some"}, ["body", "tags_match"]),
        ({"query": "q", "fact_types": []}, ["body", "fact_types"]),
        ({"query": "q", "fact_types": ["dream"]}, ["body", "fact_types", 0]),
        ({"query": "q", "max_tokens": 0}, ["body", "max_tokens"]),
        ({"query": "q", "tags": ["a"], "tag_groups": [{"tags": ["a"]}]}, ["body", "tag_groups"]),
        ({"query": "q", "tag_groups": [{"tags": ["a"], "match": "nope"}]},
         ["body", "tag_groups", 0, "match"]),
        ({"query": "q", "response_schema": {"type": "array", "items": {}}},
         ["body", "response_schema"]),
        ({"query": "q", "response_schema": {"type": "object"}}, ["body", "response_schema"]),
        ({"query": "q", "response_schema": {"type": "object",
                                            "properties": {"a": {"type": "date"}}}},
         ["body", "response_schema", "properties", "a"]),
        ({"query": "q", "include": {"facts": {}, "everything": True}},
         ["body", "include", "everything"]),
    ],
)
def test_malformed_requests_are_422_naming_the_field(api, bank, scripted_llm, body, loc):
    response = _post(api, body)

    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]
    assert scripted_llm.requests == []


def test_unknown_bank_is_404_and_not_created(api, db, scripted_llm):
    response = _post(api, {"query": "q"}, bank_id="nobody")

    assert response.status_code == 404
    assert response.json() == {"detail": "Bank 'nobody' not found"}
    assert not Bank.objects.filter(id="nobody").exists()


def test_no_llm_configured_is_400_naming_the_variables(api, bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")

    response = _post(api, {"query": "q"})

    assert response.status_code == 400
    assert "HINDSIGHT_API_LLM_PROVIDER" in response.json()["detail"]


def test_failed_retrieval_is_503_not_an_answer(api, bank, scripted_llm, openai_embeddings):
    openai_embeddings.fail_embeddings(5)
    scripted_llm.script(Reply.tool_calls([("recall", {"query": "x"})]))

    response = _post(api, {"query": "q", "fact_types": ["world"]})

    assert response.status_code == 503
    assert "retrieval failed" in response.json()["detail"]


def test_llm_failure_is_502(api, bank, scripted_llm):
    scripted_llm.script(Reply.error(400, "model refused"))

    response = _post(api, {"query": "q"})

    assert response.status_code == 502
    assert "LLM" in response.json()["detail"]
