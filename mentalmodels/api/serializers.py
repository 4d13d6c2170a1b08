"""The mental-models API's wire format (upstream's): one serializer per request and response.

Requests are strict (``hindsight.api.serializers.CollectingSerializer``): a body must be an
object, a NUL character anywhere is refused, unknown fields are a 422 naming them (a deliberate
difference from upstream, which ignores them) reported with every field problem in one answer,
and every rule names its field. The rules are the domain's (``mental_model_id_problem``,
``trigger_normalize``, the tag length); the fields only call them. The same classes document the
requests (``@extend_schema(request=…)``) and are what the admin's forms check an edit with.

Responses: each response serializer declares its shape (for the document) and renders it
(``render``), building the dict directly in the declared order — no per-field
``to_representation`` on a list of up to 1,000 models. A test holds the rendered keys to the
declared fields. Every key is always present and ``null`` when not part of the requested detail
level.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.fields import empty

from hindsight.api.serializers import (
    ClosedSerializer,
    CollectingSerializer,
    QuerySerializer,
    WireTypedField,
)
from hindsight.tagscope import MAX_TAG_LENGTH, TAGS_MATCH_MODES
from mentalmodels.models import HISTORY_KINDS, HistoryKind, MentalModel, MentalModelHistory
from mentalmodels.refresh_types import RefreshMode
from mentalmodels.selectors import LIST_TAGS_MATCH, ListedModel
from mentalmodels.services import mental_model_id_problem
from mentalmodels.triggers import BUDGETS, FACT_TYPES, trigger_fill, trigger_normalize

DETAILS = ("metadata", "content", "full")
DETAIL_HELP = ("'metadata' (names, tags, staleness), 'content' (adds content and config), "
               "'full' (adds reflect_response)")
MAX_TOKENS_RANGE = (256, 8192)
LIST_LIMIT_MAX = 1000
# Offsets past PostgreSQL's bigint are a database error; no page is that far anyway.
OFFSET_MAX = 2**31 - 1
REFRESH_MODES = tuple(m.value for m in RefreshMode)
NUL_MSG = "Null characters are not allowed."
CREATE_FIELDS = ("id", "name", "source_query", "tags", "max_tokens", "trigger")
UPDATE_FIELDS = ("name", "source_query", "tags", "max_tokens", "trigger")


# --- request fields ----------------------------------------------------------------------------


class _WireField(WireTypedField):
    """``null_as_absent``: a JSON null is taken as the key left out (its default), without the
    field being documented as nullable (create's ``tags``, ``max_tokens``)."""

    def __init__(self, *args: Any, null_as_absent: bool = False, **kwargs: Any) -> None:
        self.null_as_absent = null_as_absent
        super().__init__(*args, **kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None and self.null_as_absent:
            data = empty
        return super().validate_empty_values(data)


class TextField(_WireField, serializers.CharField):
    """A non-blank string, kept as sent (not trimmed)."""

    default_error_messages = {
        "required": "Field required",
        "null": "Field required",
        "string_type": "must be a string",
        "string_too_short": "must not be blank",
    }

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("string_type")
        if not data.strip():
            self.fail("string_too_short")
        return data


class TagListField(_WireField, serializers.ListField):
    """Tags to store: each must fit one entry of the GIN index on ``tags`` (``MAX_TAG_LENGTH``)."""

    default_error_messages = {"list_type": "must be a list of strings"}

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, list) or not all(isinstance(t, str) for t in data):
            self.fail("list_type")
        for index, tag in enumerate(data):
            if len(tag) > MAX_TAG_LENGTH:
                raise ValidationError({index: [ErrorDetail(  # type: ignore[dict-item]
                    f"a tag has at most {MAX_TAG_LENGTH} characters", code="string_too_long")]})
        return data


class TokenBudgetField(_WireField, serializers.IntegerField):
    default_error_messages = {
        "int_type": "must be an integer",
        "greater_than_equal": "Input should be greater than or equal to {limit}",
        "less_than_equal": "Input should be less than or equal to {limit}",
    }

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("int_type")
        if self.min_value is not None and data < self.min_value:
            self.fail("greater_than_equal", limit=self.min_value)
        if self.max_value is not None and data > self.max_value:
            self.fail("less_than_equal", limit=self.max_value)
        return data


class MentalModelIdField(_WireField, serializers.CharField):
    """The id rule is the service's (``mental_model_id_problem``)."""

    def to_internal_value(self, data: Any) -> str:
        problem = mental_model_id_problem(data)
        if problem:
            raise ValidationError(f"{self.field_name} {problem}", code="string_pattern_mismatch")
        return data


class RefreshModeField(_WireField, serializers.ChoiceField):
    def to_internal_value(self, data: Any) -> str:
        if data not in self.choices:
            raise ValidationError(f"mode must be 'full' or null; got {data!r}",
                                  code="literal_error")
        return data


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
    # The fields document the trigger (request and response); the rules are
    # ``mentalmodels.triggers.trigger_normalize``'s, which locates every problem itself. On a
    # PATCH the context's ``stored_trigger`` is what the keys sent are checked against.
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

    def run_validation(self, data: Any = empty) -> Any:
        if data is None and not self.allow_null:
            data = empty  # create: null is the key left out
        is_empty, data = self.validate_empty_values(data)
        if is_empty:
            return data
        return self.to_internal_value(data)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        trigger_normalize(data, base=self.context.get("stored_trigger"),
                          loc=("body", str(self.field_name)))
        # The raw keys: the service merges them over the stored trigger itself.
        return dict(data)


# --- requests ------------------------------------------------------------------------------------


class _MentalModelRequest(CollectingSerializer):
    #: The field names the unknown-field message lists, in its order.
    allowed: ClassVar[tuple[str, ...]] = ()

    def unknown_field_message(self, key: str) -> str:
        return f"unknown field {key!r}; allowed: {', '.join(self.allowed)}"


_LOW, _HIGH = MAX_TOKENS_RANGE


class CreateMentalModelRequestSerializer(_MentalModelRequest):
    """``POST …/mental-models``: name and source query required; the id generated when absent."""

    allowed = CREATE_FIELDS
    check_order = ("name", "source_query", "tags", "max_tokens", "trigger", "id")

    id = MentalModelIdField(allow_null=True, required=False,
                            help_text="Optional id; generated when absent")
    name = TextField()
    source_query = TextField()
    tags = TagListField(child=serializers.CharField(), required=False, default=list,
                        null_as_absent=True)
    max_tokens = TokenBudgetField(min_value=_LOW, max_value=_HIGH, default=2048, required=False,
                                  null_as_absent=True)
    trigger = MentalModelTriggerSerializer(required=False, default=dict)

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``mental_model_create`` (but the bank), from ``parse()``."""
        return {
            "name": data["name"],
            "source_query": data["source_query"],
            "tags": data["tags"] or [],
            "max_tokens": data["max_tokens"] or 2048,
            "trigger": data["trigger"] or {},
            "mental_model_id": data.get("id"),
        }


class UpdateMentalModelRequestSerializer(_MentalModelRequest):
    """``PATCH …/mental-models/{id}``: the fields sent change; no body at all changes nothing.
    Anything else but an object — ``[]``, ``0``, ``false``, ``""`` — is a 422, not a no-op."""

    allowed = UPDATE_FIELDS
    check_order = UPDATE_FIELDS
    when_absent: ClassVar[Mapping[str, Any]] = {}

    name = TextField(allow_null=True, required=False)
    source_query = TextField(allow_null=True, required=False)
    max_tokens = TokenBudgetField(min_value=_LOW, max_value=_HIGH, allow_null=True,
                                  required=False)
    tags = TagListField(child=serializers.CharField(), allow_null=True, required=False)
    trigger = MentalModelTriggerSerializer(allow_null=True, required=False,
                                           help_text="Keys sent replace the stored ones; null "
                                                     "resets a key to its default")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``mental_model_update`` (but the bank and the model), from
        ``parse()``: every field, ``None`` where it is not sent."""
        return {name: data.get(name) for name in UPDATE_FIELDS}


class RefreshMentalModelRequestSerializer(_MentalModelRequest):
    """No body, JSON ``null`` or ``{}``: the model's own mode; ``{"mode": "full"}`` forces full."""

    allowed = ("mode",)
    when_absent: ClassVar[Mapping[str, Any]] = {}

    mode = RefreshModeField(choices=("full",), allow_null=True, required=False,
                            help_text="'full' forces a full rewrite; null keeps the trigger's mode")


class _NoParametersRequest(CollectingSerializer):
    """Clear and dry run take no parameters (a dry run on purpose: it predicts the refresh as
    configured). No body, ``null`` or ``{}`` is fine; anything sent is a 422 naming it rather
    than being ignored in silence."""

    call: ClassVar[str]
    when_absent: ClassVar[Mapping[str, Any]] = {}

    def unknown_field_message(self, key: str) -> str:
        return (f"{self.call} takes no parameters; unknown field {key!r} (change the model with "
                "PATCH instead)")


class ClearMentalModelRequestSerializer(_NoParametersRequest):
    call = "clear"


class DryRunRefreshRequestSerializer(_NoParametersRequest):
    call = "dry-run-refresh"


# --- query strings -----------------------------------------------------------------------------
#
# Each field is also the DRF field of its JSON type (choice, integer, list, boolean), so the
# query serializers document their parameters (``hindsight.api.schema.query_parameters``).


class _QueryField(WireTypedField):
    """One query parameter, read as the last value sent; sent empty it is left out."""

    def get_value(self, dictionary: Any) -> Any:
        raw = dictionary.get(self.field_name)
        return empty if raw is None or raw == "" else raw


class DetailField(_QueryField, serializers.ChoiceField):
    default_error_messages = {"literal_error": "Input should be 'metadata', 'content' or 'full'"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=DETAILS, help_text=DETAIL_HELP, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if data not in DETAILS:
            self.fail("literal_error")
        return data


class QueryIntField(_QueryField, serializers.IntegerField):
    default_error_messages = {
        "int_parsing": "Input should be a valid integer",
        "value_error": "Input should be {bound}",
    }

    def to_internal_value(self, data: Any) -> int:
        low, high = self.min_value, self.max_value
        try:
            value = int(data)
        except ValueError:
            self.fail("int_parsing")
        if (low is not None and value < low) or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            self.fail("value_error", bound=bound)
        return value


class QueryTagsField(WireTypedField, serializers.ListField):
    default_error_messages = {"null_characters_not_allowed": NUL_MSG}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(), **kwargs)

    def get_value(self, dictionary: Any) -> Any:
        return [t for t in dictionary.getlist(self.field_name) if t != ""]

    def to_internal_value(self, data: Any) -> list[str]:
        if any("\x00" in t for t in data):
            self.fail("null_characters_not_allowed")
        return data


class TagsMatchField(_QueryField, serializers.ChoiceField):
    default_error_messages = {"literal_error": "Input should be 'any', 'all' or 'exact'"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=LIST_TAGS_MATCH, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if data not in LIST_TAGS_MATCH:
            self.fail("literal_error")
        return data


class QueryBoolField(WireTypedField, serializers.BooleanField):
    """Accepted and checked (``true``/``false``/``1``/``0``), sent empty too."""

    default_error_messages = {"bool_parsing": "Input should be a valid boolean"}

    def get_value(self, dictionary: Any) -> Any:
        raw = dictionary.get(self.field_name)
        return empty if raw is None else raw

    def to_internal_value(self, data: Any) -> bool:
        if data.lower() not in ("true", "false", "1", "0"):
            self.fail("bool_parsing")
        return data.lower() in ("true", "1")


class MentalModelQuerySerializer(QuerySerializer):
    """``GET …/mental-models/{id}``: the detail level, ``full`` by default."""

    detail = DetailField(required=False, default="full")


class MentalModelListQuerySerializer(QuerySerializer):
    """``GET …/mental-models``: every problem in one 422, in this order."""

    detail = DetailField(required=False, default="metadata")
    limit = QueryIntField(min_value=1, max_value=LIST_LIMIT_MAX, required=False, default=100)
    offset = QueryIntField(min_value=0, max_value=OFFSET_MAX, required=False, default=0)
    tags = QueryTagsField(required=False,
                          help_text="Filter by tags (repeat the parameter for several)")
    tags_match = TagsMatchField(required=False, default="any", help_text="How to match tags")
    exclude_knowledge_pages = QueryBoolField(
        required=False, default=False,
        help_text="Leave out the mental models that hold knowledge pages",
    )


# --- responses -----------------------------------------------------------------------------------


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


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

    @staticmethod
    def render(model: MentalModel | ListedModel, *, detail: str,
               is_stale: bool | None) -> dict[str, Any]:
        """The declared fields, in their order (a list renders up to 1,000 of these): of a model,
        or of a list's row, which holds the columns its detail level renders."""
        with_content = detail in ("content", "full")
        return {
            "id": model.mental_model_id,
            "bank_id": model.bank_id,
            "name": model.name,
            "source_query": model.source_query if with_content else None,
            "content": model.content if with_content else None,
            "tags": list(model.tags),
            "max_tokens": model.max_tokens if with_content else None,
            "trigger": trigger_fill(model.trigger or {}) if with_content else None,
            "last_refreshed_at": iso(model.last_refreshed_at),
            "last_memory_seen_at": iso(model.last_memory_seen_at),
            "last_refresh_failed_at": iso(model.last_refresh_failed_at),
            "last_full_refreshed_at": iso(model.last_full_refreshed_at),
            "created_at": iso(model.created_at),
            "is_knowledge_page": model.is_knowledge_page,
            "reflect_response": model.reflect_response if detail == "full" else None,
            "is_stale": is_stale,
        }


class MentalModelListResponseSerializer(serializers.Serializer):
    items = MentalModelResponseSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()

    @staticmethod
    def render(items: list[dict[str, Any]], *, total: int, limit: int,
               offset: int) -> dict[str, Any]:
        return {"items": items, "total": total, "limit": limit, "offset": offset}


class CreateMentalModelResponseSerializer(serializers.Serializer):
    mental_model_id = serializers.CharField()
    operation_id = serializers.UUIDField()

    @staticmethod
    def render(mental_model_id: str, operation_id: Any) -> dict[str, Any]:
        return {"mental_model_id": mental_model_id, "operation_id": str(operation_id)}


class AsyncOperationSubmitResponseSerializer(serializers.Serializer):
    operation_id = serializers.UUIDField()
    status = serializers.CharField()

    @staticmethod
    def render(operation_id: Any) -> dict[str, Any]:
        return {"operation_id": str(operation_id), "status": "queued"}


class MentalModelDeleteResponseSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=("deleted",))

    @staticmethod
    def render() -> dict[str, Any]:
        return {"status": "deleted"}


class MentalModelHistoryEntrySerializer(serializers.Serializer):
    """One history entry, newest first: a content ``version`` or a failed refresh attempt
    (``refresh_failed``)."""

    # Upstream 1.1.0's entry {previous_content, previous_reflect_response, changed_at} in its
    # wire order, then ``kind``; a failure record is upstream's too (kind ``refresh_failed``,
    # outcome, failure_reason, error_message, no content), and adds which operation it was.
    previous_content = serializers.CharField(allow_null=True, allow_blank=True)
    previous_reflect_response = serializers.DictField(
        allow_null=True, help_text="Versions only (null for a failure)"
    )
    changed_at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=HISTORY_KINDS)
    outcome = serializers.CharField(allow_null=True, required=False, help_text="Failures only")
    failure_reason = serializers.CharField(allow_null=True, required=False,
                                           help_text="Failures only")
    error_message = serializers.CharField(allow_null=True, required=False,
                                          help_text="Failures only")
    operation_id = serializers.UUIDField(allow_null=True, required=False,
                                         help_text="Failures only")

    @staticmethod
    def render(entry: MentalModelHistory) -> dict[str, Any]:
        """The declared fields in their order; a version leaves out the failures-only ones."""
        if entry.kind == HistoryKind.FAILURE:
            return {
                "previous_content": None,
                "previous_reflect_response": None,
                "changed_at": iso(entry.changed_at),
                "kind": HistoryKind.FAILURE,
                "outcome": entry.outcome,
                "failure_reason": entry.reason,
                "error_message": entry.exception,
                "operation_id": str(entry.operation_id) if entry.operation_id else None,
            }
        return {
            "previous_content": entry.previous_content,
            "previous_reflect_response": entry.previous_reflect_response,
            "changed_at": iso(entry.changed_at),
            "kind": HistoryKind.VERSION,
        }
