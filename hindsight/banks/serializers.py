"""The banks API's request parts (upstream's v1 wire format) in the edge idiom of
``hindsight.infra.edge.serializers``: bodies (banks, config, retain, recall, consolidate) and query
strings (the bank, memory, tag and LLM-request lists, stats). Unknown body fields and wrong
types are a 422 naming the field, worded from ``hindsight.infra.edge.problems``; the fields here are
only the banks' own (content blocks, event timestamps, observation scopes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework.exceptions import ValidationError

from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.selectors import CONSOLIDATION_STATES, DOCUMENT_TIME_FIELDS, TIME_FIELDS
from hindsight.infra.edge.serializers import (
    UUID,
    AnyJSON,
    Body,
    Boolean,
    Choice,
    DateTime,
    Integer,
    List,
    Number,
    Object,
    Query,
    Text,
    WireField,
    fact_types_field,
    limit_field,
    offset_field,
    parse_datetime_value,
    tags_field,
    tags_match_field,
    timestamp_field,
)
from hindsight.infra.errors import FieldError
from hindsight.infra.llm.selectors import PERIODS
from hindsight.infra.vocabulary import BUDGETS, CURATED_FACT_TYPES, FACT_TYPES, MEMORY_STATES

__all__ = ["parse_datetime_value"]  # the services read event times with the edge's one parser

TAG_SOURCES = ("memories", "mental_models")
LLM_REQUEST_STATUSES = ("success", "error")
LLM_CALL_TYPES = ("llm", "embedding", "rerank", "decision")
OBSERVATION_SCOPE_MODES = ("per_tag", "combined", "all_combinations", "shared")
RETAIN_STRATEGIES = ("verbatim", "concise", "verbose")

_OPT: dict[str, Any] = {"required": False, "allow_null": True}


def _opt_text() -> Text:
    return Text(allow_blank=True, **_OPT)


def _trait(**kwargs: Any) -> Integer:
    return Integer(min_value=1, max_value=5, **kwargs)


# --- banks -----------------------------------------------------------------------------------


class DispositionSerializer(Body):
    skepticism = _trait()
    literalism = _trait()
    empathy = _trait()


class DispositionUpdateSerializer(Body):
    """Upstream's ``UpdateDispositionRequest`` (``PUT …/profile``): all three traits."""

    disposition = DispositionSerializer()


class BankWriteSerializer(Body):
    """Upstream's ``CreateBankRequest`` (PUT and PATCH); every field optional."""

    name = Text(allow_blank=True, max_length=255, **_OPT)
    disposition = DispositionSerializer(**_OPT)
    disposition_skepticism = _trait(**_OPT)
    disposition_literalism = _trait(**_OPT)
    disposition_empathy = _trait(**_OPT)
    mission = _opt_text()
    background = _opt_text()
    reflect_mission = _opt_text()
    retain_mission = _opt_text()
    retain_extraction_mode = _opt_text()
    retain_custom_instructions = _opt_text()
    retain_chunk_size = Integer(min_value=1, **_OPT)
    retain_structured_chunk_size = Integer(min_value=1, **_OPT)
    retain_max_attachments_per_chunk = Integer(min_value=0, **_OPT)
    enable_observations = Boolean(**_OPT)
    observations_mission = _opt_text()
    enable_text_search = Boolean(**_OPT)
    enable_temporal_retrieval = Boolean(**_OPT)
    enable_graph_retrieval = Boolean(**_OPT)
    enable_reranking = Boolean(**_OPT)


class BankConfigUpdateSerializer(Body):
    updates = Object(child=AnyJSON(allow_null=True))


# --- retain ----------------------------------------------------------------------------------


class EntityInputSerializer(Body):
    text = Text()
    type = _opt_text()


