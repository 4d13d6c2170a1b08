"""The reflect endpoint's request: upstream's ReflectRequest (``mentalmodels.reflect.schema``
renders the ReflectResponse).

Every field upstream 1.1.0 accepts is accepted (the official client sends several of them as
``null``); a field it does not know is a 422 naming it (SPEC 0, deliberate difference).
Accepted but without effect here: ``apply_all_directives`` (this service has no directives) and
``reflect_search_observations_include_entities`` (observations carry no entity list).
``context`` is appended to the query, as upstream does with the deprecated field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers

from hindsight.api.serializers import StrictSerializer
from hindsight.errors import FieldErrors
from hindsight.tagscope import TagScope
from mentalmodels.triggers import response_schema_problems


# hindsight.api's strict serializer in reflect's wording (its answers, kept byte for byte): the
# unknown keys sorted, each naming the accepted ones in declaration order.
class ReflectStrictSerializer(StrictSerializer):
    unknown_field_code: ClassVar[str] = "invalid"

    def unknown_fields(self, data: Mapping[str, Any]) -> list[str]:
        return sorted(set(data) - set(self.fields))

    def unknown_field_message(self, key: str) -> str:
        return f"unknown field '{key}'; accepted: {', '.join(self.fields)}"


class FactsIncludeSerializer(ReflectStrictSerializer):
    pass


class ToolCallsIncludeSerializer(ReflectStrictSerializer):
    output = serializers.BooleanField(required=False, default=True)


class IncludeSerializer(ReflectStrictSerializer):
    facts = FactsIncludeSerializer(required=False, allow_null=True, default=None)
    tool_calls = ToolCallsIncludeSerializer(required=False, allow_null=True, default=None)


def validate_response_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The one MM-4 rule a mental model's ``trigger.response_schema`` follows too (an object
    schema with typed properties, ``required`` naming them, nesting bounded so no check
    recurses past Python's limit); a problem is a 422 naming where it is."""
    problems = response_schema_problems(schema, ("body", "response_schema"))
    if problems:
        raise FieldErrors(problems)
    return schema


class StrictCharField(serializers.CharField):
    """A string, not anything that can be turned into one (``5`` is a type error, as upstream)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Input should be a valid string", code="string_type")
        return super().to_internal_value(data)


class ReflectRequestSerializer(ReflectStrictSerializer):
    query = StrictCharField(trim_whitespace=False)
    budget = serializers.ChoiceField(choices=("low", "mid", "high"), default="low")
    context = StrictCharField(  # type: ignore[assignment]  # a wire field named like Field.context
        required=False, allow_null=True, allow_blank=True, default=None, trim_whitespace=False
    )
    max_tokens = serializers.IntegerField(required=False, allow_null=True, default=4096,
                                          min_value=1, max_value=65536)
    include = IncludeSerializer(required=False, allow_null=True, default=None)
    response_schema = serializers.DictField(required=False, allow_null=True, default=None)
    # Checked by the one tag-scope compiler (``TagScope.parse``) in ``validate``.
    tags = serializers.JSONField(required=False, allow_null=True, default=None)
    tags_match = serializers.JSONField(required=False, allow_null=True, default=None)
    tag_groups = serializers.JSONField(required=False, allow_null=True, default=None)
    apply_all_directives = serializers.BooleanField(required=False, allow_null=True, default=False)
    fact_types = serializers.JSONField(required=False, allow_null=True, default=None)
    exclude_mental_models = serializers.BooleanField(required=False, allow_null=True, default=False)
    exclude_mental_model_ids = serializers.ListField(child=StrictCharField(), required=False,
                                                     allow_null=True, default=None)
    reflect_search_observations_max_tokens = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=100000
    )
    reflect_search_observations_include_entities = serializers.BooleanField(
        required=False, allow_null=True, default=None
    )

    def validate_query(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("query must not be blank")
        return value

    def validate_response_schema(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else validate_response_schema(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tags") and attrs.get("tag_groups"):
            raise serializers.ValidationError(
                {"tag_groups": ["tags and tag_groups are mutually exclusive; send one of them"]}
            )
        # Raises FieldError (422, naming the field and the rule) on a malformed scope.
        attrs["scope"] = TagScope.parse(
            tags=attrs.get("tags"),
            tags_match=attrs.get("tags_match"),
            tag_groups=attrs.get("tag_groups"),
            fact_types=attrs.get("fact_types"),
        )
        if attrs.get("max_tokens") is None:
            attrs["max_tokens"] = 4096
        return attrs

