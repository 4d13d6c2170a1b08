"""The mental-models API's wire format (upstream's): one serializer per request part and
response, in the edge idiom of ``hindsight.infra.edge.serializers``.

Requests: a ``Body`` refuses what is not an object, unknown fields and wrong types, each kind of
mistake worded once (``hindsight.infra.edge.problems``), every problem of a request in one 422. The
domain's rules (``mental_model_id_problem``, ``trigger_normalize`` and the trigger rules of
``mentalmodels.triggers``) run after the declared types have been checked, their problems
located under the field they concern. The same classes document the requests and are what the
admin's forms check an edit with.

Responses: each ``Rendered`` serializer declares its shape, and that declaration renders it.
Every key of a model is always present, ``null`` when not part of the requested detail level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    OMIT,
    AnyJSON,
    Body,
    Boolean,
    Choice,
    Integer,
    JSONObject,
    List,
    Query,
    Rendered,
    Text,
    computed,
    const,
    limit_field,
    offset_field,
    page_fields,
    tags_field,
    tags_match_field,
)
from hindsight.infra.errors import FieldErrors
from hindsight.infra.vocabulary import (
    BUDGETS,
    LIST_TAGS_MATCH_MODES,
    REFRESH_MODES,
    SCOPE_FACT_TYPES,
    TAGS_MATCH_MODES,
)
from mentalmodels.models import (
    HISTORY_KINDS,
    HistoryKind,
    MentalModel,
    MentalModelHistory,
    VersionCause,
)
from mentalmodels.selectors import ListedModel
from mentalmodels.services import mental_model_id_problem
from mentalmodels.triggers import INT_MAX, trigger_fill, trigger_normalize

DETAILS = ("metadata", "content", "full")
DETAIL_HELP = ("'metadata' (names, tags, staleness), 'content' (adds content and config), "
               "'full' (adds reflect_response)")
MAX_TOKENS_RANGE = (256, 8192)
LIST_LIMIT_MAX = 1000
CREATE_FIELDS = ("id", "name", "source_query", "tags", "max_tokens", "trigger")
UPDATE_FIELDS = ("name", "source_query", "tags", "max_tokens", "trigger")
# The fields each detail level leaves null.
HIDDEN_BY_DETAIL: dict[str, tuple[str, ...]] = {
    "metadata": ("source_query", "content", "max_tokens", "trigger", "reflect_response"),
    "content": ("reflect_response",),
    "full": (),
}


# --- request fields ----------------------------------------------------------------------------


class MentalModelIdField(Text):
    """A string; the id rule is the service's (``mental_model_id_problem``)."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = mental_model_id_problem(value)
        if problem:
            raise FieldErrors([{"loc": [], "msg": f"{self.field_name} {problem}",
                                "type": "string_pattern_mismatch"}])
        return value


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
class TagGroupsField(AnyJSON):
    pass


@extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True,
                      "description": "A JSON Schema whose instances are objects"})
class ResponseSchemaField(JSONObject):
    pass


# A trigger key: optional, and null means its default (or, in a PATCH, resets it).
_OPT: dict[str, Any] = {"required": False, "allow_null": True}


class MentalModelTriggerSerializer(Body):
    # The keys' JSON types are checked here, as every body field is; the rules between keys and
    # of each key's value (cron syntax, the consolidation/cron exclusion, the response schema,
    # tag groups) are ``mentalmodels.triggers.trigger_normalize``'s, which locates each problem
    # itself. On a PATCH the context's ``stored_trigger`` is what the keys sent are merged over.
    budget = Choice(choices=BUDGETS, **_OPT)
    mode = Choice(choices=REFRESH_MODES, **_OPT)
    refresh_after_consolidation = Boolean(**_OPT)
    refresh_cron = Text(allow_blank=True, help_text="5-field UTC cron expression", **_OPT)
    full_refresh_cron = Text(allow_blank=True, **_OPT)
    min_refresh_interval_seconds = Integer(min_value=0, max_value=INT_MAX, **_OPT)
    fact_types = List(child=Choice(choices=SCOPE_FACT_TYPES), **_OPT)
    exclude_mental_models = Boolean(**_OPT)
    exclude_mental_model_ids = List(child=Text(allow_blank=True), **_OPT)
    tags_match = tags_match_field(TAGS_MATCH_MODES, allow_null=True)
    tag_groups = TagGroupsField(**_OPT)
    include_chunks = Boolean(**_OPT)
    recall_max_tokens = Integer(min_value=-INT_MAX, max_value=INT_MAX, **_OPT)
    recall_chunks_max_tokens = Integer(min_value=-INT_MAX, max_value=INT_MAX, **_OPT)
    reflect_search_observations_max_tokens = Integer(min_value=1, max_value=INT_MAX, **_OPT)
    reflect_search_observations_include_entities = Boolean(**_OPT)
    response_schema = ResponseSchemaField(**_OPT)
    keep_trace = Boolean(**_OPT)
    review = Boolean(help_text="Ours: a refresh writes a proposal to approve instead of applying "
                               "its change (null: the bank's mental_model_review)", **_OPT)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        trigger_normalize(attrs, base=self.context.get("stored_trigger"), loc=())
        # The keys sent: the service merges them over the stored trigger itself.
        return attrs


