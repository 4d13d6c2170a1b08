"""The reflect response serializers are the one owner of the answer's shape: what ``render``
builds is what they declare (and so what the OpenAPI document says), key for key and in order,
for every ``include`` variant and with or without a response schema."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mentalmodels.reflect import schema
from mentalmodels.reflect.result import ReflectResult, empty_based_on


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


def _result(*, structured_output_error: str | None = None) -> ReflectResult:
    based_on = empty_based_on()
    based_on["world"] = [{"id": "f1", "text": "Alice prefers async.", "type": "world"}]
    based_on["observation"] = [{"id": "o1", "text": "The team is async.", "tags": ["t"]}]
    based_on["mental-models"] = [{"id": "m1", "text": "Async.", "name": "Comms"}]
    return ReflectResult(
        text="Async.",
        based_on=based_on,
        structured_output=None if structured_output_error else {"channel": "Slack"},
        structured_output_error=structured_output_error,
        usage={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        llm_calls=[{"scope": "agent_1", "duration_ms": 5, "input_tokens": 1, "output_tokens": 2}],
        tool_calls=[{"name": "recall", "input": {"query": "q"}, "result_count": 1,
                     "duration_ms": 4, "iteration": 1}],
        tool_outputs=[{"facts": []}],
    )


def _wire_order(*, error: bool) -> list[str]:
    # ``structured_output_error`` is sent only when a requested structured output failed.
    declared = _declared(schema.ReflectResponseSerializer)
    if not error:
        declared.remove("structured_output_error")
    return declared


VARIANTS = list(itertools.product([False, True], repeat=4))


@pytest.mark.parametrize(("facts", "tool_calls", "tool_output", "schema_requested"), VARIANTS)
@pytest.mark.parametrize("failed", [False, True])
def test_a_reflect_answer_has_the_declared_fields_in_order(
    facts: bool, tool_calls: bool, tool_output: bool, schema_requested: bool, failed: bool
) -> None:
    result = _result(structured_output_error="boom" if failed else None)
    body = schema.ReflectResponseSerializer.render_result(
        result, include_facts=facts, include_tool_calls=tool_calls,
        include_tool_output=tool_output, schema_requested=schema_requested,
    )

    assert list(body) == _wire_order(error=failed and schema_requested)
    assert list(body["usage"]) == _declared(schema.TokenUsageSerializer)
    assert (body["based_on"] is not None) is facts
    assert (body["trace"] is not None) is tool_calls
    if not schema_requested:
        assert body["structured_output"] is None
    if facts:
        based_on: Any = body["based_on"]
        assert list(based_on) == _declared(schema.ReflectBasedOnSerializer)
        assert [list(m) for m in based_on["memories"]] == \
            [_declared(schema.ReflectFactSerializer)] * 2
        assert [list(m) for m in based_on["mental_models"]] == \
            [_declared(schema.ReflectMentalModelSerializer)]
    if tool_calls:
        trace: Any = body["trace"]
        assert list(trace) == _declared(schema.ReflectTraceSerializer)
        assert [list(c) for c in trace["tool_calls"]] == \
            [_declared(schema.ReflectToolCallSerializer)]
        assert [list(c) for c in trace["llm_calls"]] == \
            [_declared(schema.ReflectLLMCallSerializer)]
        assert (trace["tool_calls"][0]["output"] is not None) is tool_output
