"""The reflect endpoint's answer: upstream's ``ReflectResponse`` and its parts.

Each response serializer is ``Rendered`` (``hindsight.infra.edge.serializers``): its declared fields are
its OpenAPI shape and its renderer; ``tests/mentalmodels/reflect/test_response_shapes.py``
checks every ``include`` variant.
``mentalmodels.reflect.serializers`` validates the request.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.banks.retaintypes import Usage
from hindsight.banks.schema import TokenUsageSerializer
from hindsight.infra.edge.serializers import OMIT, Rendered, computed
from hindsight.infra.vocabulary import BASED_ON_FACT_TYPES
from mentalmodels.reflect.result import ReflectResult


def _get(key: str) -> Any:
    return lambda entry: entry.get(key)


class ReflectFactSerializer(Rendered):
    """One cited memory of ``ReflectResult.based_on``."""

    id = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    type = computed(serializers.CharField(allow_null=True), _get("type"))
    context = computed(serializers.CharField(allow_null=True), _get("context"))  # type: ignore[assignment]  # a wire field named like Field.context
    occurred_start = computed(serializers.DateTimeField(allow_null=True), _get("occurred_start"))
    occurred_end = computed(serializers.DateTimeField(allow_null=True), _get("occurred_end"))
    mentioned_at = computed(serializers.DateTimeField(allow_null=True), _get("mentioned_at"))
    document_id = computed(serializers.CharField(allow_null=True), _get("document_id"))
    tags = computed(serializers.ListField(child=serializers.CharField()),
                    lambda entry: entry.get("tags") or [])


class ReflectMentalModelSerializer(Rendered):
    """One cited mental model; its ``context`` is the model's name."""

    id = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    context = computed(serializers.CharField(allow_null=True), _get("name"))  # type: ignore[assignment]  # a wire field named like Field.context


class ReflectDirectiveSerializer(Rendered):
    """One directive the prompt carried."""

    id = serializers.CharField()
    name = serializers.CharField()
    content = serializers.CharField()


class ReflectBasedOnSerializer(Rendered):
    """``ReflectResult.based_on``: the memory buckets in ``BASED_ON_FACT_TYPES`` order."""

    memories = computed(ReflectFactSerializer(many=True), lambda based_on: [
        entry for key in BASED_ON_FACT_TYPES for entry in based_on.get(key, [])])
    mental_models = computed(ReflectMentalModelSerializer(many=True),
                             lambda based_on: based_on.get("mental-models", []))
    directives = computed(ReflectDirectiveSerializer(many=True),
                          lambda based_on: list(based_on.get("directives", [])))


class ReflectToolCallSerializer(Rendered):
    """One ``ReflectResult.tool_calls`` entry and the output it fed back (or None): a pair."""

    tool = computed(serializers.CharField(), lambda pair: pair[0]["name"])
    input = computed(serializers.DictField(), lambda pair: pair[0]["input"])
    duration_ms = computed(serializers.IntegerField(), lambda pair: pair[0]["duration_ms"])
    iteration = computed(serializers.IntegerField(), lambda pair: pair[0]["iteration"])
    output = computed(serializers.JSONField(allow_null=True), lambda pair: pair[1])


class ReflectLLMCallSerializer(Rendered):
    scope = serializers.CharField()
    duration_ms = serializers.IntegerField()


class ReflectTraceSerializer(Rendered):
    """The run's calls, with the tool outputs (``render_without_outputs``: none)."""

    tool_calls = computed(ReflectToolCallSerializer(many=True), lambda result: list(
        zip(result.tool_calls, result.tool_outputs, strict=False)))
    llm_calls = ReflectLLMCallSerializer(many=True)

    @classmethod
    def render_without_outputs(cls, result: ReflectResult) -> dict[str, Any]:
        calls = [(call, None) for call, _ in zip(result.tool_calls, result.tool_outputs,
                                                 strict=False)]
        return cls.render(result, tool_calls=ReflectToolCallSerializer.render_many(calls))


class ReflectResponseSerializer(Rendered):
    """``text`` always; ``based_on``/``trace`` when asked (else null); ``structured_output``
    when a response schema was sent, with ``structured_output_error`` when it failed; usage
    summed over the run's LLM calls."""

    text = serializers.CharField(allow_blank=True)
    based_on = ReflectBasedOnSerializer(allow_null=True,
                                        help_text="Present when include.facts was sent")
    structured_output = serializers.DictField(allow_null=True)
    structured_output_error = computed(serializers.CharField(required=False),
                                       lambda result: result.structured_output_error or OMIT)
    usage = computed(TokenUsageSerializer(allow_null=True), lambda result: Usage(**result.usage))
    trace = ReflectTraceSerializer(allow_null=True, source="*",
                                   help_text="Present when include.tool_calls was sent")

    @classmethod
    def render_result(
        cls,
        result: ReflectResult,
        *,
        include_facts: bool,
        include_tool_calls: bool,
        include_tool_output: bool,
        schema_requested: bool,
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if not include_facts:
            values["based_on"] = None
        if not schema_requested:
            values.update(structured_output=None, structured_output_error=OMIT)
        if not include_tool_calls:
            values["trace"] = None
        elif not include_tool_output:
            values["trace"] = ReflectTraceSerializer.render_without_outputs(result)
        return cls.render(result, **values)