# --- requests ------------------------------------------------------------------------------------


_LOW, _HIGH = MAX_TOKENS_RANGE


class CreateMentalModelRequestSerializer(Body):
    """``POST …/mental-models``: name and source query required; the id generated when absent."""

    id = MentalModelIdField(allow_null=True, required=False,
                            help_text="Optional id; generated when absent")
    name = Text()
    source_query = Text()
    tags = tags_field(default=list, null_as_absent=True)
    max_tokens = Integer(min_value=_LOW, max_value=_HIGH, default=2048, required=False,
                         null_as_absent=True)
    trigger = MentalModelTriggerSerializer(required=False, allow_null=True)

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``mental_model_create`` (but the bank), from ``parse()``."""
        return {
            "name": data["name"],
            "source_query": data["source_query"],
            "tags": data["tags"] or [],
            "max_tokens": data["max_tokens"] or 2048,
            "trigger": data.get("trigger") or {},
            "mental_model_id": data.get("id"),
        }


class UpdateMentalModelRequestSerializer(Body):
    """``PATCH …/mental-models/{id}``: the fields sent change; no body at all changes nothing.
    Anything else but an object — ``[]``, ``0``, ``false``, ``""`` — is a 422, not a no-op."""

    when_absent: ClassVar[Mapping[str, Any]] = {}

    name = Text(allow_null=True, required=False)
    source_query = Text(allow_null=True, required=False)
    max_tokens = Integer(min_value=_LOW, max_value=_HIGH, allow_null=True, required=False)
    tags = tags_field(allow_null=True)
    trigger = MentalModelTriggerSerializer(allow_null=True, required=False,
                                           help_text="Keys sent replace the stored ones; null "
                                                     "resets a key to its default")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``mental_model_update`` (but the bank and the model), from
        ``parse()``: every field, ``None`` where it is not sent."""
        return {name: data.get(name) for name in UPDATE_FIELDS}


class RefreshMentalModelRequestSerializer(Body):
    """No body, JSON ``null`` or ``{}``: the model's own mode; ``{"mode": "full"}`` forces full."""

    when_absent: ClassVar[Mapping[str, Any]] = {}

    mode = Choice(choices=("full",), allow_null=True, required=False,
                  help_text="'full' forces a full rewrite; null keeps the trigger's mode")


class _NoParametersRequest(Body):
    """Clear and dry run take no parameters (a dry run on purpose: it predicts the refresh as
    configured). No body, ``null`` or ``{}`` is fine; anything sent is a 422 naming it rather
    than being ignored in silence."""

    when_absent: ClassVar[Mapping[str, Any]] = {}


class ClearMentalModelRequestSerializer(_NoParametersRequest):
    pass


class DryRunRefreshRequestSerializer(_NoParametersRequest):
    pass


# --- query strings -----------------------------------------------------------------------------


def _detail_field(default: str) -> Choice:
    return Choice(choices=DETAILS, required=False, default=default, help_text=DETAIL_HELP)


class MentalModelQuerySerializer(Query):
    """``GET …/mental-models/{id}``: the detail level, ``full`` by default."""

    detail = _detail_field("full")


class MentalModelListQuerySerializer(Query):
    """``GET …/mental-models``: every problem in one 422."""

    detail = _detail_field("metadata")
    limit = limit_field(100, LIST_LIMIT_MAX)
    offset = offset_field()
    tags = tags_field(help_text="Filter by tags (repeat the parameter for several)")
    tags_match = tags_match_field(LIST_TAGS_MATCH_MODES, default="any")
    exclude_knowledge_pages = Boolean(
        required=False, default=False,
        help_text="Leave out the mental models that hold knowledge pages",
    )


# --- responses -----------------------------------------------------------------------------------


