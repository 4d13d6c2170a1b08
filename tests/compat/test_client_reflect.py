"""The official hindsight-client 1.1.0 ``reflect`` against our server (live_server)."""

from __future__ import annotations

import pytest

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from tests.mentalmodels.reflect.conftest import add_memory, add_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _embed_with_scripted_server(openai_embeddings):
    return openai_embeddings


def test_client_reflect_returns_answer_and_grounding(client, scripted_llm):
    bank = Bank.objects.create(id="compat-reflect", name="Compat")
    fact = add_memory(bank, "Alice prefers async communication", tags=["team"])
    obs = add_memory(bank, "The team works async-first", fact_type="observation", tags=["team"])
    add_model(bank, "team-comms", name="Team communication", content="Async on Slack.",
              tags=["team"], fresh=False)
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "communication"})]),
        Reply.tool_calls([("search_observations", {"query": "communication"})]),
        Reply.tool_calls([("recall", {"query": "Alice communication"})]),
        Reply.tool_calls([("done", {"answer": "Alice prefers **async**.",
                                    "memory_ids": [str(fact.id), str(obs.id)],
                                    "mental_model_ids": ["team-comms"]})]),
    )

    response = client.reflect(
        "compat-reflect", "How does Alice communicate?", budget="mid", tags=["team"],
        tags_match="any_strict", include_facts=True, include_tool_calls=True,
    )

    assert response.text == "Alice prefers **async**."
    assert {m.id for m in response.based_on.memories} == {str(fact.id), str(obs.id)}
    assert {m.type for m in response.based_on.memories} == {"world", "observation"}
    assert [m.id for m in response.based_on.mental_models] == ["team-comms"]
    assert response.based_on.mental_models[0].text == "Async on Slack."
    assert [c.tool for c in response.trace.tool_calls] == [
        "search_mental_models", "search_observations", "recall",
    ]
    assert response.trace.tool_calls[0].output["mental_models"][0]["id"] == "team-comms"
    assert response.usage.total_tokens > 0


def test_client_reflect_with_response_schema_and_exclusions(client, scripted_llm):
    bank = Bank.objects.create(id="compat-schema", name="Compat")
    add_memory(bank, "Deploys happen on Fridays")
    add_model(bank, "deploys", name="Deploys", content="Fridays.")
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "deploys"})]),
        Reply.tool_calls([("recall", {"query": "deploys"})]),
        Reply.tool_calls([("done", {"answer": "Deploys are on Fridays."})]),
        Reply.json({"day": "Friday"}),
    )

    response = client.reflect(
        "compat-schema", "When are deploys?", exclude_mental_model_ids=["deploys"],
        response_schema={"type": "object", "properties": {"day": {"type": "string"}},
                         "required": ["day"]},
    )

    assert response.text == "Deploys are on Fridays."
    assert response.structured_output == {"day": "Friday"}
    assert response.based_on is None
    first = scripted_llm.requests[0]
    assert "search_mental_models" not in [t["function"]["name"] for t in first["tools"]]


def test_client_reflect_with_every_option(client, scripted_llm):
    bank = Bank.objects.create(id="compat-options", name="Compat")
    fact = add_memory(bank, "Deploys happen on Fridays", tags=["ops"])
    add_memory(bank, "Deploys are risky", tags=["ops"], fact_type="observation")
    add_model(bank, "deploys", name="Deploys", content="Fridays.", tags=["ops"])
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "deploys"})]),
        Reply.tool_calls([("done", {"answer": "Fridays.", "memory_ids": [str(fact.id)]})]),
    )

    response = client.reflect(
        "compat-options", "When are deploys?", budget="high", context="release planning",
        max_tokens=1024, tag_groups=[{"or": [{"tags": ["ops"]}, {"tags": ["dev"]}]}],
        include_facts=True, include_tool_calls=True, include_tool_call_output=False,
        apply_all_directives=True, fact_types=["world"], exclude_mental_models=True,
        reflect_search_observations_max_tokens=500,
        reflect_search_observations_include_entities=False,
    )

    assert response.text == "Fridays."
    assert [m.id for m in response.based_on.memories] == [str(fact.id)]
    assert response.based_on.mental_models == []
    assert [c.tool for c in response.trace.tool_calls] == ["recall"]
    assert response.trace.tool_calls[0].output is None
    first = scripted_llm.requests[0]
    # fact_types=[world] leaves recall only; exclude_mental_models removes the model search.
    assert [t["function"]["name"] for t in first["tools"]] == ["recall", "done"]
    assert "release planning" in first["messages"][-1]["content"]
    assert first.get("max_completion_tokens", first.get("max_tokens")) == 1024