class ContentField(WireField):
    """A string, or a list of content blocks of which only ``text`` blocks are supported."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str):
            text = data
        elif isinstance(data, list):
            parts = []
            for index, block in enumerate(data):
                problem = _block_problem(block)
                if problem:
                    raise ValidationError({index: [problem]})  # type: ignore[dict-item]
                parts.append(block["text"])
            text = "\n\n".join(parts)
        else:
            self.fail("string_type")
        if "\x00" in text:
            self.fail("null_characters")
        if not text.strip():
            self.fail("blank" if text else "string_too_short")
        return text


def _block_problem(block: Any) -> str | None:
    if not isinstance(block, dict) or "type" not in block:
        return "a content block must be an object with a type"
    if block["type"] != "text":
        return f"content blocks of type {block['type']!r} are not supported by this server: send text"
    extra = set(block) - {"type", "text"}
    if extra:
        return f"unknown field(s) {sorted(extra)}"
    if not isinstance(block.get("text"), str):
        return "a text block needs a string 'text'"
    return None


class TimestampField(DateTime):
    """An event time: an ISO 8601 date-time, ``'unset'`` (none) or null (now)."""

    def to_internal_value(self, data: Any) -> Any:
        if data == "unset":
            return "unset"
        return super().to_internal_value(data)


def _tag_lists(data: Any) -> bool:
    return isinstance(data, list) and all(
        isinstance(scope, list) and all(isinstance(t, str) and "\x00" not in t for t in scope)
        for scope in data
    )


class TagScopeListField(WireField):
    """A list of tag lists (strings)."""

    type_kind = "list_type"

    def to_internal_value(self, data: Any) -> Any:
        if not _tag_lists(data):
            raise ValidationError("Input should be a list of tag lists (strings)",
                                  code="list_type")
        return data


class ObservationScopesField(TagScopeListField):
    """One of ``OBSERVATION_SCOPE_MODES``, or a list of tag lists."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and data in OBSERVATION_SCOPE_MODES:
            return data
        if not _tag_lists(data):
            raise ValidationError(
                f"Input should be one of {', '.join(OBSERVATION_SCOPE_MODES)} or a list of tag "
                "lists (strings)", code="union_type")
        return data


class MemoryItemSerializer(Body):
    content = ContentField()
    timestamp = TimestampField(**_OPT)
    # A wire field named like DRF's ``Field.context`` property; the metaclass takes it as a field.
    context = _opt_text()  # type: ignore[assignment]
    metadata = Object(child=Text(allow_blank=True), **_OPT)
    document_id = Text(max_length=255, **_OPT)
    entities = List(child=EntityInputSerializer(), **_OPT)
    resolve_entities = Boolean(required=False, default=True)
    tags = tags_field(allow_null=True)
    observation_scopes = ObservationScopesField(**_OPT)
    strategy = Choice(choices=RETAIN_STRATEGIES, **_OPT)
    update_mode = Choice(choices=("replace", "append"), **_OPT)

    @staticmethod
    def to_item(data: dict[str, Any], *, document_tags: list[str] | None) -> RetainItem:
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


class RetainRequestSerializer(Body):
    items = List(child=MemoryItemSerializer(), min_length=1, max_length=1000)
    document_tags = tags_field(allow_null=True)
    operation_id = UUID(**_OPT)

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        # ``async`` is a Python keyword: declare it by name.
        fields["async"] = Boolean(required=False, default=False)
        return fields

    @staticmethod
    def retain_items(data: dict[str, Any]) -> list[RetainItem]:
        """The parsed items, each with the document's tags merged into its own."""
        return [MemoryItemSerializer.to_item(item, document_tags=data.get("document_tags"))
                for item in data["items"]]


# --- recall ----------------------------------------------------------------------------------


class EntityIncludeSerializer(Body):
    max_tokens = Integer(required=False, min_value=0)


class ChunkIncludeSerializer(Body):
    max_tokens = Integer(required=False, min_value=0)


class SourceFactsIncludeSerializer(Body):
    max_tokens = Integer(required=False, min_value=-1)
    max_tokens_per_observation = Integer(required=False, min_value=-1)


class IncludeSerializer(Body):
    component_name = "IncludeOptions"  # upstream's (reflect has an include too)

    entities = EntityIncludeSerializer(**_OPT)
    chunks = ChunkIncludeSerializer(**_OPT)
    source_facts = SourceFactsIncludeSerializer(**_OPT)


class MinScoresSerializer(Body):
    semantic = Number(**_OPT)
    keyword = Number(**_OPT)
    reranker = Number(**_OPT)
    final = Number(**_OPT)


class TemporalWindowSerializer(Body):
    start = DateTime()
    end = DateTime()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["end"] < attrs["start"]:
            raise ValidationError({"end": ["must not be before start"]})
        return attrs