class MentalModelResponseSerializer(Rendered):
    id = serializers.CharField(source="mental_model_id")
    bank_id = serializers.CharField()
    name = serializers.CharField()
    source_query = serializers.CharField(allow_null=True)
    content = serializers.CharField(allow_null=True, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())
    max_tokens = serializers.IntegerField(allow_null=True)
    trigger = computed(MentalModelTriggerSerializer(allow_null=True),
                       lambda model: trigger_fill(model.trigger or {}))
    last_refreshed_at = serializers.DateTimeField(allow_null=True)
    last_memory_seen_at = serializers.DateTimeField(allow_null=True)
    last_refresh_failed_at = serializers.DateTimeField(allow_null=True)
    last_full_refreshed_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    is_knowledge_page = serializers.BooleanField(allow_null=True)
    reflect_response = serializers.DictField(allow_null=True)
    is_stale = serializers.BooleanField(allow_null=True)

    @classmethod
    def render_model(cls, model: MentalModel | ListedModel, *, detail: str,
                     is_stale: bool | None) -> dict[str, Any]:
        """A model (or a list's row, which holds the columns its detail level renders) at a
        detail level: the fields it does not show are null."""
        return cls.render(model, is_stale=is_stale, **dict.fromkeys(HIDDEN_BY_DETAIL[detail]))


class MentalModelListResponseSerializer(Rendered):
    # ``items``: rendered by ``MentalModelResponseSerializer.render_model`` at the list's level.
    items = MentalModelResponseSerializer(many=True)
    total, limit, offset = page_fields()


class CreateMentalModelResponseSerializer(Rendered):
    mental_model_id = serializers.CharField()
    operation_id = serializers.UUIDField()


class AsyncOperationSubmitResponseSerializer(Rendered):
    operation_id = serializers.UUIDField(source="id")
    status = const(serializers.CharField(), "queued")


class MentalModelDeleteResponseSerializer(Rendered):
    status = const(serializers.ChoiceField(choices=("deleted",)), "deleted")


REFRESH_CAUSE = "refresh"
VERSION_CAUSES = (REFRESH_CAUSE, *VersionCause.values)


class PageChangesField(serializers.DictField):
    """The one change shape (docs/behaviour.md#the-change-shape,
    ``mentalmodels.document.diff``): ``changed``, ``sections`` (each with its ``blocks``),
    ``counts`` and the ``unified`` line diff."""


def _failure(entry: MentalModelHistory) -> bool:
    return entry.kind == HistoryKind.FAILURE


class MentalModelHistoryEntrySerializer(Rendered):
    """One history entry, newest first: a content ``version`` or a failed refresh attempt
    (``refresh_failed``)."""

    # Upstream 1.1.0's entry {previous_content, previous_reflect_response, changed_at} in its
    # wire order, then ``kind``; a failure record is upstream's too (kind ``refresh_failed``,
    # outcome, failure_reason, error_message, no content), and adds which operation it was.
    # A version leaves out the failures-only fields.
    previous_content = computed(serializers.CharField(allow_null=True, allow_blank=True),
                                lambda e: None if _failure(e) else e.previous_content)
    previous_reflect_response = computed(
        serializers.DictField(allow_null=True, help_text="Versions only (null for a failure)"),
        lambda e: None if _failure(e) else e.previous_reflect_response,
    )
    changed_at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=HISTORY_KINDS)
    outcome = computed(serializers.CharField(allow_null=True, required=False,
                                             help_text="Failures only"),
                       lambda e: e.outcome if _failure(e) else OMIT)
    failure_reason = computed(serializers.CharField(allow_null=True, required=False,
                                                    help_text="Failures only"),
                              lambda e: e.reason if _failure(e) else OMIT)
    error_message = computed(serializers.CharField(allow_null=True, required=False,
                                                   help_text="Failures only"),
                             lambda e: e.exception if _failure(e) else OMIT)
    operation_id = computed(serializers.UUIDField(allow_null=True, required=False,
                                                  help_text="Failures only"),
                            lambda e: e.operation_id if _failure(e) else OMIT)
    # Ours, after upstream's keys: the entry's id (what a restore names), and for a version
    # what made the change and the change itself (docs/behaviour.md#the-change-shape).
    id = serializers.IntegerField(help_text="The entry's id: POST …/restore takes a version's")
    cause = computed(
        serializers.ChoiceField(choices=VERSION_CAUSES, required=False,
                                help_text="Versions only: what made the change"),
        lambda e: OMIT if _failure(e) else (e.reason or REFRESH_CAUSE))
    changes = computed(
        PageChangesField(required=False,
                         help_text="Versions only: from the page this entry kept to the page "
                                   "after it (the next newer version's, or the current one)"),
        lambda e: OMIT if _failure(e) else e.changes)
