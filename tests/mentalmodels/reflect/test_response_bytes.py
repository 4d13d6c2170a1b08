"""The reflect endpoint's answers to runs, byte for byte: 200s (with facts, with tool calls with
and without their output, with a response schema met or failed) and the 503/502/504 a failed run
is, captured from the view's hand-built dicts before the response serializers rendered them
(``EDGE_BYTES_CAPTURE``, see ``tests.wirebytes``).

Each body is compared as the raw response text, so the order of keys counts. Values that change
from run to run (date-times, uuids, timings) are replaced by placeholders first.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from tests.mentalmodels.reflect.conftest import add_memory, add_model
from tests.wirebytes import DATETIME, DURATION_MS, check_cases, check_or_capture

pytestmark = pytest.mark.django_db

REFLECT = "/v1/default/banks/reflect-bank/reflect"
SCHEMA = {"type": "object", "properties": {"channel": {"type": "string"}},
          "required": ["channel"]}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PORT = re.compile(r"127\.0\.0\.1:\d+")


def _normalized(text: str) -> str:
    text = DATETIME.sub('"<datetime>"', DURATION_MS.sub('"duration_ms":"<ms>"', text))
    return _PORT.sub("127.0.0.1:<port>", _UUID.sub("<uuid>", text))


def _done(fact_id: str) -> Reply:
    return Reply.tool_calls([("done", {"answer": "Alice prefers async.",
                                       "memory_ids": [fact_id],
                                       "mental_model_ids": ["team-comms"]})])


def _searches() -> list[Reply]:
    return [
        Reply.tool_calls([("search_mental_models", {"query": "communication"})]),
        Reply.tool_calls([("search_observations", {"query": "communication"})]),
        Reply.tool_calls([("recall", {"query": "communication"})]),
    ]


# (id, request body, the scripted replies given the cited fact's id)
CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("plain", {"query": "How does Alice communicate?"},
     lambda f: [*_searches(), _done(f)]),
    ("facts", {"query": "How does Alice communicate?", "budget": "mid", "include": {"facts": {}}},
     lambda f: [*_searches(), _done(f)]),
    ("tool-calls-output", {"query": "How does Alice communicate?",
                           "include": {"tool_calls": {}}},
     lambda f: [*_searches(), _done(f)]),
    ("tool-calls-no-output", {"query": "How does Alice communicate?",
                              "include": {"tool_calls": {"output": False}}},
     lambda f: [*_searches(), _done(f)]),
    ("everything", {"query": "How does Alice communicate?", "budget": "mid",
                    "include": {"facts": {}, "tool_calls": {"output": True}},
                    "response_schema": SCHEMA},
     lambda f: [*_searches(), _done(f), Reply.json({"channel": "Slack"})]),
    ("schema", {"query": "Which channel?", "fact_types": ["world"], "response_schema": SCHEMA},
     lambda f: [Reply.tool_calls([("done", {"answer": "Slack it is."})]),
                Reply.json({"channel": "Slack"})]),
    ("schema-failed", {"query": "Which channel?", "fact_types": ["world"],
                       "response_schema": SCHEMA},
     lambda f: [Reply.tool_calls([("done", {"answer": "Slack it is."})]),
                Reply.error(400, "bad schema")]),
    ("retrieval-failed", {"query": "q", "fact_types": ["world"]},
     lambda f: [Reply.tool_calls([("recall", {"query": "x"})])]),
    ("llm-failed", {"query": "q"}, lambda f: [Reply.error(400, "model refused")]),
    ("llm-timeout", {"query": "q"}, lambda f: []),
]

EXPECTED: dict[str, tuple[int, str]] = {
    'plain': (
        200,
        '{"text":"Alice prefers async.","based_on":null,"structured_output":null,"usage":{"inpu'
        't_tokens":743,"output_tokens":14,"total_tokens":757,"cached_tokens":0,"thoughts_tokens'
        '":0},"trace":null}'
    ),
    'facts': (
        200,
        '{"text":"Alice prefers async.","based_on":{"memories":[{"id":"<uuid>","text":"Alice pr'
        'efers async communication","type":"world","context":"standup","occurred_start":"<datet'
        'ime>","occurred_end":null,"mentioned_at":"<datetime>","document_id":"d1","tags":["team'
        '"]}],"mental_models":[{"id":"team-comms","text":"Async on Slack.","context":"Team comm'
        'unication"}],"directives":[]},"structured_output":null,"usage":{"input_tokens":743,"ou'
        'tput_tokens":14,"total_tokens":757,"cached_tokens":0,"thoughts_tokens":0},"trace":null'
        '}'
    ),
    'tool-calls-output': (
        200,
        '{"text":"Alice prefers async.","based_on":null,"structured_output":null,"usage":{"inpu'
        't_tokens":743,"output_tokens":14,"total_tokens":757,"cached_tokens":0,"thoughts_tokens'
        '":0},"trace":{"tool_calls":[{"tool":"search_mental_models","input":{"query":"communica'
        'tion"},"duration_ms":"<ms>","iteration":1,"output":{"mental_models":[{"id":"team-comms'
        '","name":"Team communication","source_query":"What about Team communication?","content'
        '":"Async on Slack.","tags":[],"is_stale":true,"is_empty":false,"last_refreshed_at":nul'
        'l,"relevance":0.439429}],"count":1}},{"tool":"search_observations","input":{"query":"c'
        'ommunication"},"duration_ms":"<ms>","iteration":2,"output":{"observations":[],"count":'
        '0}},{"tool":"recall","input":{"query":"communication"},"duration_ms":"<ms>","iteration'
        '":3,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Alice prefers async commu'
        'nication","context":"standup","tags":["team"],"occurred_at":"<datetime>","updated_at":'
        '"<datetime>"},{"id":"<uuid>","type":"experience","text":"Bob prefers calls","updated_a'
        't":"<datetime>"}],"count":2}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{'
        '"scope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"},{"sco'
        'pe":"agent_4","duration_ms":"<ms>"}]}}'
    ),
    'tool-calls-no-output': (
        200,
        '{"text":"Alice prefers async.","based_on":null,"structured_output":null,"usage":{"inpu'
        't_tokens":743,"output_tokens":14,"total_tokens":757,"cached_tokens":0,"thoughts_tokens'
        '":0},"trace":{"tool_calls":[{"tool":"search_mental_models","input":{"query":"communica'
        'tion"},"duration_ms":"<ms>","iteration":1,"output":null},{"tool":"search_observations"'
        ',"input":{"query":"communication"},"duration_ms":"<ms>","iteration":2,"output":null},{'
        '"tool":"recall","input":{"query":"communication"},"duration_ms":"<ms>","iteration":3,"'
        'output":null}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"scope":"agent_2'
        '","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"},{"scope":"agent_4","d'
        'uration_ms":"<ms>"}]}}'
    ),
    'everything': (
        200,
        '{"text":"Alice prefers async.","based_on":{"memories":[{"id":"<uuid>","text":"Alice pr'
        'efers async communication","type":"world","context":"standup","occurred_start":"<datet'
        'ime>","occurred_end":null,"mentioned_at":"<datetime>","document_id":"d1","tags":["team'
        '"]}],"mental_models":[{"id":"team-comms","text":"Async on Slack.","context":"Team comm'
        'unication"}],"directives":[]},"structured_output":{"channel":"Slack"},"usage":{"input_'
        'tokens":788,"output_tokens":16,"total_tokens":804,"cached_tokens":0,"thoughts_tokens":'
        '0},"trace":{"tool_calls":[{"tool":"search_mental_models","input":{"query":"communicati'
        'on"},"duration_ms":"<ms>","iteration":1,"output":{"mental_models":[{"id":"team-comms",'
        '"name":"Team communication","source_query":"What about Team communication?","content":'
        '"Async on Slack.","tags":[],"is_stale":true,"is_empty":false,"last_refreshed_at":null,'
        '"relevance":0.439429}],"count":1}},{"tool":"search_observations","input":{"query":"com'
        'munication"},"duration_ms":"<ms>","iteration":2,"output":{"observations":[],"count":0}'
        '},{"tool":"recall","input":{"query":"communication"},"duration_ms":"<ms>","iteration":'
        '3,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Alice prefers async communi'
        'cation","context":"standup","tags":["team"],"occurred_at":"<datetime>","updated_at":"<'
        'datetime>"},{"id":"<uuid>","type":"experience","text":"Bob prefers calls","updated_at"'
        ':"<datetime>"}],"count":2}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"s'
        'cope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"},{"scope'
        '":"agent_4","duration_ms":"<ms>"},{"scope":"structured","duration_ms":"<ms>"}]}}'
    ),
    'schema': (
        200,
        '{"text":"Slack it is.","based_on":null,"structured_output":{"channel":"Slack"},"usage"'
        ':{"input_tokens":197,"output_tokens":6,"total_tokens":203,"cached_tokens":0,"thoughts_'
        'tokens":0},"trace":null}'
    ),
    'schema-failed': (
        200,
        '{"text":"Slack it is.","based_on":null,"structured_output":null,"structured_output_err'
        'or":"LLMProviderError: LLM request refused: HTTP 400: bad schema","usage":{"input_toke'
        'ns":154,"output_tokens":4,"total_tokens":158,"cached_tokens":0,"thoughts_tokens":0},"t'
        'race":null}'
    ),
    'retrieval-failed': (
        503,
        '{"detail":"retrieval failed: recall failed: EmbeddingError: embedding request failed a'
        'fter 1 attempt(s): HTTP 500: Error code: 500 - scripted embedding failure"}'
    ),
    'llm-failed': (
        502,
        '{"detail":"LLM request failed: LLM request refused: HTTP 400: model refused"}'
    ),
    'llm-timeout': (
        504,
        '{"detail":"LLM timed out: LLM deadline of 0s exhausted before the call"}'
    ),
}


def test_every_case_has_an_expectation() -> None:
    check_cases(CASES, EXPECTED)


@pytest.mark.parametrize(("case_id", "body", "replies"), CASES, ids=[case[0] for case in CASES])
def test_reflect_runs_answer_byte_for_byte(case_id: str, body: dict[str, Any], replies: Any,
                                           bank, scripted_llm, openai_embeddings,
                                           settings) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    fact = add_memory(bank, "Alice prefers async communication", context="standup",
                      tags=["team"], document_id="d1", mentioned_at=when, occurred_start=when)
    add_memory(bank, "Bob prefers calls", fact_type="experience")
    add_model(bank, "team-comms", name="Team communication", content="Async on Slack.",
              fresh=False)
    scripted_llm.script(*replies(str(fact.id)))
    if case_id == "retrieval-failed":
        openai_embeddings.fail_embeddings(5)
    if case_id == "llm-timeout":
        settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                                 reflect_wall_timeout_seconds=0.0)
    api = APIClient(raise_request_exception=False)
    response = api.post(REFLECT, data=body, format="json")
    got = (response.status_code, _normalized(response.content.decode()))
    check_or_capture(case_id, got, EXPECTED)