class RecallRequestSerializer(Body):
    query = Text(max_length=20000)
    types = fact_types_field(allow_null=True)
    prefer_observations = Boolean(**_OPT)
    budget = Choice(choices=BUDGETS, required=False, default="mid")
    max_tokens = Integer(required=False, default=4096, min_value=1, max_value=1_000_000)
    trace = Boolean(required=False, default=False)
    query_timestamp = timestamp_field(allow_null=True)
    include = IncludeSerializer(**_OPT)
    tags = tags_field(allow_null=True)
    tags_match = tags_match_field(default="any")
    tag_groups = AnyJSON(**_OPT)
    min_scores = MinScoresSerializer(**_OPT)
    temporal_window = TemporalWindowSerializer(**_OPT)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tag_groups") and attrs.get("tags"):
            raise ValidationError(
                {"tag_groups": ["send either tags (with tags_match) or tag_groups, not both"]}
            )
        return attrs


class ConsolidationRequestSerializer(Body):
    """``POST …/consolidate``. ``observation_scopes`` is accepted for upstream's clients and
    checked for type; consolidation here always takes every pending fact (each per its tag set).
    The body is optional (upstream: ``ConsolidationRequest | null``)."""

    when_absent = {}  # noqa: RUF012  (a ClassVar of the base)

    observation_scopes = TagScopeListField(**_OPT)


# --- query strings ---------------------------------------------------------------------------


def _text(help_text: str = "") -> Text:
    return Text(required=False, help_text=help_text)


class BankListQuery(Query):
    q = _text("Case-insensitive substring filter on bank id or name")
    limit = limit_field(100, 1000, minimum=0)
    offset = offset_field()


class BankStatsQuery(Query):
    refresh = Boolean(required=False, default=False,
                      help_text="Accepted for upstream's clients; stats are always fresh")


class MemoryListQuery(Query):
    type = Choice(choices=FACT_TYPES, required=False,
                  help_text="Only memories of this fact type")
    q = _text("Case-insensitive substring filter on text and context")
    document_id = _text()
    tags = tags_field(help_text="Filter by tags (repeat the parameter for several)")
    tags_match = tags_match_field(default="any")
    consolidation_state = Choice(
        choices=CONSOLIDATION_STATES, required=False,
        help_text="'failed' selects nothing: consolidation records no failure here")
    state = Choice(choices=MEMORY_STATES, required=False,
                   help_text="'valid' (the default) lists live memories, 'invalidated' the "
                             "curation archive")
    entity_id = _text("Selects nothing: entities are kept as text, not linked rows")
    time_field = Choice(choices=tuple(TIME_FIELDS), required=False,
                        help_text="Time axis to filter and order by")
    start_date = DateTime(required=False, help_text="From this ISO date-time (inclusive)")
    end_date = DateTime(required=False, help_text="Until this ISO date-time (exclusive)")
    limit = limit_field(100, 1000, minimum=0)
    offset = offset_field()


class MemoryClearQuery(Query):
    type = Choice(choices=FACT_TYPES, required=False,
                  help_text="Only memories of this fact type (all of them when left out)")


class TagListQuery(Query):
    source = Choice(choices=TAG_SOURCES, required=False, default="memories")  # type: ignore[assignment]  # a wire field named like Field.source
    q = _text("Wildcard pattern ('*'), case-insensitive")
    limit = limit_field(100, 1000, minimum=0)
    offset = offset_field()


class LLMRequestListQuery(Query):
    status = Choice(choices=LLM_REQUEST_STATUSES, required=False)
    operation = _text("Operation type: retain, consolidation, refresh_mental_model, reflect")
    scope = _text("What the call was for (the gateway's purpose)")
    call_type = Choice(
        choices=LLM_CALL_TYPES, required=False,
        help_text="Only 'llm' requests are logged here; the other kinds select nothing")
    provider = _text()
    trace_id = UUID(required=False, help_text="One operation run: its operation id")
    document_id = _text("Accepted; selects nothing (requests are not linked to documents)")
    memory_id = _text("Accepted; selects nothing (requests are not linked to memories)")
    group = Boolean(required=False, default=False,
                    help_text="Accepted; requests are always paginated one by one")
    start_date = DateTime(required=False, help_text="From this ISO date-time (inclusive)")
    end_date = DateTime(required=False, help_text="Until this ISO date-time (exclusive)")
    limit = limit_field(50, 500)
    offset = offset_field()


class LLMRequestStatsQuery(Query):
    operation = _text()
    call_type = Choice(choices=LLM_CALL_TYPES, required=False)
    period = Choice(choices=tuple(PERIODS), required=False, default="7d")


