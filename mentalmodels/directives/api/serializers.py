"""The directives API's wire format (upstream 1.1.0's ``CreateDirectiveRequest``,
``UpdateDirectiveRequest``, ``DirectiveResponse``, ``DirectiveListResponse``), in the edge idiom
(``hindsight.infra.edge.serializers``).

Deliberate differences from upstream: a blank ``name`` or ``content`` is a 422 (a rule with no
words, or none to be known by, is a mistake); ``priority`` is a 32-bit integer (the column's
range: upstream answers a larger one with a 500).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    Body,
    Boolean,
    Integer,
    Query,
    Rendered,
    Text,
    computed,
    limit_field,
    offset_field,
    page_fields,
    tags_field,
    tags_match_field,
)
from hindsight.infra.vocabulary import LIST_TAGS_MATCH_MODES

INT32 = (-(2**31), 2**31 - 1)


def _priority(**kwargs: Any) -> Integer:
    return Integer(min_value=INT32[0], max_value=INT32[1], **kwargs)


class CreateDirectiveRequestSerializer(Body):
    component_name = "CreateDirectiveRequest"

    name = Text(help_text="Human-readable name for the directive")
    content = Text(help_text="The directive text to inject into prompts")
    priority = _priority(required=False, default=0,
                         help_text="Higher priority directives are injected first")
    is_active = Boolean(required=False, default=True, null_as_absent=True,
                        help_text="Whether this directive is active")
    tags = tags_field(allow_null=True, default=None,
                      help_text="Directive execution scope. Empty means global; non-empty "
                                "requires a matching reflect scope.")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": data["name"], "content": data["content"],
                "priority": data["priority"] if data["priority"] is not None else 0,
                "is_active": data["is_active"], "tags": data["tags"] or []}


class UpdateDirectiveRequestSerializer(Body):
    """Each field sent replaces the stored one; null or left out leaves it."""

    component_name = "UpdateDirectiveRequest"
    when_absent: ClassVar[Mapping[str, Any]] = {}

    name = Text(allow_null=True, required=False, help_text="New name")
    content = Text(allow_null=True, required=False, help_text="New content")
    priority = _priority(allow_null=True, required=False, help_text="New priority")
    is_active = Boolean(allow_null=True, required=False, help_text="New active status")
    tags = tags_field(allow_null=True, help_text="New tags ([] makes it global)")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        return {key: data.get(key) for key in ("name", "content", "priority", "is_active",
                                                "tags")}


class DirectiveListQuerySerializer(Query):
    tags = tags_field(help_text="Filter directives by execution scope. Omit to list all "
                                "directives.")
    tags_match = tags_match_field(LIST_TAGS_MATCH_MODES, default="any",
                                  help_text="How tagged directives match the requested scope. "
                                            "Untagged/global directives are included.")
    active_only = Boolean(required=False, default=True, help_text="Only return active directives")
    limit = limit_field(100, 1000)
    offset = offset_field()


class DirectiveResponseSerializer(Rendered):
    id = computed(serializers.CharField(), lambda d: str(d.id))
    bank_id = serializers.CharField()
    name = serializers.CharField()
    content = serializers.CharField()
    priority = serializers.IntegerField()
    is_active = serializers.BooleanField()
    tags = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class DirectiveListResponseSerializer(Rendered):
    items = DirectiveResponseSerializer(many=True)
    total, limit, offset = page_fields()
