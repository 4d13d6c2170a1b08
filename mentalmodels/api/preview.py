"""The dry run's wire shape (``POST …/mental-models/{id}/dry-run-refresh``): the result
serializer is ``Rendered`` (``hindsight.infra.edge.serializers``): its declared fields document it and
render it from the run's ``Preview``; the scope, window and fact counts are nested ``Rendered``
parts.

The ``trace`` is the refresh's own record (``mentalmodels.refresh.trace.build_trace``, the same one a
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
from hindsight.infra.edge.serializers import Rendered, computed
from hindsight.infra.vocabulary import REFRESH_MODES, TAGS_MATCH_MODES, ModeFallbackReason, RefreshMode, iso_z
from mentalmodels.api.operation_details import REFRESH_OUTCOMES
from mentalmodels.api.serializers import PageChangesField, TagGroupsField
from mentalmodels.document.diff import PageVersion, page_diff
from mentalmodels.refresh.records import Preview

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


def preview_changes(preview: Preview) -> dict[str, Any]:
    """The same change in the one change shape (docs/behaviour.md#the-change-shape)."""
    decided = preview.outcome
    after = decided.document if decided.document is not None else (
        preview.model.document if decided.content == preview.current_content else None)
    return page_diff(PageVersion(preview.current_content, preview.model.document),
                     PageVersion(decided.content, after))


class MentalModelRefreshScopeSerializer(Rendered):
    """A plan's resolved scope (a ``Plan``)."""

    tags = computed(serializers.ListField(child=serializers.CharField(), allow_null=True),
                    lambda plan: list(plan.scope.tags) if plan.scope.tags else None)
    tags_match = computed(serializers.ChoiceField(choices=TAGS_MATCH_MODES),
                          lambda plan: plan.scope.tags_match)
    tag_groups = computed(TagGroupsField(), lambda plan: plan.scope.tag_groups_json())
    fact_types = computed(serializers.ListField(child=serializers.CharField(), allow_null=True),
                          lambda plan: list(plan.scope.fact_types) if plan.scope.fact_types
                          else None)
    exclude_mental_models = serializers.BooleanField()
    exclude_mental_model_ids = serializers.ListField(child=serializers.CharField(),
                                                     source="exclude_ids")


class MentalModelRefreshWindowSerializer(Rendered):
    """The window a preview read (a ``Preview``: its plan and its outcome)."""

    created_after = computed(serializers.DateTimeField(allow_null=True),
                             lambda p: iso_z(p.plan.window_after))
    created_before = computed(serializers.DateTimeField(), lambda p: iso_z(p.plan.cutoff))
    watermark = computed(serializers.DateTimeField(allow_null=True),
                         lambda p: iso_z(p.outcome.watermark))


class MentalModelFactCountsSerializer(Rendered):
    """An ``Outcome``'s fact counts."""

    retrieved = serializers.DictField(child=serializers.IntegerField(), source="facts_retrieved")
    used = serializers.DictField(child=serializers.IntegerField(), source="facts_used")


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


class DirectiveTraceSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()


class MentalModelRetractionSerializer(serializers.Serializer):
    """What a delta refresh retracted (docs/behaviour.md#retracted-facts)."""

    fact_ids = serializers.ListField(
        child=serializers.CharField(),
        help_text="The memories the document cited that were removed (deleted, invalidated or out "
                  "of its scope) or edited since its last refresh")
    fact_texts = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        help_text="What each of them said when the document cited it, in the order of fact_ids")
    applied = serializers.BooleanField(
        help_text="Whether the refresh took them out: an edit removed or rewrote what rested on "
                  "them, or the document was rewritten in full")
    deferred_reason = serializers.CharField(allow_null=True,
                                            help_text="Always null: a retraction is never put off")
    edited_fact_ids = serializers.ListField(
        child=serializers.CharField(),
        help_text="Those of fact_ids still in the bank, with another text")


class MentalModelRefreshTraceSerializer(serializers.Serializer):
    recorded_at = serializers.DateTimeField(allow_null=True)
    effective_mode = serializers.ChoiceField(choices=REFRESH_MODES)
    mode_fallback_reason = serializers.ChoiceField(choices=MODE_FALLBACK_REASONS, allow_null=True)
    outcome = serializers.ChoiceField(choices=DRY_RUN_OUTCOMES)
    tool_calls = MentalModelTraceToolCallSerializer(many=True)
    llm_calls = LLMCallTraceSerializer(many=True)
    directives = DirectiveTraceSerializer(many=True, help_text="The directives the refresh's "
                                          "prompts carried, highest priority first")
    delta_operations = serializers.DictField(allow_null=True)
    retraction = MentalModelRetractionSerializer(allow_null=True)
    usage = TokenUsageSerializer(allow_null=True)
    duration_ms = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


def _based_on(preview: Preview) -> dict[str, Any]:
    decided = preview.outcome
    return {k: v for k, v in decided.based_on.items() if v} if decided.reflected else {}


def _delta_operations(preview: Preview) -> dict[str, Any] | None:
    # Null in full mode; a delta run that asked for no operations applied none.
    if preview.plan.effective_mode != RefreshMode.DELTA:
        return None
    return preview.outcome.delta_operations or {"applied": [], "skipped": []}


class MentalModelDryRunRefreshResultSerializer(Rendered):
    """A ``Preview``: what the refresh would do, nothing written."""

    mental_model_id = serializers.CharField(source="model.mental_model_id")
    name = serializers.CharField(source="model.name")
    requested_mode = serializers.ChoiceField(choices=REFRESH_MODES, source="plan.requested_mode")
    effective_mode = serializers.ChoiceField(choices=REFRESH_MODES, source="plan.effective_mode")
    mode_fallback_reason = serializers.ChoiceField(choices=MODE_FALLBACK_REASONS,
                                                   allow_null=True,
                                                   source="plan.mode_fallback_reason")
    outcome = serializers.ChoiceField(choices=DRY_RUN_OUTCOMES, source="outcome.outcome")
    would_persist = serializers.BooleanField()
    scope = MentalModelRefreshScopeSerializer(source="plan")
    window = MentalModelRefreshWindowSerializer(source="*")
    facts = MentalModelFactCountsSerializer(source="outcome")
    based_on = computed(serializers.DictField(), _based_on)
    current_content = serializers.CharField(allow_blank=True)
    candidate_content = serializers.CharField(allow_blank=True, source="outcome.candidate")
    preview_content = serializers.CharField(allow_blank=True, source="outcome.content")
    diff = computed(serializers.CharField(allow_blank=True), preview_diff)
    # Ours: the change by section and block, as a history entry and a proposal carry it.
    changes = computed(PageChangesField(), preview_changes)
    delta_operations = computed(serializers.DictField(allow_null=True), _delta_operations)
    retraction = computed(MentalModelRetractionSerializer(allow_null=True),
                          lambda preview: preview.trace["retraction"])
    # The refresh's own record (``build_trace``), documented here, sent as recorded.
    trace = MentalModelRefreshTraceSerializer()
    usage = TokenUsageSerializer()
    duration_ms = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