# --- memory curation -------------------------------------------------------------------------


class ClearableDateTime(DateTime):
    """An ISO 8601 date-time, or ``""`` (or null) to clear the stored one."""

    def to_internal_value(self, data: Any) -> Any:
        if data == "":
            return None
        return super().to_internal_value(data)


class UpdateMemoryRequestSerializer(Body):
    """``PATCH …/memories/{id}``: the fields sent are edited (a date sent as ``""`` or null is
    cleared), then ``state`` applies; at least one of them. ``tags`` and ``metadata`` go beyond
    upstream's request (docs/api.md)."""

    component_name = "UpdateMemoryRequest"
    when_absent: ClassVar[Mapping[str, Any]] = {}

    text = Text(required=False, null_as_absent=True,
                help_text="New fact text: embedded again; the observations built on the memory "
                          "are deleted and it is consolidated again")
    context = Text(  # type: ignore[assignment]  # a wire field
        required=False, allow_blank=True, null_as_absent=True,
        help_text="New context ('' clears it)")
    occurred_start = ClearableDateTime(required=False, allow_null=True,
                                       help_text="New occurred-range start ('' clears it)")
    occurred_end = ClearableDateTime(required=False, allow_null=True,
                                     help_text="New occurred-range end ('' clears it)")
    mentioned_at = ClearableDateTime(required=False, allow_null=True,
                                     help_text="New mention time ('' clears it)")
    fact_type = Choice(choices=CURATED_FACT_TYPES, required=False, null_as_absent=True,
                       help_text="Reclassify the fact: world or experience")
    entities = List(child=Text(), required=False, null_as_absent=True,
                    help_text="Replace the fact's entity names ([] detaches all)")
    resolve_entities = Boolean(required=False, default=True, null_as_absent=True,
                               help_text="Accepted: entities are kept as the names given")
    tags = tags_field(null_as_absent=True, help_text="Replace the memory's tags")
    metadata = Object(child=Text(allow_blank=True), required=False, null_as_absent=True,
                      help_text="Replace the memory's metadata (string values)")
    state = Choice(choices=MEMORY_STATES, required=False, null_as_absent=True,
                   help_text="'invalidated' moves the memory to the archive (recall and every "
                             "page's scope leave it out), 'valid' restores it")
    reason = Text(required=False, allow_blank=True, null_as_absent=True,
                  help_text="Why it was invalidated (recorded with the invalidation)")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        data.pop("resolve_entities", None)
        state, reason = data.pop("state", None), data.pop("reason", None)
        if not data and state is None:
            raise FieldError((), "provide at least one field to update")
        if "entities" in data:
            data["entities"] = list(dict.fromkeys(e.strip() for e in data["entities"]
                                                  if e.strip()))
        return {"edits": data, "state": state, "reason": reason}


# --- documents ---------------------------------------------------------------------------------


class DocumentListQuery(Query):
    q = _text("Case-insensitive substring of the document id or its text")
    tags = tags_field(help_text="Filter documents by tags")
    tags_match = tags_match_field(default="any_strict")
    time_field = Choice(choices=DOCUMENT_TIME_FIELDS, required=False,
                        help_text="Time axis to filter and order by (default updated_at)")
    start_date = DateTime(required=False, help_text="From this ISO date-time (inclusive)")
    end_date = DateTime(required=False, help_text="Until this ISO date-time (exclusive)")
    limit = limit_field(100, 1000, minimum=0)
    offset = offset_field()


class DocumentPageQuery(Query):
    """The chunks and the history of a document, a page at a time."""

    limit = limit_field(100, 1000)
    offset = offset_field()


class UpdateDocumentRequestSerializer(Body):
    """``PATCH …/documents/{id}``: new tags (also of its memories) and/or observation scopes;
    at least one."""

    component_name = "UpdateDocumentRequest"
    when_absent: ClassVar[Mapping[str, Any]] = {}

    tags = tags_field(null_as_absent=True, help_text="New tags of the document and its memories")
    observation_scopes = AnyJSON(required=False, null_as_absent=True,
                                 help_text="Kept in the retain parameters (reprocess uses them)")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if "tags" not in data and "observation_scopes" not in data:
            raise FieldError((), "at least one field (tags, observation_scopes) must be provided")
        return {"tags": data.get("tags"), "observation_scopes": data.get("observation_scopes")}
