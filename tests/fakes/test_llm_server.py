"""The scripted OpenAI-compatible server answers the openai SDK as a provider would."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import openai
import pytest

from fakes.llm_server import (
    Reply,
    ScriptedLLMServer,
    pseudo_embedding,
    reflect_reply,
    returned_ids,
    tool_results,
)


@pytest.fixture
def server(llm_server: ScriptedLLMServer):
    llm_server.reset()
    yield llm_server
    llm_server.reset()


@pytest.fixture
def client(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


def chat(client: openai.OpenAI, **kwargs):
    return client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hello there"}], **kwargs
    )


def test_scripted_replies_are_consumed_in_order_and_requests_recorded(server, client) -> None:
    server.script(Reply.text("first"), Reply.json({"a": 1}))
    assert chat(client).choices[0].message.content == "first"
    assert json.loads(chat(client).choices[0].message.content) == {"a": 1}
    assert len(server.requests) == 2
    assert server.requests[0]["messages"][0]["content"] == "hello there"
    assert server.pending == 0


def test_tool_calls_come_back_in_openai_format(server, client) -> None:
    server.script(Reply.tool_calls([("recall", {"query": "x"}), ("done", {"answer": "y"})]))
    response = chat(client, tools=[{"type": "function", "function": {"name": "recall"}}])
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["recall", "done"]
    assert json.loads(calls[0].function.arguments) == {"query": "x"}
    assert calls[0].id != calls[1].id


def test_usage_is_reported_and_can_be_scripted(server, client) -> None:
    server.script(
        Reply.text("one two three"),
        Reply.text("x", usage={"prompt_tokens": 7, "completion_tokens": 2}),
    )
    usage = chat(client).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2, 3, 5)
    usage = chat(client).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (7, 2, 9)


def test_unscripted_request_is_a_500_saying_so(server, client) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted reply"):
        chat(client)


def test_error_reply_has_the_scripted_status(server, client) -> None:
    server.script(Reply.error(429, "slow down"), Reply.error(400, "bad"))
    with pytest.raises(openai.RateLimitError, match="slow down"):
        chat(client)
    with pytest.raises(openai.BadRequestError, match="bad"):
        chat(client)


def test_responder_answers_when_the_queue_is_empty(server, client) -> None:
    server.script(Reply.text("scripted"))
    server.respond_with(lambda body: Reply.text(f"echo {body['messages'][-1]['content']}"))
    assert chat(client).choices[0].message.content == "scripted"
    assert chat(client).choices[0].message.content == "echo hello there"


def test_strict_schema_refusal_answers_400_and_keeps_the_script(server, client) -> None:
    server.refuse_strict_schema = True
    server.script(Reply.json({"ok": True}))
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": True}}
    with pytest.raises(openai.BadRequestError, match="json_schema"):
        chat(client, response_format=fmt)
    assert chat(client, response_format={"type": "json_object"}).choices[0].message.content == (
        '{"ok": true}'
    )


def test_held_request_waits_for_release(server, client) -> None:
    reply, handle = Reply.hold(Reply.text("late"))
    server.script(reply)
    result: list[str] = []
    thread = threading.Thread(target=lambda: result.append(chat(client).choices[0].message.content))
    thread.start()
    assert handle.wait_received(5)
    time.sleep(0.1)
    assert result == []
    handle.release()
    thread.join(5)
    assert result == ["late"]


def test_delay_and_client_timeout(server, client) -> None:
    server.script(Reply.delay(1.0, Reply.text("slow")))
    with pytest.raises(openai.APITimeoutError):
        chat(client, timeout=0.2)


def test_disconnect_is_a_connection_error(server, client) -> None:
    server.script(Reply.disconnect(), Reply.text("after"))
    with pytest.raises(openai.APIConnectionError):
        chat(client)
    assert chat(client).choices[0].message.content == "after"


def test_models_endpoint_lists_the_scripted_model(client) -> None:
    assert [m.id for m in client.models.list()] == ["scripted"]


def test_pseudo_embeddings_are_deterministic_and_shared_words_are_closer() -> None:
    a = pseudo_embedding("alice likes green tea", 64)
    assert a == pseudo_embedding("Alice likes green tea!", 64)
    near = pseudo_embedding("alice likes black tea", 64)
    far = pseudo_embedding("quarterly revenue report", 64)
    assert np.linalg.norm(a) == pytest.approx(1.0)
    assert np.dot(a, near) > np.dot(a, far) + 0.3


def test_embeddings_endpoint_honours_dimensions_failures_and_forced_size(server, client) -> None:
    response = client.embeddings.create(model="e", input=["a b", "c"], dimensions=16)
    assert [len(d.embedding) for d in response.data] == [16, 16]
    server.fail_embeddings(1, status=503)
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="e", input=["a"])
    server.embedding_dimensions = 5
    forced = client.embeddings.create(model="e", input=["a"], dimensions=16)
    assert len(forced.data[0].embedding) == 5
    assert len(server.embedding_requests) == 3
    assert server.requests == []


def test_env_mirrors_the_settings_for_worker_processes(
    scripted_llm, openai_embeddings, settings
) -> None:
    env = scripted_llm.env
    assert env["HINDSIGHT_API_LLM_BASE_URL"] == scripted_llm.base_url
    assert env["HINDSIGHT_API_LLM_MODEL"] == "scripted"
    assert env["HINDSIGHT_API_LLM_MAX_RETRIES"] == "0"
    assert env["HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS"] == "384"
    from hindsight.infra.config import read_config

    cfg = read_config(env)
    assert cfg.errors == ()
    assert cfg.llm_base_url == settings.HINDSIGHT.llm_base_url
    assert cfg.embeddings_provider == "openai"


def test_a_failing_responder_is_reported_as_a_500_naming_the_error(server, client) -> None:
    server.respond_with(lambda body: 1 / 0)
    with pytest.raises(openai.InternalServerError, match="ZeroDivisionError"):
        chat(client)


def test_wait_for_requests_sees_requests_made_by_another_thread(server, client) -> None:
    server.respond_with(lambda body: Reply.text("ok"))
    assert not server.wait_for_requests(1, timeout=0.05)
    thread = threading.Thread(target=lambda: [chat(client) for _ in range(2)])
    thread.start()
    assert server.wait_for_requests(2, timeout=5)
    thread.join(5)


def test_a_subprocess_reaches_the_server_with_the_fixture_env(scripted_llm) -> None:
    import os
    import subprocess
    import sys

    scripted_llm.script(Reply.text("from the test"))
    code = (
        "import os, openai\n"
        "c = openai.OpenAI(base_url=os.environ['HINDSIGHT_API_LLM_BASE_URL'],"
        " api_key=os.environ['HINDSIGHT_API_LLM_API_KEY'], max_retries=0)\n"
        "r = c.chat.completions.create(model=os.environ['HINDSIGHT_API_LLM_MODEL'],"
        " messages=[{'role': 'user', 'content': 'hi'}])\n"
        "print(r.choices[0].message.content)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **scripted_llm.env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the test"
    assert scripted_llm.requests[0]["model"] == "scripted"


def test_returned_ids_reads_the_memories_of_every_tool_output_and_passes_over_unreadable_ones() -> None:
    facts = {"facts": [{"id": "f1", "text": "a"}, {"id": "f2", "text": "b"}], "count": 2}
    seen = {"observations": [{"id": "o1", "text": "c"}], "count": 1}
    body = {"messages": [
        {"role": "user", "content": "question"},
        {"role": "tool", "content": json.dumps(facts)},
        {"role": "tool", "content": "not json"},
        {"role": "tool", "content": json.dumps(["a", "list"])},
        {"role": "tool", "content": json.dumps(seen)},
    ]}
    assert tool_results(body) == [facts, seen]
    assert returned_ids(body) == ["f1", "f2", "o1"]
    assert returned_ids(body, first=1) == ["f1", "o1"]


def test_reflect_reply_looks_up_when_a_tool_is_forced_and_then_answers_citing_what_it_read() -> None:
    forced = {"tool_choice": {"type": "function", "function": {"name": "recall"}}, "messages": []}
    assert reflect_reply(forced, "doc", query="the team") == Reply.tool_calls(
        [("recall", {"query": "the team"})])
    read = {"messages": [{"role": "tool", "content": json.dumps({"facts": [{"id": "f1"}]})}]}
    assert reflect_reply(read, "## Doc") == Reply.tool_calls(
        [("done", {"answer": "## Doc", "memory_ids": ["f1"], "mental_model_ids": []})])
