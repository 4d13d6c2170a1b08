"""OpenAPI documentation of the reflect endpoint: upstream's ``ReflectResponse`` and its parts.

Schema-only: ``mentalmodels.reflect.serializers`` validates the request and renders the answer;
these serializers describe the answer, and the extensions give the request's nested include
serializers upstream's component names (the recall request has an ``include`` too).
Importing this module registers the extensions (the view imports it).
"""

from __future__ import annotations

from typing import ClassVar

from rest_framework import serializers

from hindsight.api.schema import ClosedObjectExtension
from hindsight.banks.schema import TokenUsageSerializer


class ReflectStrictSerializerExtension(ClosedObjectExtension):
    target_class = "mentalmodels.reflect.serializers.ReflectStrictSerializer"
    priority = 1  # over ClosedObjectExtension, which matches these serializers too
    component_names: ClassVar[dict[str, str]] = {
        "mentalmodels.reflect.serializers.IncludeSerializer": "ReflectIncludeOptions",
        "mentalmodels.reflect.serializers.FactsIncludeSerializer": "FactsIncludeOptions",
        "mentalmodels.reflect.serializers.ToolCallsIncludeSerializer": "ToolCallsIncludeOptions",
    }


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


class ReflectMentalModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    context = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # a wire field named like Field.context


class ReflectBasedOnSerializer(serializers.Serializer):
    memories = ReflectFactSerializer(many=True)
    mental_models = ReflectMentalModelSerializer(many=True)
    directives = serializers.ListField(child=serializers.DictField())


class ReflectToolCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    input = serializers.DictField()
    output = serializers.JSONField(allow_null=True)
    duration_ms = serializers.IntegerField()
    iteration = serializers.IntegerField()


class ReflectLLMCallSerializer(serializers.Serializer):
    scope = serializers.CharField()
    duration_ms = serializers.IntegerField()


class ReflectTraceSerializer(serializers.Serializer):
    tool_calls = ReflectToolCallSerializer(many=True)
    llm_calls = ReflectLLMCallSerializer(many=True)


class ReflectResponseSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    based_on = ReflectBasedOnSerializer(allow_null=True,
                                        help_text="Present when include.facts was sent")
    structured_output = serializers.DictField(allow_null=True)
    structured_output_error = serializers.CharField(required=False)
    usage = TokenUsageSerializer(allow_null=True)
    trace = ReflectTraceSerializer(allow_null=True,
                                   help_text="Present when include.tool_calls was sent")
