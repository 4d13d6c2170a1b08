"""OpenAPI documentation of the mental-models API: the dry run's result, the query parameters.

The request and response bodies of the mental models themselves are documented by the
serializers that parse and render them (``mentalmodels.api.serializers``). What is left here is
schema-only: the dry run's result (rendered by ``mentalmodels.api.preview``) and the query
parameters (parsed by the query serializers, declared here as upstream names them). Enum values
(detail levels, refresh modes, outcomes) are upstream's; a test compares them with the upstream
document.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.banks.schema import (
    TokenUsageSerializer,
    query_bool,
    query_enum,
    query_int,
    query_tags,
)
from hindsight.tagscope import TAGS_MATCH_MODES
from mentalmodels.api.operation_details import REFRESH_OUTCOMES
from mentalmodels.api.serializers import (
    DETAILS,
    LIST_LIMIT_MAX,
    OFFSET_MAX,
    REFRESH_MODES,
    TagGroupsField,
)
from mentalmodels.refresh_types import ModeFallbackReason
from mentalmodels.selectors import LIST_TAGS_MATCH

MODE_FALLBACK_REASONS = tuple(r.value for r in ModeFallbackReason)
# A dry run never reaches the failure outcomes of a persisted refresh (structured output, error).
DRY_RUN_OUTCOMES = REFRESH_OUTCOMES[:5]


class MentalModelRefreshScopeSerializer(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField(), allow_null=True)
    tags_match = serializers.ChoiceField(choices=TAGS_MATCH_MODES)
    tag_groups = TagGroupsField()
    fact_types = serializers.ListField(child=serializers.CharField(), allow_null=True)
    exclude_mental_models = serializers.BooleanField()
    exclude_mental_model_ids = serializers.ListField(child=serializers.CharField())


class MentalModelRefreshWindowSerializer(serializers.Serializer):
    created_after = serializers.DateTimeField(allow_null=True)
    created_before = serializers.DateTimeField()
    watermark = serializers.DateTimeField(allow_null=True)


class MentalModelFactCountsSerializer(serializers.Serializer):
    retrieved = serializers.DictField(child=serializers.IntegerField())
    used = serializers.DictField(child=serializers.IntegerField())


class MentalModelTraceToolCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    input = serializers.DictField()
    output = serializers.JSONField(allow_null=True, required=False)
    updated_at = serializers.DateTimeField(allow_null=True)
    result_count = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField()
    iteration = serializers.IntegerField()


class LLMCallTraceSerializer(serializers.Serializer):
    scope = serializers.CharField()
    duration_ms = serializers.IntegerField()


class MentalModelRefreshTraceSerializer(serializers.Serializer):
    recorded_at = serializers.DateTimeField(allow_null=True)
    effective_mode = serializers.ChoiceField(choices=REFRESH_MODES)
    mode_fallback_reason = serializers.ChoiceField(choices=MODE_FALLBACK_REASONS, allow_null=True)
    outcome = serializers.ChoiceField(choices=DRY_RUN_OUTCOMES)
    tool_calls = MentalModelTraceToolCallSerializer(many=True)
    llm_calls = LLMCallTraceSerializer(many=True)
    delta_operations = serializers.DictField(allow_null=True)
    retraction = serializers.DictField(allow_null=True)
    usage = TokenUsageSerializer(allow_null=True)
    duration_ms = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class MentalModelDryRunRefreshResultSerializer(serializers.Serializer):
    mental_model_id = serializers.CharField()
    name = serializers.CharField()
    requested_mode = serializers.ChoiceField(choices=REFRESH_MODES)
    effective_mode = serializers.ChoiceField(choices=REFRESH_MODES)
    mode_fallback_reason = serializers.ChoiceField(choices=MODE_FALLBACK_REASONS, allow_null=True)
    outcome = serializers.ChoiceField(choices=DRY_RUN_OUTCOMES)
    would_persist = serializers.BooleanField()
    scope = MentalModelRefreshScopeSerializer()
    window = MentalModelRefreshWindowSerializer()
    facts = MentalModelFactCountsSerializer()
    based_on = serializers.DictField()
    current_content = serializers.CharField(allow_blank=True)
    candidate_content = serializers.CharField(allow_blank=True)
    preview_content = serializers.CharField(allow_blank=True)
    diff = serializers.CharField(allow_blank=True)
    delta_operations = serializers.DictField(allow_null=True)
    retraction = serializers.DictField(allow_null=True)
    trace = MentalModelRefreshTraceSerializer()
    usage = TokenUsageSerializer()
    duration_ms = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


_DETAIL_HELP = ("'metadata' (names, tags, staleness), 'content' (adds content and config), "
                "'full' (adds reflect_response)")


def detail_param(default: str) -> Any:
    return query_enum("detail", DETAILS, default=default, description=_DETAIL_HELP)


LIST_PARAMS = [
    query_tags(),
    query_enum("tags_match", LIST_TAGS_MATCH, default="any", description="How to match tags"),
    detail_param("metadata"),
    query_int("limit", 100, minimum=1, maximum=LIST_LIMIT_MAX),
    query_int("offset", 0, maximum=OFFSET_MAX),
    query_bool("exclude_knowledge_pages",
               "Accepted for upstream's clients; this service has no knowledge pages"),
]
GET_PARAMS = [detail_param("full")]
