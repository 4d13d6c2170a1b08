"""The reflect endpoint's answer: upstream's ``ReflectResponse`` and its parts.

Each response serializer declares its shape (for the OpenAPI document) and renders it
(``render``), building the dict directly in the declared order, as the banks API's do
(``hindsight.banks.schema``); ``tests/mentalmodels/reflect/test_response_shapes.py`` holds the
rendered keys to the declared fields, for every ``include`` variant.
``mentalmodels.reflect.serializers`` validates the request.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.banks.retaintypes import Usage
from hindsight.banks.schema import TokenUsageSerializer
from mentalmodels.reflect.result import ReflectResult

# The based_on buckets that are memories, in the order ``based_on.memories`` lists them.
MEMORY_BUCKETS = ("world", "experience", "opinion", "observation")


class ReflectFactSerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    type = serializers.CharField(allow_null=True)
    context = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # a wire field named like Field.context
    occurred_start = serializers.DateTimeField(allow_null=True)
    occurred_end = serializers.DateTimeField(allow_null=True)
    mentioned_at = serializers.DateTimeField(allow_null=True)
    document_id = serializers.CharField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())

    @staticmethod
    def render(entry: dict[str, Any]) -> dict[str, Any]:
        """One cited memory of ``ReflectResult.based_on``."""
        return {
            "id": entry["id"],
            "text": entry["text"],
            "type": entry.get("type"),
            "context": entry.get("context"),
            "occurred_start": entry.get("occurred_start"),
            "occurred_end": entry.get("occurred_end"),
            "mentioned_at": entry.get("mentioned_at"),
            "document_id": entry.get("document_id"),
            "tags": entry.get("tags") or [],
        }


class ReflectMentalModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    context = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # a wire field named like Field.context

    @staticmethod
    def render(model: dict[str, Any]) -> dict[str, Any]:
        """One cited mental model; its ``context`` is the model's name."""
        return {"id": model["id"], "text": model["text"], "context": model.get("name")}


class ReflectBasedOnSerializer(serializers.Serializer):
    memories = ReflectFactSerializer(many=True)
    mental_models = ReflectMentalModelSerializer(many=True)
    directives = serializers.ListField(child=serializers.DictField())

    @staticmethod
    def render(based_on: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        fact, model = ReflectFactSerializer.render, ReflectMentalModelSerializer.render
        return {
            "memories": [fact(e) for key in MEMORY_BUCKETS for e in based_on.get(key, [])],
            "mental_models": [model(m) for m in based_on.get("mental-models", [])],
            "directives": list(based_on.get("directives", [])),
        }


class ReflectToolCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    input = serializers.DictField()
    duration_ms = serializers.IntegerField()
    iteration = serializers.IntegerField()
    output = serializers.JSONField(allow_null=True)

    @staticmethod
    def render(call: dict[str, Any], output: Any) -> dict[str, Any]:
        """One ``ReflectResult.tool_calls`` entry, with the output it fed back (or None)."""
        return {
            "tool": call["name"],
            "input": call["input"],
            "duration_ms": call["duration_ms"],
            "iteration": call["iteration"],
            "output": output,
        }


class ReflectLLMCallSerializer(serializers.Serializer):
    scope = serializers.CharField()
    duration_ms = serializers.IntegerField()

    @staticmethod
    def render(call: dict[str, Any]) -> dict[str, Any]:
        return {"scope": call["scope"], "duration_ms": call["duration_ms"]}


class ReflectTraceSerializer(serializers.Serializer):
    tool_calls = ReflectToolCallSerializer(many=True)
    llm_calls = ReflectLLMCallSerializer(many=True)

    @staticmethod
    def render(result: ReflectResult, *, include_output: bool) -> dict[str, Any]:
        tool_call, llm_call = ReflectToolCallSerializer.render, ReflectLLMCallSerializer.render
        return {
            "tool_calls": [
                tool_call(call, output if include_output else None)
                for call, output in zip(result.tool_calls, result.tool_outputs, strict=False)
            ],
            "llm_calls": [llm_call(c) for c in result.llm_calls],
        }


class ReflectResponseSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    based_on = ReflectBasedOnSerializer(allow_null=True,
                                        help_text="Present when include.facts was sent")
    structured_output = serializers.DictField(allow_null=True)
    structured_output_error = serializers.CharField(required=False)
    usage = TokenUsageSerializer(allow_null=True)
    trace = ReflectTraceSerializer(allow_null=True,
                                   help_text="Present when include.tool_calls was sent")

    @staticmethod
    def render(
        result: ReflectResult,
        *,
        include_facts: bool,
        include_tool_calls: bool,
        include_tool_output: bool,
        schema_requested: bool,
    ) -> dict[str, Any]:
        """``text`` always; ``based_on``/``trace`` when asked (else null); ``structured_output``
        when a response schema was sent, with ``structured_output_error`` when it failed; usage
        summed over the run's LLM calls."""
        body: dict[str, Any] = {
            "text": result.text,
            "based_on": ReflectBasedOnSerializer.render(result.based_on) if include_facts else None,
            "structured_output": result.structured_output if schema_requested else None,
        }
        if schema_requested and result.structured_output_error:
            body["structured_output_error"] = result.structured_output_error
        body["usage"] = TokenUsageSerializer.render(Usage(**result.usage))
        body["trace"] = (ReflectTraceSerializer.render(result, include_output=include_tool_output)
                         if include_tool_calls else None)
        return body
