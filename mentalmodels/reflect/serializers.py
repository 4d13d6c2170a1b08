"""The reflect endpoint's request: upstream's ReflectRequest, in the edge idiom of
``hindsight.infra.edge.serializers`` (``mentalmodels.reflect.schema`` renders the ReflectResponse).

Every field upstream 1.1.0 accepts is accepted (the official client sends several of them as
``null``); a field it does not know is a 422 naming it (SPEC 0, deliberate difference).
Accepted but without effect here: ``reflect_search_observations_include_entities``
(observations carry no entity list).
``context`` is appended to the query, as upstream does with the deprecated field.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    AnyJSON,
    Body,
    Boolean,
    Choice,
    Integer,
    JSONObject,
    List,
    Text,
    fact_types_field,
    tags_field,
    tags_match_field,
)
from hindsight.infra.errors import FieldErrors
from hindsight.infra.tagscope import TagScope
from hindsight.infra.vocabulary import BUDGETS
from mentalmodels.triggers import response_schema_problems

_OPT: dict[str, Any] = {"required": False, "allow_null": True, "default": None}


# The nested parts carry upstream's component names (the recall request has an include too).
class FactsIncludeSerializer(Body):
    component_name = "FactsIncludeOptions"


class ToolCallsIncludeSerializer(Body):
    component_name = "ToolCallsIncludeOptions"

    output = Boolean(required=False, default=True)


class IncludeSerializer(Body):
    component_name = "ReflectIncludeOptions"

    facts = FactsIncludeSerializer(**_OPT)
    tool_calls = ToolCallsIncludeSerializer(**_OPT)


def validate_response_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The one response-schema rule (docs/behaviour.md#response-schema) a mental model's
    ``trigger.response_schema`` follows too (an object schema with typed properties, ``required``
    naming them, nesting bounded so no check recurses past Python's limit); a problem is located
    inside the schema."""
    problems = response_schema_problems(schema, ())
    if problems:
        raise FieldErrors(problems)
    return schema


class ReflectRequestSerializer(Body):
    query = Text()
    budget = Choice(choices=BUDGETS, required=False, default="low")
    context = Text(allow_blank=True, **_OPT)  # type: ignore[assignment]  # a wire field named like Field.context
    max_tokens = Integer(min_value=1, max_value=65536, required=False, allow_null=True,
                         default=4096)
    include = IncludeSerializer(**_OPT)
    response_schema = JSONObject(**_OPT)
    # The scope's rules between fields are the one tag-scope compiler's (``TagScope.parse``).
    tags = tags_field(**_OPT)
    tags_match = tags_match_field(**_OPT)
    tag_groups = AnyJSON(**_OPT)
    apply_all_directives = Boolean(required=False, allow_null=True, default=False)
    fact_types = fact_types_field(**_OPT)
    exclude_mental_models = Boolean(required=False, allow_null=True, default=False)
    exclude_mental_model_ids = List(child=Text(), **_OPT)
    reflect_search_observations_max_tokens = Integer(min_value=1, max_value=100000, **_OPT)
    reflect_search_observations_include_entities = Boolean(**_OPT)

    def validate_response_schema(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else validate_response_schema(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tags") and attrs.get("tag_groups"):
            raise serializers.ValidationError(
                {"tag_groups": ["tags and tag_groups are mutually exclusive; send one of them"]}
            )
        attrs["scope"] = TagScope.parse(
            tags=attrs.get("tags"),
            tags_match=attrs.get("tags_match"),
            tag_groups=attrs.get("tag_groups"),
            fact_types=attrs.get("fact_types"),
            loc=(),
        )
        if attrs.get("max_tokens") is None:
            attrs["max_tokens"] = 4096
        return attrs
