"""Directives in the prompts (docs/behaviour.md#directives): a refresh's LLM requests carry the
active directives its scope applies, highest priority first, and no other; reflect's
``apply_all_directives`` ignores the scope; the trace and ``based_on`` say which applied."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from fakes.delta_llm import append_each_fact, delta_llm
from mentalmodels.directives.services import directive_create
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run
from tests.mentalmodels.test_pipeline import answer_with

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _scripted(scripted_llm, openai_embeddings):
    return scripted_llm


def system_prompt(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def positions(text: str, *words: str) -> list[int]:
    return [text.find(word) for word in words]


def directives_for_team(bank_id: str) -> dict[str, str]:
    made = [
        directive_create(bank_id=bank_id, name="Low", content="LOW-RULE", priority=1),
        directive_create(bank_id=bank_id, name="High", content="HIGH-RULE", priority=10),
        directive_create(bank_id=bank_id, name="Team", content="TEAM-RULE", priority=5,
                         tags=["team"]),
        directive_create(bank_id=bank_id, name="Off", content="OFF-RULE", priority=99,
                         is_active=False),
        directive_create(bank_id=bank_id, name="Cats", content="CATS-RULE", priority=50,
                         tags=["cats"]),
    ]
    return {d.name: str(d.id) for d in made}


def test_a_refresh_carries_the_active_in_scope_directives_in_priority_order(bank, scripted_llm):
    fact = make_memory(bank, "Alice prefers async communication", tags=["team"], embed=True)
    model = make_mental_model(bank, "team", tags=["team"], trigger={"keep_trace": True})
    ids = directives_for_team(bank.id)
    answer_with(scripted_llm, "## Team\n\nAlice prefers async.", [str(fact.id)])

    report = refresh_run(bank_id=bank.id, mental_model_id="team")

    assert report.outcome.outcome == "content_written"
    assert scripted_llm.requests
    for body in scripted_llm.requests:
        prompt = system_prompt(body)
        high, team, low = positions(prompt, "HIGH-RULE", "TEAM-RULE", "LOW-RULE")
        assert 0 < high < team < low, prompt
        # Near the top: before the prompt's own instructions.
        assert low < prompt.find("Sources, in priority order")
        assert "OFF-RULE" not in prompt and "CATS-RULE" not in prompt
    model.refresh_from_db()
    trace = model.reflect_response["trace"]
    assert trace["directives"] == [{"id": ids[n], "name": n} for n in ("High", "Team", "Low")]
    assert [d["name"] for d in model.reflect_response["based_on"]["directives"]] == [
        "High", "Team", "Low"]


def test_an_untagged_model_gets_only_the_untagged_directives(bank, scripted_llm):
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    make_mental_model(bank, "all")
    directives_for_team(bank.id)
    answer_with(scripted_llm, "Alice prefers async.", [str(fact.id)])
    refresh_run(bank_id=bank.id, mental_model_id="all")
    prompt = system_prompt(scripted_llm.requests[0])
    assert "HIGH-RULE" in prompt and "LOW-RULE" in prompt
    assert "TEAM-RULE" not in prompt and "CATS-RULE" not in prompt


def test_without_directives_the_prompt_is_unchanged(bank, scripted_llm):
    from mentalmodels.reflect.prompts import SYSTEM

    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    make_mental_model(bank, "all")
    answer_with(scripted_llm, "Alice prefers async.", [str(fact.id)])
    refresh_run(bank_id=bank.id, mental_model_id="all")
    assert system_prompt(scripted_llm.requests[0]) == SYSTEM


def test_a_delta_refresh_hands_its_edit_the_directives_too(bank, scripted_llm):
    make_memory(bank, "Alice leads the team", embed=True)
    baseline = "## Team\n\nAlice leads the team.\n\n## Log\n\n- started"
    model = make_mental_model(bank, "team", trigger={"mode": "delta"})
    delta_llm(scripted_llm, lambda call: [], answer=baseline)
    refresh_run(bank_id=bank.id, mental_model_id="team")
    directive_create(bank_id=bank.id, name="Formal", content="FORMAL-RULE",
                     mark_pages_stale=False)
    scripted_llm.reset()
    make_memory(bank, "Bob joined the team", embed=True)
    calls = delta_llm(scripted_llm, append_each_fact("log"))

    report = refresh_run(bank_id=bank.id, mental_model_id="team")

    assert report.plan.effective_mode == "delta"
    assert calls and all("FORMAL-RULE" in system_prompt(c.body) for c in calls)
    assert all("FORMAL-RULE" in system_prompt(body) for body in scripted_llm.requests)
    model.refresh_from_db()
    assert "Bob joined the team" in model.content


def reflect(bank_id: str, **body) -> dict:
    response = APIClient().post(f"/v1/default/banks/{bank_id}/reflect",
                                data=json.dumps({"query": "team", "include": {"facts": {}},
                                                 **body}),
                                content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize(("body", "expected"), [
    ({}, ["High", "Low"]),
    ({"tags": ["team"]}, ["High", "Team", "Low"]),
    ({"tags": ["team", "ops"], "tags_match": "all"}, ["High", "Low"]),
    ({"apply_all_directives": True}, ["Cats", "High", "Team", "Low"]),
])
def test_reflect_applies_directives_by_its_scope_or_all_of_them(bank, scripted_llm, body,
                                                                 expected):
    fact = make_memory(bank, "Alice prefers async communication", tags=["team"], embed=True)
    directives_for_team(bank.id)
    answer_with(scripted_llm, "Alice prefers async.", [str(fact.id)])
    answer = reflect(bank.id, **body)
    assert [d["name"] for d in answer["based_on"]["directives"]] == expected
    assert list(answer["based_on"]["directives"][0]) == ["id", "name", "content"]
    prompt = system_prompt(scripted_llm.requests[0])
    rules = {"High": "HIGH-RULE", "Low": "LOW-RULE", "Team": "TEAM-RULE", "Cats": "CATS-RULE"}
    found = [name for name, rule in rules.items() if rule in prompt]
    assert sorted(found) == sorted(expected)
    assert positions(prompt, *(rules[n] for n in expected)) == sorted(
        positions(prompt, *(rules[n] for n in expected)))
