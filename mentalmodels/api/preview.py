"""The dry run's wire shape (``POST …/mental-models/{id}/dry-run-refresh``): the result
serializer declares it (for the OpenAPI document) and renders it from the run's ``Preview``
(``render``), building the dict directly in the declared order; the scope, window and fact
counts are nested serializers that render their part the same way. A test holds the rendered
keys to the declared fields.

The ``trace`` is the refresh's own record (``mentalmodels.trace.build_trace``, the same one a
real refresh keeps on the model); ``MentalModelRefreshTraceSerializer`` documents it, and a test
holds what ``build_trace`` records to the declared fields, in order.

Enum values (refresh modes, fallback reasons, outcomes) are upstream's; a test compares them
with the upstream document.
"""

from __future__ import annotations

import difflib
from typing import Any

from rest_framework import serializers

from hindsight.banks.schema import TokenUsageSerializer
from hindsight.tagscope import TAGS_MATCH_MODES
from mentalmodels.api.operation_details import REFRESH_OUTCOMES
from mentalmodels.api.serializers import REFRESH_MODES, TagGroupsField
from mentalmodels.refresh_types import ModeFallbackReason, Outcome, Plan, Preview, RefreshMode
from mentalmodels.trace import iso_z

MODE_FALLBACK_REASONS = tuple(r.value for r in ModeFallbackReason)
# A dry run never reaches the failure outcomes of a persisted refresh (structured output, error).
DRY_RUN_OUTCOMES = REFRESH_OUTCOMES[:5]


def preview_diff(preview: Preview) -> str:
    """The unified diff from the current document to the one the refresh would write."""
    return "".join(
        difflib.unified_diff(
            preview.current_content.splitlines(keepends=True),
            preview.outcome.content.splitlines(keepends=True),
            fromfile="current",
            tofile="preview",
        )
    )


class MentalModelRefreshScopeSerializer(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField(), allow_null=True)
    tags_match = serializers.ChoiceField(choices=TAGS_MATCH_MODES)
    tag_groups = TagGroupsField()
    fact_types = serializers.ListField(child=serializers.CharField(), allow_null=True)
    exclude_mental_models = serializers.BooleanField()
    exclude_mental_model_ids = serializers.ListField(child=serializers.CharField())

    @staticmethod
    def render(plan: Plan) -> dict[str, Any]:
        scope = plan.scope
        return {
            "tags": list(scope.tags) if scope.tags else None,
            "tags_match": scope.tags_match,
            "tag_groups": scope.tag_groups_json(),
            "fact_types": list(scope.fact_types) if scope.fact_types else None,
            "exclude_mental_models": plan.exclude_mental_models,
            "exclude_mental_model_ids": plan.exclude_ids,
        }


class MentalModelRefreshWindowSerializer(serializers.Serializer):
    created_after = serializers.DateTimeField(allow_null=True)
    created_before = serializers.DateTimeField()
    watermark = serializers.DateTimeField(allow_null=True)

    @staticmethod
    def render(plan: Plan, decided: Outcome) -> dict[str, Any]:
        return {
            "created_after": iso_z(plan.window_after),
            "created_before": iso_z(plan.cutoff),
            "watermark": iso_z(decided.watermark),
        }


class MentalModelFactCountsSerializer(serializers.Serializer):
    retrieved = serializers.DictField(child=serializers.IntegerField())
    used = serializers.DictField(child=serializers.IntegerField())

    @staticmethod
    def render(decided: Outcome) -> dict[str, Any]:
        return {"retrieved": decided.facts_retrieved, "used": decided.facts_used}


class MentalModelTraceToolCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    input = serializers.DictField()
    updated_at = serializers.DateTimeField(allow_null=True)
    result_count = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField()
    iteration = serializers.IntegerField()
    # The dry run's trace only (a stored trace keeps no tool outputs).
    output = serializers.JSONField(allow_null=True, required=False)


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

    @staticmethod
    def render(preview: Preview) -> dict[str, Any]:
        """The declared fields, in their order."""
        plan, decided, model = preview.plan, preview.outcome, preview.model
        based_on = {k: v for k, v in decided.based_on.items() if v} if decided.reflected else {}
        return {
            "mental_model_id": model.mental_model_id,
            "name": model.name,
            "requested_mode": plan.requested_mode,
            "effective_mode": plan.effective_mode,
            "mode_fallback_reason": plan.mode_fallback_reason,
            "outcome": decided.outcome,
            "would_persist": preview.would_persist,
            "scope": MentalModelRefreshScopeSerializer.render(plan),
            "window": MentalModelRefreshWindowSerializer.render(plan, decided),
            "facts": MentalModelFactCountsSerializer.render(decided),
            "based_on": based_on,
            "current_content": preview.current_content,
            "candidate_content": decided.candidate,
            "preview_content": decided.content,
            "diff": preview_diff(preview),
            # Null in full mode; a delta run that asked for no operations applied none.
            "delta_operations": (
                (decided.delta_operations or {"applied": [], "skipped": []})
                if plan.effective_mode == RefreshMode.DELTA else None
            ),
            "retraction": None,
            "trace": preview.trace,
            "usage": preview.usage,
            "duration_ms": preview.duration_ms,
            "warnings": preview.warnings,
        }
