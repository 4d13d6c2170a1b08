"""Request parsing for the banks API: strict serializers (unknown fields and wrong types → 422).

The strict base serializer and fields are the edge's shared idiom (``hindsight.api.serializers``);
the fields here are the banks' own (content blocks, timestamps, observation scopes, tags).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from hindsight.api.serializers import (
    AnyJSONField,
    StrictBooleanField,
    StrictCharField,
    StrictDictField,
    StrictFloatField,
    StrictIntegerField,
    StrictListField,
    StrictSerializer,
)
from hindsight.banks.retaintypes import RetainItem
from hindsight.tagscope import MAX_TAG_LENGTH, TAGS_MATCH_MODES


def _str_list(**kwargs: Any) -> StrictListField:
    return StrictListField(child=StrictCharField(allow_blank=True), **kwargs)


def _tag_list(**kwargs: Any) -> StrictListField:
    """Tags to store: each must fit one entry of the GIN index on ``tags`` (``MAX_TAG_LENGTH``)."""
    return StrictListField(
        child=StrictCharField(
            allow_blank=True, max_length=MAX_TAG_LENGTH,
            error_messages={"max_length": f"a tag has at most {MAX_TAG_LENGTH} characters"},
        ),
        **kwargs,
    )


def parse_datetime_value(value: str) -> datetime:
    """ISO 8601 → aware datetime (naive values are taken as UTC)."""
    text = value.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        # Stored and read back in UTC: a value that has no UTC form (year 0 or 10000) is bad input.
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("date-time out of range") from exc


class DateTimeStringField(StrictCharField):
    default_error_messages = {"invalid": "must be an ISO 8601 date-time string"}

    def to_internal_value(self, data: Any) -> datetime:  # type: ignore[override]  # a parsed value
        text = super().to_internal_value(data)
        try:
            return parse_datetime_value(text)
        except ValueError:
            self.fail("invalid")
            raise  # unreachable: fail() raises


# --- banks -----------------------------------------------------------------------------------


class DispositionSerializer(StrictSerializer):
    skepticism = StrictIntegerField(min_value=1, max_value=5)
    literalism = StrictIntegerField(min_value=1, max_value=5)
    empathy = StrictIntegerField(min_value=1, max_value=5)


class DispositionUpdateSerializer(StrictSerializer):
    """Upstream's ``UpdateDispositionRequest`` (``PUT …/profile``): all three traits."""

    disposition = DispositionSerializer()


def _opt_str() -> StrictCharField:
    return StrictCharField(required=False, allow_null=True, allow_blank=True)


