"""The gateway against servers and models that answer as real ones do (``fakes.llm_server.Quirks``):
each quirk is survived once, in the gateway, whatever the caller."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fakes.llm_server import Quirks, Reply
from hindsight.infra.llm import LLMCutOff, LLMToolsUnsupported, get_llm
from hindsight.infra.llm.answers import strip_reasoning, tool_arguments
from hindsight.infra.llm.models import LLMRequest

USER = [{"role": "user", "content": "What does the team prefer?"}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}
GOOD = {"answer": "async", "confidence": 0.9}
TOOLS = [{"type": "function", "function": {
    "name": "recall", "description": "search memories",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}}}]


def with_retries(settings, n: int) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=n)


# -- reasoning in the content -----------------------------------------------------------------


@pytest.mark.parametrize("quirk", ["think", "orphan_think", "reasoning_content"])
def test_reasoning_is_taken_out_of_a_structured_answer(scripted_llm, quirk) -> None:
    scripted_llm.quirks = Quirks(**{quirk: True})
    scripted_llm.script(Reply.json(GOOD))
    assert get_llm().structured(USER, schema=SCHEMA, name="answer").data == GOOD


def test_reasoning_is_taken_out_of_a_chat_answer_and_of_what_goes_back(scripted_llm) -> None:
    scripted_llm.quirks = Quirks(think=True, reasoning_content=True)
    scripted_llm.script(Reply.text("## Team\n\nAlice leads."),
                        Reply.tool_calls([("recall", {"query": "team"})]))
    llm = get_llm()
    assert llm.chat(USER).content == "## Team\n\nAlice leads."
    result = llm.chat(USER, tools=TOOLS)
    assert result.content is None and result.message["content"] is None
    assert "reasoning_content" not in result.message


@pytest.mark.parametrize("raw, clean", [
    ("<think>a {draft}</think>\n## Doc", "## Doc"),
    ("<THINKING>x</THINKING>answer", "answer"),
    ("reasoning first</think>\n\nthe answer", "the answer"),
    ("the answer\n<think>cut short", "the answer"),
    ("<think>only thinking, cut short", ""),
    ('{"quote": "</think> is a tag"}', '{"quote": "</think> is a tag"}'),
    ('{"quote": "a <think> tag"}', '{"quote": "a <think> tag"}'),
])
def test_strip_reasoning_reads_every_shape_of_reasoning_block(raw, clean) -> None:
    assert strip_reasoning(raw) == clean


# -- JSON in prose ------------------------------------------------------------------------------


def test_json_wrapped_in_prose_is_found(scripted_llm) -> None:
    scripted_llm.quirks = Quirks(prose=True, think=True)
    scripted_llm.script(Reply.json(GOOD))
    assert get_llm().structured(USER, schema=SCHEMA, name="answer").data == GOOD


def test_of_several_json_values_in_prose_the_one_matching_the_schema_is_taken(
    scripted_llm,
) -> None:
    scripted_llm.script(Reply.text(
        'For example {"note": 1}. The answer:\n```json\n' + json.dumps(GOOD) + "\n```\nDone."))
    assert get_llm().structured(USER, schema=SCHEMA, name="answer").data == GOOD


# -- the structured-output ladder -----------------------------------------------------------------


def test_a_refused_json_schema_steps_down_to_json_mode_telling_the_model_the_schema(
    scripted_llm,
) -> None:
    scripted_llm.quirks = Quirks(refuse_json_schema=True, needs_schema=True)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert (result.data, result.mode) == (GOOD, "json_object")
    refused, asked = scripted_llm.requests
    assert refused["response_format"]["type"] == "json_schema"
    assert asked["response_format"] == {"type": "json_object"}


def test_a_server_refusing_every_response_format_is_asked_with_the_schema_in_the_prompt(
    scripted_llm,
) -> None:
    scripted_llm.quirks = Quirks(refuse_response_format=True, needs_schema=True)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert (result.data, result.mode, result.attempts) == (GOOD, "prompt", 3)
    assert [r.get("response_format", {}).get("type") for r in scripted_llm.requests] == [
        "json_schema", "json_object", None]
    assert json.dumps(SCHEMA, separators=(",", ":")) in scripted_llm.requests[-1]["messages"][-1][
        "content"]


def test_a_server_ignoring_response_format_is_asked_again_with_the_schema_in_the_prompt(
    scripted_llm, settings
) -> None:
    with_retries(settings, 1)
    scripted_llm.quirks = Quirks(ignore_response_format=True, needs_schema=True)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert (result.data, result.mode, result.attempts) == (GOOD, "json_object", 2)
    # Remembered: the next call tells the model the schema at once.
    get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert [r["response_format"]["type"] for r in scripted_llm.requests] == [
        "json_schema", "json_object", "json_object"]


@pytest.mark.django_db
def test_the_working_step_is_remembered_per_server_and_model_and_logged(
    scripted_llm, settings
) -> None:
    scripted_llm.quirks = Quirks(refuse_response_format=True)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    get_llm().structured(USER, schema=SCHEMA, name="answer", purpose="first")
    # A later gateway (another request, another job) starts at the step that answered.
    get_llm().structured(USER, schema=SCHEMA, name="answer", purpose="later")
    assert [r.get("response_format", {}).get("type") for r in scripted_llm.requests] == [
        "json_schema", "json_object", None, None]
    # This test's rows: the request log is written outside the test's transaction, so rows of
    # earlier tests on this database may still be there.
    steps = list(LLMRequest.objects.filter(scope__in=("first", "later")).order_by("started_at")
                 .values_list("scope", "structured_step"))
    assert steps == [("first", "json_schema"), ("first", "json_object"), ("first", "prompt"),
                     ("later", "prompt")]
    # Another model on the same server starts from the top.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_model="other")
    scripted_llm.quirks = Quirks()
    get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert scripted_llm.requests[-1]["response_format"]["type"] == "json_schema"


# -- cut-off answers --------------------------------------------------------------------------------


def test_a_cut_off_answer_is_asked_again_with_twice_the_budget(scripted_llm, settings) -> None:
    with_retries(settings, 2)
    scripted_llm.quirks = Quirks(cut_off=1)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer", max_tokens=300)
    assert (result.data, result.attempts) == (GOOD, 2)
    assert [r["max_completion_tokens"] for r in scripted_llm.requests] == [300, 600]


def test_a_chat_answer_cut_off_every_time_is_never_returned_half(scripted_llm, settings) -> None:
    with_retries(settings, 1)
    scripted_llm.quirks = Quirks(cut_off=5)
    scripted_llm.respond_with(lambda body: Reply.text("## Team\n\nAlice leads the team."))
    with pytest.raises(LLMCutOff, match="cut off") as excinfo:
        get_llm().chat(USER)
    assert excinfo.value.transient and excinfo.value.attempts == 2


# -- tool calls ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    '```json\n{"query": "team"}\n```',
    'Calling it now: {"query": "team"}',
    "{'query': 'team'}",
    '<think>which query?</think>{"query": "team"}',
])
def test_tool_arguments_a_model_wrapped_or_misquoted_are_repaired(scripted_llm, raw) -> None:
    scripted_llm.script(Reply.tool_calls([("recall", raw)]))
    result = get_llm().chat(USER, tools=TOOLS)
    assert result.tool_calls[0].arguments == {"query": "team"}
    assert result.tool_calls[0].arguments_error is None
    assert json.loads(result.message["tool_calls"][0]["function"]["arguments"]) == {"query": "team"}
    assert len(scripted_llm.requests) == 1


def test_tool_arguments_that_cannot_be_read_are_asked_again_telling_the_model_why(
    scripted_llm, settings
) -> None:
    with_retries(settings, 1)
    scripted_llm.quirks = Quirks(broken_tool_arguments=1)
    scripted_llm.respond_with(lambda body: Reply.tool_calls([("recall", {"query": "team"})]))
    result = get_llm().chat(USER, tools=TOOLS)
    assert result.tool_calls[0].arguments == {"query": "team"} and result.attempts == 2
    first, again = scripted_llm.requests
    told = again["messages"][len(first["messages"]):]
    assert [m["role"] for m in told] == ["assistant", "tool"]
    assert "not valid JSON" in told[1]["content"]
    assert result.message["tool_calls"][0]["function"]["arguments"] == '{"query": "team"}'


def test_unreadable_tool_arguments_python_literals_stay_unreadable_when_not_a_dict() -> None:
    assert tool_arguments("['team']")[0] == {}
    assert tool_arguments('{"query": "te')[1]


def test_a_model_refusing_tools_is_told_apart_and_remembered(scripted_llm) -> None:
    scripted_llm.quirks = Quirks(refuse_tools=True)
    with pytest.raises(LLMToolsUnsupported, match="does not support tools"):
        get_llm().chat(USER, tools=TOOLS)
    assert get_llm().tools_supported is False
    scripted_llm.script(Reply.text("fine"))
    assert get_llm().chat(USER).content == "fine"  # without tools it answers


# -- provider knobs: json_object mode and reasoning effort ----------------------------------------


@pytest.mark.parametrize("provider, json_mode, steps", [
    ("zai", None, ["json_schema", None]),          # z.ai's JSON mode corrupts answers: skipped
    ("ollama", None, ["json_schema", None]),
    ("openai", None, ["json_schema", "json_object"]),
    ("zai", True, ["json_schema", "json_object"]),  # the operator's word wins either way
    ("openai", False, ["json_schema", None]),
])
def test_json_object_mode_is_skipped_where_the_provider_or_operator_says(
    scripted_llm, settings, provider, json_mode, steps,
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider=provider,
                                             llm_json_object=json_mode)
    scripted_llm.quirks = Quirks(refuse_json_schema=True, needs_schema=True)
    scripted_llm.respond_with(lambda body: Reply.json(GOOD))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer")
    assert result.data == GOOD and result.mode == (steps[-1] or "prompt")
    assert [r.get("response_format", {}).get("type") for r in scripted_llm.requests] == steps
    assert json.dumps(SCHEMA, separators=(",", ":")) in scripted_llm.requests[-1]["messages"][-1][
        "content"]


def test_reasoning_effort_is_sent_when_configured_and_dropped_once_refused(
    scripted_llm, settings,
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_reasoning_effort="low")
    scripted_llm.script(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    assert get_llm().chat(USER).content == "one"
    assert scripted_llm.requests[-1]["reasoning_effort"] == "low"

    scripted_llm.quirks = Quirks(refuse_reasoning_effort=True)
    result = get_llm().chat(USER)
    assert (result.content, result.attempts) == ("two", 1)  # the refusal is no failed attempt
    refused, asked = scripted_llm.requests[-2:]
    assert "reasoning_effort" in refused and "reasoning_effort" not in asked
    get_llm().chat(USER)  # remembered: not offered again to this server and model
    assert "reasoning_effort" not in scripted_llm.requests[-1]
    assert len(scripted_llm.requests) == 4


def test_reasoning_effort_is_never_sent_to_a_model_that_refuses_it_or_when_unset(
    scripted_llm, settings,
) -> None:
    scripted_llm.script(Reply.text("a"), Reply.text("b"))
    get_llm().chat(USER)
    assert "reasoning_effort" not in scripted_llm.requests[-1]
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_reasoning_effort="high",
                                             llm_model="gpt-4o-mini")
    get_llm().chat(USER)
    assert "reasoning_effort" not in scripted_llm.requests[-1]
