"""The LLM gateway against the scripted OpenAI-compatible server (real HTTP via the openai SDK)."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from fakes.llm_server import Reply
from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.llm import (
    Deadline,
    LLMOutputError,
    LLMProviderError,
    LLMTimeout,
    Usage,
    collect_llm_calls,
    get_llm,
    slot_deadline,
)

USER = [{"role": "user", "content": "What does the team prefer?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "recall",
            "description": "search memories",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}


def with_retries(settings, n: int) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=n)


# -- chat and tools ------------------------------------------------------------------------


def test_tool_calls_round_trip_through_the_conversation(scripted_llm) -> None:
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "team preferences"})]),
        Reply.text("The team prefers async updates."),
    )
    llm = get_llm()
    first = llm.chat(USER, tools=TOOLS, tool_choice="auto", purpose="reflect")
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("recall", {"query": "team preferences"})
    ]
    assert first.finish_reason == "tool_calls"
    call = first.tool_calls[0]
    conversation = [
        *USER,
        first.message,
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"results": []})},
    ]
    second = llm.chat(conversation, tools=TOOLS, purpose="reflect")
    assert second.content == "The team prefers async updates."
    assert second.tool_calls == []

    sent_first, sent_second = scripted_llm.requests
    assert sent_first["model"] == "scripted"
    assert sent_first["tools"] == TOOLS
    assert sent_first["tool_choice"] == "auto"
    echoed = sent_second["messages"][1]
    assert echoed["role"] == "assistant"
    assert echoed["tool_calls"][0]["id"] == call.id
    assert json.loads(echoed["tool_calls"][0]["function"]["arguments"]) == call.arguments
    assert sent_second["messages"][2]["tool_call_id"] == call.id


def test_the_request_body_is_sent_as_built(scripted_llm) -> None:
    scripted_llm.script(Reply.text("ok"), Reply.json({"answer": "a", "confidence": 1}))
    llm = get_llm()
    choice = {"type": "function", "function": {"name": "recall"}}
    llm.chat(USER, tools=TOOLS, tool_choice=choice, max_tokens=64, temperature=0.5)
    llm.structured(USER, schema=SCHEMA, name="answer")

    chat, structured = scripted_llm.requests
    assert chat == {"messages": USER, "model": "scripted", "tools": TOOLS, "tool_choice": choice,
                    "temperature": 0.5, "max_completion_tokens": 64}
    assert structured == {
        "messages": USER, "model": "scripted",
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}},
    }


def test_malformed_tool_arguments_are_reported_not_raised(scripted_llm) -> None:
    scripted_llm.script(Reply.tool_calls([("recall", "{not json"), ("recall", "[1, 2]")]))
    result = get_llm().chat(USER, tools=TOOLS)
    bad_json, not_object = result.tool_calls
    assert bad_json.arguments == {} and "not valid JSON" in (bad_json.arguments_error or "")
    assert not_object.arguments == {} and "JSON object" in (not_object.arguments_error or "")
    assert result.message["tool_calls"][0]["function"]["arguments"] == "{not json"


def test_usage_and_duration_are_returned_for_every_call(scripted_llm) -> None:
    scripted_llm.script(
        Reply.delay(0.05, Reply.text("ok", usage={"prompt_tokens": 11, "completion_tokens": 4}))
    )
    result = get_llm().chat(USER)
    assert result.usage == Usage(input_tokens=11, output_tokens=4, total_tokens=15)
    assert result.duration_ms >= 50
    assert result.attempts == 1


def test_max_tokens_falls_back_to_the_older_parameter_when_refused(scripted_llm) -> None:
    def responder(body):
        if "max_completion_tokens" in body:
            return Reply.error(400, "Unsupported parameter: 'max_completion_tokens'")
        return Reply.text(f"limit {body['max_tokens']}")

    scripted_llm.respond_with(responder)
    llm = get_llm()
    assert llm.chat(USER, max_tokens=50).content == "limit 50"
    assert llm.chat(USER, max_tokens=60).content == "limit 60"
    assert ["max_completion_tokens" in r for r in scripted_llm.requests] == [True, False, False]


# -- structured output -----------------------------------------------------------------------


def test_structured_uses_a_strict_json_schema_and_validates(scripted_llm) -> None:
    scripted_llm.script(Reply.json({"answer": "async", "confidence": 0.9}))
    result = get_llm().structured(USER, schema=SCHEMA, name="answer", purpose="extract")
    assert result.data == {"answer": "async", "confidence": 0.9}
    assert result.mode == "json_schema"
    (request,) = scripted_llm.requests
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }


def test_structured_falls_back_to_json_mode_when_strict_schemas_are_refused(scripted_llm) -> None:
    scripted_llm.refuse_strict_schema = True
    scripted_llm.script(
        Reply.json({"answer": "a", "confidence": 1}), Reply.json({"answer": "b", "confidence": 0})
    )
    llm = get_llm()
    result = llm.structured(USER, schema=SCHEMA, name="answer")
    assert result.data == {"answer": "a", "confidence": 1}
    assert result.mode == "json_object"
    assert result.attempts == 2
    refused, fallback = scripted_llm.requests
    assert refused["response_format"]["type"] == "json_schema"
    assert fallback["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA, separators=(",", ":")) in fallback["messages"][-1]["content"]
    # The same gateway remembers the refusal: the next call goes straight to JSON mode.
    assert llm.structured(USER, schema=SCHEMA, name="answer").data["answer"] == "b"
    assert len(scripted_llm.requests) == 3


def test_structured_answer_violating_the_schema_is_an_output_error(scripted_llm) -> None:
    scripted_llm.script(Reply.json({"answer": "x", "confidence": "high"}))
    with pytest.raises(LLMOutputError, match="confidence"):
        get_llm().structured(USER, schema=SCHEMA, name="answer")


def test_structured_answer_that_is_not_json_is_an_output_error(scripted_llm) -> None:
    scripted_llm.script(Reply.text("I think the answer is async."))
    with pytest.raises(LLMOutputError, match="not valid JSON"):
        get_llm().structured(USER, schema=SCHEMA, name="answer")


def test_structured_answer_cut_off_at_the_token_limit_is_an_output_error(scripted_llm) -> None:
    scripted_llm.script(Reply.text('{"answer": "as', finish_reason="length"))
    with pytest.raises(LLMOutputError, match="token limit"):
        get_llm().structured(USER, schema=SCHEMA, name="answer")


def test_structured_accepts_json_wrapped_in_a_code_fence(scripted_llm) -> None:
    scripted_llm.script(Reply.text('```json\n{"answer": "x", "confidence": 0.5}\n```'))
    assert get_llm().structured(USER, schema=SCHEMA, name="answer").data["answer"] == "x"


def test_structured_rejects_an_invalid_schema_before_any_request(scripted_llm) -> None:
    with pytest.raises(ValueError, match="invalid JSON schema"):
        get_llm().structured(USER, schema={"type": "nonsense"}, name="bad")
    assert scripted_llm.requests == []


# -- a 200 that is not a usable completion --------------------------------------------------


@pytest.mark.parametrize("body", ["<html><body>502 Bad Gateway</body></html>",
                                  '{"id": "chatcmpl-1", "choices": [{"index": 0, "mess'])
@pytest.mark.parametrize("kind", ["chat", "structured"])
def test_a_200_whose_body_is_not_json_is_an_output_error_not_retried(
    scripted_llm, settings, body, kind
) -> None:
    with_retries(settings, 2)
    scripted_llm.script(Reply.raw(body), Reply.text("never"))
    llm = get_llm()
    with collect_llm_calls() as records, pytest.raises(
        LLMOutputError, match="not a JSON completion"
    ) as excinfo:
        if kind == "chat":
            llm.chat(USER)
        else:
            llm.structured(USER, schema=SCHEMA, name="answer")
    assert excinfo.value.attempts == 1 and len(scripted_llm.requests) == 1
    [record] = records
    assert record.error is not None and record.error.startswith("LLMOutputError")


@pytest.mark.parametrize("kind", ["chat", "structured"])
def test_a_200_without_choices_is_an_output_error(scripted_llm, kind) -> None:
    scripted_llm.script(Reply.without_choices())
    llm = get_llm()
    with collect_llm_calls() as records, pytest.raises(LLMOutputError, match="no choices"):
        if kind == "chat":
            llm.chat(USER)
        else:
            llm.structured(USER, schema=SCHEMA, name="answer")
    assert len(records) == 1 and "no choices" in (records[0].error or "")


def test_a_null_content_answer_is_no_text_to_chat_and_an_error_to_structured(
    scripted_llm,
) -> None:
    # chat() hands the caller what the model said, nothing; the reflect loop asks again.
    scripted_llm.script(Reply.null_content(), Reply.null_content())
    result = get_llm().chat(USER, tools=TOOLS)
    assert result.content is None and result.tool_calls == []
    assert result.message == {"role": "assistant", "content": None}
    with pytest.raises(LLMOutputError, match="empty; expected JSON"):
        get_llm().structured(USER, schema=SCHEMA, name="answer")


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_error_is_retried_then_succeeds(scripted_llm, settings, status) -> None:
    with_retries(settings, 2)
    scripted_llm.script(Reply.error(status, "try again"), Reply.error(status), Reply.text("ok"))
    result = get_llm().chat(USER)
    assert result.content == "ok"
    assert result.attempts == 3
    assert len(scripted_llm.requests) == 3


def test_connection_error_is_retried(scripted_llm, settings) -> None:
    with_retries(settings, 1)
    scripted_llm.script(Reply.disconnect(), Reply.text("ok"))
    assert get_llm().chat(USER).content == "ok"
    assert len(scripted_llm.requests) == 2


def test_transient_errors_beyond_the_retry_budget_raise_provider_error(
    scripted_llm, settings
) -> None:
    with_retries(settings, 1)
    scripted_llm.script(Reply.error(500, "down"), Reply.error(502, "still down"), Reply.text("x"))
    with pytest.raises(LLMProviderError, match="2 attempt") as excinfo:
        get_llm().chat(USER)
    assert excinfo.value.status_code == 502
    assert excinfo.value.attempts == 2
    assert len(scripted_llm.requests) == 2
    assert scripted_llm.pending == 1


def test_non_transient_400_is_not_retried(scripted_llm, settings) -> None:
    with_retries(settings, 3)
    scripted_llm.script(Reply.error(400, "bad request"), Reply.text("never"))
    with pytest.raises(LLMProviderError, match="bad request") as excinfo:
        get_llm().chat(USER)
    assert excinfo.value.status_code == 400
    assert len(scripted_llm.requests) == 1


def test_retries_default_to_zero_under_the_fixture(scripted_llm) -> None:
    scripted_llm.script(Reply.error(500), Reply.text("never"))
    with pytest.raises(LLMProviderError):
        get_llm().chat(USER)
    assert len(scripted_llm.requests) == 1


def _timed(scripted_llm, *replies: Reply) -> list[float]:
    """Answer the next chat requests with ``replies`` in order; the list fills with when each
    request arrived at the server."""
    queue, arrived = list(replies), []

    def respond(body):
        arrived.append(time.monotonic())
        return queue.pop(0)

    scripted_llm.respond_with(respond)
    return arrived


@pytest.mark.parametrize("status", [429, 503])
def test_an_in_call_retry_waits_at_least_the_retry_after(scripted_llm, settings, status) -> None:
    with_retries(settings, 1)
    arrived = _timed(scripted_llm, Reply.error(status, "slow down", retry_after="1.5"),
                     Reply.text("ok"))
    result = get_llm().chat(USER)
    assert result.content == "ok" and result.attempts == 2
    # The jittered backoff alone is at most 0.2 s before the first retry.
    assert arrived[1] - arrived[0] >= 1.5, arrived


def test_a_retry_after_beyond_the_in_call_cap_ends_the_call_with_it(scripted_llm, settings) -> None:
    with_retries(settings, 3)
    arrived = _timed(scripted_llm, Reply.error(429, "come back in a minute", retry_after="60"),
                     Reply.text("never"))
    started = time.monotonic()
    with pytest.raises(LLMProviderError, match="Retry-After 60s") as excinfo:
        get_llm().chat(USER)
    assert time.monotonic() - started < 30  # waiting in the call would take 60 s
    assert len(arrived) == 1  # no retry sent before the provider said
    assert excinfo.value.retry_after == 60 and excinfo.value.status_code == 429
    assert excinfo.value.attempts == 1


def test_a_retry_after_past_the_slots_deadline_is_not_waited_in_the_call(
    scripted_llm, settings
) -> None:
    with_retries(settings, 3)
    # 20 s is under the in-call cap: only the slot's 10 s left rule it out.
    arrived = _timed(scripted_llm, Reply.error(503, "busy", retry_after="20"),
                     Reply.text("never"))
    started = time.monotonic()
    with slot_deadline(Deadline(10.0)), pytest.raises(LLMProviderError) as excinfo:
        get_llm().chat(USER)
    assert time.monotonic() - started < 5  # neither slept to the deadline (10 s) nor past it
    assert len(arrived) == 1
    assert excinfo.value.retry_after == 20


# -- deadlines -------------------------------------------------------------------------------


def test_deadline_exhausted_during_a_held_request_raises_llm_timeout(
    scripted_llm, settings
) -> None:
    # A deadline is not retried away, and it, not the 60 s request timeout, ends the wait.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=3,
                                             llm_timeout_seconds=60)
    reply, handle = Reply.hold(Reply.text("too late"))
    scripted_llm.script(reply)
    started = time.monotonic()
    with pytest.raises(LLMTimeout, match="deadline"):
        get_llm().chat(USER, deadline=Deadline(0.5))
    elapsed = time.monotonic() - started
    assert handle.received
    assert 0.4 < elapsed < 20
    assert len(scripted_llm.requests) == 1
    handle.release()


class _SlotClockRanOut(Exception):
    pass


def test_a_request_cut_short_by_the_slot_clock_raises_the_slots_own_timeout(
    scripted_llm, settings
) -> None:
    # The engine's watchdog and the request's timeout (capped at the slot's time) end together;
    # whichever notices first, the attempt must end as the slot's timeout, not an LLMTimeout.
    with_retries(settings, 3)
    reply, handle = Reply.hold(Reply.text("too late"))
    scripted_llm.script(reply)
    with slot_deadline(Deadline(0.4), on_expiry=_SlotClockRanOut), pytest.raises(
        _SlotClockRanOut
    ):
        get_llm().chat(USER, deadline=Deadline(30))
    # A nearer deadline of the caller's own is still the caller's LLMTimeout.
    scripted_llm.script(Reply.delay(1, Reply.text("late")))
    with slot_deadline(Deadline(5), on_expiry=_SlotClockRanOut), pytest.raises(
        LLMTimeout, match="deadline of 0.3s"
    ):
        get_llm().chat(USER, deadline=Deadline(0.3))
    assert len(scripted_llm.requests) == 2
    handle.release()


def test_spent_deadline_raises_before_sending_anything(scripted_llm) -> None:
    deadline = Deadline(0.0)
    with pytest.raises(LLMTimeout, match="before the call"):
        get_llm().chat(USER, deadline=deadline)
    assert scripted_llm.requests == []


def test_deadline_is_shared_by_a_chain_of_calls(scripted_llm) -> None:
    scripted_llm.script(Reply.delay(0.3, Reply.text("one")), Reply.delay(0.5, Reply.text("two")))
    deadline = Deadline(0.6)
    llm = get_llm()
    assert llm.chat(USER, deadline=deadline).content == "one"
    with pytest.raises(LLMTimeout):
        llm.chat(USER, deadline=deadline)


def test_per_request_timeout_is_retried_then_raises_llm_timeout(scripted_llm, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, llm_timeout_seconds=0.2, llm_max_retries=1
    )
    scripted_llm.script(
        Reply.delay(1.0, Reply.text("slow")), Reply.delay(1.0, Reply.text("slow again"))
    )
    with pytest.raises(LLMTimeout, match="HINDSIGHT_API_LLM_TIMEOUT") as excinfo:
        get_llm().chat(USER)
    assert excinfo.value.attempts == 2
    assert len(scripted_llm.requests) == 2


# -- records, configuration ------------------------------------------------------------------


def test_every_call_is_recorded_for_traces(scripted_llm) -> None:
    hooked = []
    scripted_llm.script(
        Reply.tool_calls(
            [("recall", {"query": "q"})], usage={"prompt_tokens": 5, "completion_tokens": 1}
        ),
        Reply.json({"answer": "a", "confidence": 1}),
        Reply.error(400, "nope"),
    )
    llm = get_llm(on_call=hooked.append)
    with collect_llm_calls() as records:
        llm.chat(USER, tools=TOOLS, purpose="reflect")
        llm.structured(USER, schema=SCHEMA, name="answer", purpose="structured_output")
        with pytest.raises(LLMProviderError):
            llm.chat(USER, purpose="delta")
    scripted_llm.script(Reply.text("outside"))
    llm.chat(USER, purpose="after")  # outside the block: hooked, not collected
    assert len(records) == 3 and len(hooked) == 4
    hooked.pop()
    assert [r.purpose for r in records] == ["reflect", "structured_output", "delta"]
    assert records == hooked
    first = records[0].as_dict()
    assert first["tool_calls"] == ["recall"]
    assert first["usage"]["input_tokens"] == 5
    assert first["model"] == "scripted" and first["error"] is None
    assert first["scope"] == "reflect" and first["duration_ms"] >= 0
    assert records[1].kind == "structured"
    assert records[2].error is not None and "nope" in records[2].error


def test_get_llm_without_a_provider_raises_llm_not_configured(settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")
    with pytest.raises(LLMNotConfigured) as excinfo:
        get_llm(what="refreshing a mental model")
    assert excinfo.value.status_code == 400
    assert "HINDSIGHT_API_LLM_PROVIDER" in excinfo.value.detail
    assert "refreshing a mental model" in excinfo.value.detail


def test_config_is_read_at_call_time(scripted_llm, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_model="other-model")
    scripted_llm.script(Reply.text("ok"))
    get_llm().chat(USER)
    assert scripted_llm.requests[0]["model"] == "other-model"


def test_a_refused_max_tokens_value_is_not_retried_forever(scripted_llm) -> None:
    scripted_llm.respond_with(lambda body: Reply.error(400, "max_tokens is too large: 999999"))
    with pytest.raises(LLMProviderError, match="too large"):
        get_llm().chat(USER, max_tokens=999999)
    assert len(scripted_llm.requests) == 1