def _opt_int(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(required=False, allow_null=True, **kwargs)


def _opt_bool() -> StrictBooleanField:
    return StrictBooleanField(required=False, allow_null=True)


class BankWriteSerializer(StrictSerializer):
    """Upstream's ``CreateBankRequest`` (PUT and PATCH); every field optional."""

    name = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    disposition = DispositionSerializer(required=False, allow_null=True)
    disposition_skepticism = _opt_int(min_value=1, max_value=5)
    disposition_literalism = _opt_int(min_value=1, max_value=5)
    disposition_empathy = _opt_int(min_value=1, max_value=5)
    mission = _opt_str()
    background = _opt_str()
    reflect_mission = _opt_str()
    retain_mission = _opt_str()
    retain_extraction_mode = _opt_str()
    retain_custom_instructions = _opt_str()
    retain_chunk_size = _opt_int(min_value=1)
    retain_structured_chunk_size = _opt_int(min_value=1)
    retain_max_attachments_per_chunk = _opt_int(min_value=0)
    enable_observations = _opt_bool()
    observations_mission = _opt_str()
    enable_text_search = _opt_bool()
    enable_temporal_retrieval = _opt_bool()
    enable_graph_retrieval = _opt_bool()
    enable_reranking = _opt_bool()


class BankConfigUpdateSerializer(StrictSerializer):
    updates = StrictDictField(child=AnyJSONField(allow_null=True))


# --- retain ----------------------------------------------------------------------------------

OBSERVATION_SCOPE_MODES = ("per_tag", "combined", "all_combinations", "shared")
RETAIN_STRATEGIES = ("verbatim", "concise", "verbose")


class EntityInputSerializer(StrictSerializer):
    text = StrictCharField(allow_blank=False)
    type = StrictCharField(required=False, allow_null=True, allow_blank=True)


class ContentField(serializers.Field):
    """A string, or a list of content blocks of which only ``text`` blocks are supported."""

    default_error_messages = {
        "invalid": "must be a string or a list of content blocks",
        "blank": "must not be empty",
    }

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str):
            text = data
        elif isinstance(data, list):
            parts = []
            for index, block in enumerate(data):
                if not isinstance(block, dict) or "type" not in block:
                    raise ValidationError({index: ["a content block must be an object with a type"]})  # type: ignore[dict-item]
                if block["type"] != "text":
                    raise ValidationError(
                        {index: [f"content blocks of type {block['type']!r} are not supported "  # type: ignore[dict-item]
                                 "by this server: send text"]}
                    )
                extra = set(block) - {"type", "text"}
                if extra:
                    raise ValidationError({index: [f"unknown field(s) {sorted(extra)}"]})  # type: ignore[dict-item]
                if not isinstance(block.get("text"), str):
                    raise ValidationError({index: ["a text block needs a string 'text'"]})  # type: ignore[dict-item]
                parts.append(block["text"])
            text = "\n\n".join(parts)
        else:
            self.fail("invalid")
        if not text.strip():
            self.fail("blank")
        if "\x00" in text:
            raise ValidationError("Null characters are not allowed.", code="null_characters_not_allowed")
        return text

    def to_representation(self, value: Any) -> Any:
        return value


