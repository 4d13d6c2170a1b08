"""OpenAPI documentation of the mental-models API: request and response shapes, query parameters.

Schema-only: ``mentalmodels.api.serializers`` parses and renders (by hand, strictly); these
serializers describe the same wire format in upstream 1.1.0's component names so the document and
the generated clients know the bodies. Enum values (detail levels, refresh modes, outcomes) are
upstream's; a test compares them with the upstream document.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hindsight.api.schema import ClosedSerializer
from hindsight.banks.schema import (
    TokenUsageSerializer,
    query_bool,
    query_enum,
    query_int,
    query_tags,
)
from hindsight.tagscope import TAGS_MATCH_MODES
from mentalmodels.api.operation_details import REFRESH_OUTCOMES
from mentalmodels.api.serializers import DETAILS, LIST_LIMIT_MAX, MAX_TOKENS_RANGE, OFFSET_MAX
from mentalmodels.models import HISTORY_KINDS
from mentalmodels.refresh_types import ModeFallbackReason, RefreshMode
from mentalmodels.selectors import LIST_TAGS_MATCH
from mentalmodels.triggers import BUDGETS, FACT_TYPES

REFRESH_MODES = tuple(m.value for m in RefreshMode)
MODE_FALLBACK_REASONS = tuple(r.value for r in ModeFallbackReason)
# A dry run never reaches the failure outcomes of a persisted refresh (structured output, error).
DRY_RUN_OUTCOMES = REFRESH_OUTCOMES[:5]


@extend_schema_field({
    "type": "array",
    "nullable": True,
    "items": {
        "type": "object",
        "additionalProperties": True,
        "description": "A tag-group node: a leaf {tags, match} or one of {and: [...]}, "
                       "{or: [...]}, {not: {...}}.",
    },
})
class TagGroupsField(serializers.JSONField):
    pass


@extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True,
                      "description": "A JSON Schema whose instances are objects"})
class ResponseSchemaField(serializers.JSONField):
    pass


class MentalModelTriggerSerializer(ClosedSerializer):
    budget = serializers.ChoiceField(choices=BUDGETS, allow_null=True, required=False)
    mode = serializers.ChoiceField(choices=REFRESH_MODES, required=False, default="full")
    refresh_after_consolidation = serializers.BooleanField(required=False, default=False)
    refresh_cron = serializers.CharField(allow_null=True, required=False,
                                         help_text="5-field UTC cron expression")
    full_refresh_cron = serializers.CharField(allow_null=True, required=False)
    min_refresh_interval_seconds = serializers.IntegerField(min_value=0, allow_null=True,
                                                            required=False)
    fact_types = serializers.ListField(
        child=serializers.ChoiceField(choices=FACT_TYPES), allow_null=True, required=False
    )
    exclude_mental_models = serializers.BooleanField(required=False, default=False)
    exclude_mental_model_ids = serializers.ListField(child=serializers.CharField(),
                                                     allow_null=True, required=False)
    tags_match = serializers.ChoiceField(choices=TAGS_MATCH_MODES, allow_null=True,
                                         required=False)
    tag_groups = TagGroupsField(required=False)
    include_chunks = serializers.BooleanField(allow_null=True, required=False)
    recall_max_tokens = serializers.IntegerField(allow_null=True, required=False)
    recall_chunks_max_tokens = serializers.IntegerField(allow_null=True, required=False)
    reflect_search_observations_max_tokens = serializers.IntegerField(
        min_value=1, allow_null=True, required=False
    )
    reflect_search_observations_include_entities = serializers.BooleanField(
        allow_null=True, required=False
    )
    response_schema = ResponseSchemaField(required=False)
    keep_trace = serializers.BooleanField(required=False, default=False)


_LOW, _HIGH = MAX_TOKENS_RANGE


class CreateMentalModelRequestSerializer(ClosedSerializer):
    id = serializers.CharField(allow_null=True, required=False,
                               help_text="Optional id; generated when absent")
    name = serializers.CharField()
    source_query = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    max_tokens = serializers.IntegerField(min_value=_LOW, max_value=_HIGH, default=2048,
                                          required=False)
    trigger = MentalModelTriggerSerializer(required=False)


class UpdateMentalModelRequestSerializer(ClosedSerializer):
    name = serializers.CharField(allow_null=True, required=False)
    source_query = serializers.CharField(allow_null=True, required=False)
    max_tokens = serializers.IntegerField(min_value=_LOW, max_value=_HIGH, allow_null=True,
                                          required=False)
    tags = serializers.ListField(child=serializers.CharField(), allow_null=True, required=False)
    trigger = MentalModelTriggerSerializer(allow_null=True, required=False,
                                           help_text="Keys sent replace the stored ones; null "
                                                     "resets a key to its default")


class RefreshMentalModelRequestSerializer(ClosedSerializer):
    mode = serializers.ChoiceField(choices=("full",), allow_null=True, required=False,
                                   help_text="'full' forces a full rewrite; null keeps the "
                                             "trigger's mode")


class MentalModelResponseSerializer(serializers.Serializer):
    id = serializers.CharField()
    bank_id = serializers.CharField()
    name = serializers.CharField()
    source_query = serializers.CharField(allow_null=True)
    content = serializers.CharField(allow_null=True, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())
    max_tokens = serializers.IntegerField(allow_null=True)
    trigger = MentalModelTriggerSerializer(allow_null=True)
    last_refreshed_at = serializers.DateTimeField(allow_null=True)
    last_memory_seen_at = serializers.DateTimeField(allow_null=True)
    last_refresh_failed_at = serializers.DateTimeField(allow_null=True)
    last_full_refreshed_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    is_knowledge_page = serializers.BooleanField(allow_null=True)
    reflect_response = serializers.DictField(allow_null=True)
    is_stale = serializers.BooleanField(allow_null=True)


class MentalModelListResponseSerializer(serializers.Serializer):
    items = MentalModelResponseSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


class CreateMentalModelResponseSerializer(serializers.Serializer):
    mental_model_id = serializers.CharField()
    operation_id = serializers.UUIDField()


class AsyncOperationSubmitResponseSerializer(serializers.Serializer):
    operation_id = serializers.UUIDField()
    status = serializers.CharField()


class MentalModelDeleteResponseSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=("deleted",))


class MentalModelHistoryEntrySerializer(serializers.Serializer):
    """One history entry, newest first: a content ``version`` or a refresh ``failure``."""

    kind = serializers.ChoiceField(choices=HISTORY_KINDS)
    changed_at = serializers.DateTimeField()
    previous_content = serializers.CharField(allow_null=True, allow_blank=True)
    previous_reflect_response = serializers.DictField(
        allow_null=True, required=False, help_text="Versions only"
    )
    reason = serializers.CharField(allow_null=True, required=False, help_text="Failures only")
    exception = serializers.CharField(allow_null=True, required=False, help_text="Failures only")
    operation_id = serializers.UUIDField(allow_null=True, required=False,
                                         help_text="Failures only")


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
