"""Reflect with a model that cannot call tools (docs/behaviour.md#a-model-without-tools): the
forced turns' searches run up front, their results go into one prompt, one answer comes back,
grounded as always."""

from __future__ import annotations

import json

import pytest

from fakes.llm_server import Quirks, Reply
from hindsight.infra.llm import get_llm
from hindsight.infra.tagscope import TagScope
from mentalmodels.reflect import reflect_run
from tests.mentalmodels.reflect.conftest import add_memory, add_model

pytestmark = pytest.mark.django_db


def test_a_model_refusing_tools_answers_once_from_the_same_searches(bank, scripted_llm):
    fact = add_memory(bank, "Alice prefers async communication on Slack")
    obs = add_memory(bank, "The team communicates asynchronously", fact_type="observation")
    add_model(bank, "team-comms", name="Team communication", content="The team uses Slack.",
              fresh=False)
    scripted_llm.quirks = Quirks(refuse_tools=True)
    scripted_llm.respond_with(lambda body: Reply.json({
        "answer": "Alice prefers async.", "memory_ids": [str(fact.id), str(obs.id), "made-up"],
        "mental_model_ids": ["team-comms"]}))

    result = reflect_run(bank_id=bank.id, query="How does the team communicate?",
                         scope=TagScope(), budget="mid")

    refused, asked = scripted_llm.requests
    assert refused["tools"] and "tools" not in asked
    prompt = asked["messages"][1]["content"]
    for name in ("search_mental_models", "search_observations", "recall"):
        assert f"Results of {name}:" in prompt
    assert str(fact.id) in prompt and str(obs.id) in prompt and "The team uses Slack." in prompt
    assert result.text == "Alice prefers async." and result.finish == "without_tools"
    assert [e["id"] for e in result.based_on["world"]] == [str(fact.id)]
    assert [e["id"] for e in result.based_on["observation"]] == [str(obs.id)]
    assert [e["id"] for e in result.based_on["mental-models"]] == ["team-comms"]
    assert any("made-up" in w for w in result.warnings)
    assert [c["name"] for c in result.tool_calls] == [
        "search_mental_models", "search_observations", "recall"]
    assert [c["scope"] for c in result.llm_calls] == ["without_tools"]
    assert {r.id for r in result.memories_read} >= {str(fact.id), str(obs.id)}


def test_once_refused_later_runs_ask_without_tools_at_once(bank, scripted_llm):
    add_memory(bank, "Alice prefers async communication on Slack")
    scripted_llm.quirks = Quirks(refuse_tools=True)
    scripted_llm.respond_with(lambda body: Reply.json(
        {"answer": "Async.", "memory_ids": [], "mental_model_ids": []}))
    reflect_run(bank_id=bank.id, query="q", scope=TagScope(), budget="low")
    assert get_llm().tools_supported is False
    before = len(scripted_llm.requests)
    reflect_run(bank_id=bank.id, query="q", scope=TagScope(), budget="low")
    later = scripted_llm.requests[before:]
    assert len(later) == 1 and "tools" not in later[0]
    assert json.loads(later[0]["messages"][1]["content"].split("Results of recall:\n")[1])["facts"]