class TimestampField(serializers.Field):
    default_error_messages = {
        "invalid": "must be an ISO 8601 date-time string, 'unset', or null",
    }

    def to_internal_value(self, data: Any) -> Any:
        if data == "unset":
            return "unset"
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            return parse_datetime_value(data)
        except ValueError:
            self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class ObservationScopesField(serializers.Field):
    default_error_messages = {
        "invalid": f"must be one of {', '.join(OBSERVATION_SCOPE_MODES)}, a list of tag lists, "
                   "or null",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and data in OBSERVATION_SCOPE_MODES:
            return data
        if isinstance(data, list) and all(
            isinstance(scope, list) and all(isinstance(t, str) for t in scope) for scope in data
        ):
            return data
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class MemoryItemSerializer(StrictSerializer):
    content = ContentField()
    timestamp = TimestampField(required=False, allow_null=True)
    # A wire field named like DRF's ``Field.context`` property; the metaclass takes it as a field.
    context = StrictCharField(required=False, allow_null=True, allow_blank=True)  # type: ignore[assignment]
    metadata = StrictDictField(
        child=StrictCharField(allow_blank=True), required=False, allow_null=True
    )
    document_id = StrictCharField(
        required=False, allow_null=True, allow_blank=False, max_length=255
    )
    entities = StrictListField(child=EntityInputSerializer(), required=False, allow_null=True)
    resolve_entities = StrictBooleanField(required=False, default=True)
    tags = _tag_list(required=False, allow_null=True)
    observation_scopes = ObservationScopesField(required=False, allow_null=True)
    strategy = serializers.ChoiceField(
        choices=RETAIN_STRATEGIES, required=False, allow_null=True,
        error_messages={"invalid_choice": "unknown retain strategy {input!r}: this server knows "
                        + ", ".join(RETAIN_STRATEGIES)},
    )
    update_mode = serializers.ChoiceField(
        choices=("replace", "append"), required=False, allow_null=True
    )

    def validate_metadata(self, value: dict[str, str] | None) -> dict[str, str] | None:
        for key in value or {}:
            if "\x00" in key:
                raise ValidationError("Null characters are not allowed in keys.",
                                      code="null_characters_not_allowed")
        return value

    def to_item(self, data: dict[str, Any], *, document_tags: list[str] | None) -> RetainItem:
        timestamp = data.get("timestamp")
        tags = list(dict.fromkeys([*(data.get("tags") or []), *(document_tags or [])]))
        return RetainItem(
            content=data["content"],
            context=data.get("context") or "",
            tags=tags,
            timestamp=None if timestamp in (None, "unset") else timestamp.isoformat(),
            timestamp_unset=timestamp == "unset",
            metadata=dict(data.get("metadata") or {}),
            document_id=data.get("document_id"),
            entities=[e["text"] for e in (data.get("entities") or [])],
            strategy=data.get("strategy"),
            update_mode=data.get("update_mode") or "replace",
        )


class RetainRequestSerializer(StrictSerializer):
    items = StrictListField(child=MemoryItemSerializer(), min_length=1, max_length=1000)
    document_tags = _tag_list(required=False, allow_null=True)
    operation_id = serializers.UUIDField(required=False, allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # ``async`` is a Python keyword: declare it by name.
        fields["async"] = StrictBooleanField(required=False, default=False)
        return fields

    def retain_items(self) -> list[RetainItem]:
        data = self.validated_data
        child = MemoryItemSerializer()
        return [child.to_item(item, document_tags=data.get("document_tags")) for item in data["items"]]


# --- recall ----------------------------------------------------------------------------------


class EntityIncludeSerializer(StrictSerializer):
    max_tokens = StrictIntegerField(required=False, min_value=0)


class ChunkIncludeSerializer(StrictSerializer):
    max_tokens = StrictIntegerField(required=False, min_value=0)


class SourceFactsIncludeSerializer(StrictSerializer):
    max_tokens = StrictIntegerField(required=False, min_value=-1)
    max_tokens_per_observation = StrictIntegerField(required=False, min_value=-1)


class IncludeSerializer(StrictSerializer):
    entities = EntityIncludeSerializer(required=False, allow_null=True)
    chunks = ChunkIncludeSerializer(required=False, allow_null=True)
    source_facts = SourceFactsIncludeSerializer(required=False, allow_null=True)


class MinScoresSerializer(StrictSerializer):
    semantic = StrictFloatField(required=False, allow_null=True)
    keyword = StrictFloatField(required=False, allow_null=True)
    reranker = StrictFloatField(required=False, allow_null=True)
    final = StrictFloatField(required=False, allow_null=True)


class TemporalWindowSerializer(StrictSerializer):
    start = DateTimeStringField()
    end = DateTimeStringField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["end"] < attrs["start"]:
            raise ValidationError({"end": ["must not be before start"]})
        return attrs


class RecallRequestSerializer(StrictSerializer):
    query = StrictCharField(allow_blank=False, max_length=20000)
    types = _str_list(required=False, allow_null=True)
    prefer_observations = _opt_bool()
    budget = serializers.ChoiceField(choices=("low", "mid", "high"), required=False, default="mid")
    max_tokens = StrictIntegerField(required=False, default=4096, min_value=1, max_value=1_000_000)
    trace = StrictBooleanField(required=False, default=False)
    query_timestamp = DateTimeStringField(required=False, allow_null=True)
    include = IncludeSerializer(required=False, allow_null=True)
    tags = _str_list(required=False, allow_null=True)
    tags_match = serializers.ChoiceField(choices=TAGS_MATCH_MODES, required=False, default="any")
    tag_groups = AnyJSONField(required=False, allow_null=True)
    min_scores = MinScoresSerializer(required=False, allow_null=True)
    temporal_window = TemporalWindowSerializer(required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tag_groups") and attrs.get("tags"):
            raise ValidationError(
                {"tag_groups": ["send either tags (with tags_match) or tag_groups, not both"]}
            )
        return attrs


class TagScopeListField(serializers.Field):
    default_error_messages = {"invalid": "must be a list of tag lists (strings), or null"}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and all(
            isinstance(scope, list) and all(isinstance(t, str) for t in scope) for scope in data
        ):
            return data
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class ConsolidationRequestSerializer(StrictSerializer):
    """``POST …/consolidate``. ``observation_scopes`` is accepted for upstream's clients and
    checked for type; consolidation here always takes every pending fact (each per its tag set)."""

    observation_scopes = TagScopeListField(required=False, allow_null=True)
