"""The banks API's responses (upstream's component names) and the document of its own fields.

Responses: each response serializer is ``Rendered`` (``hindsight.infra.edge.serializers``): its declared
fields are both its OpenAPI shape and its renderer, in the declared order, compiled once per
class (a page renders up to 1,000 rows). The extensions tell drf-spectacular what the banks' own
request fields of ``hindsight.banks.serializers`` accept. Importing this module registers the
extensions (the views import it).
"""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from hindsight.banks import selectors
from hindsight.banks.models import Bank
from hindsight.banks.retaintypes import RetainQueued, RetainResult
from hindsight.banks.serializers import OBSERVATION_SCOPE_MODES
from hindsight.infra.edge.serializers import Rendered, computed, const, page_fields
from hindsight.infra.vocabulary import FACT_TYPES, MemoryState, iso

# --- request fields the serializers define by hand --------------------------------------------

_TAG_GROUP = {
    "type": "object",
    "description": "A tag-group node: a leaf {tags, match} or one of {and: [...]}, {or: [...]}, "
                   "{not: {...}}.",
    "additionalProperties": True,
}


class AnyJSONFieldExtension(OpenApiSerializerFieldExtension):
    """``tag_groups`` (recall) and config ``updates`` values: any JSON, checked by the service."""

    target_class = "hindsight.infra.edge.serializers.AnyJSON"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        if self.target.field_name == "tag_groups":
            return {"type": "array", "items": _TAG_GROUP, "nullable": True}
        return {}  # any JSON value


class ContentFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "hindsight.banks.serializers.ContentField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        text_block = {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["text"]},
                           "text": {"type": "string"}},
            "required": ["type", "text"],
            "additionalProperties": False,
        }
        return {
            "description": "The text to retain, or a list of text content blocks (other block "
                           "types are refused).",
            "oneOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": text_block}],
        }


class TimestampFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "hindsight.banks.serializers.TimestampField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "description": "ISO 8601 date-time of the event, 'unset' for none, or null for now.",
            "oneOf": [{"type": "string", "format": "date-time"},
                      {"type": "string", "enum": ["unset"]}],
            "nullable": True,
        }


class ObservationScopesFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "hindsight.banks.serializers.ObservationScopesField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {
            "oneOf": [
                {"type": "string", "enum": list(OBSERVATION_SCOPE_MODES)},
                {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
            ],
            "nullable": True,
        }


class TagScopeListFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "hindsight.banks.serializers.TagScopeListField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "array", "items": {"type": "string"}},
                "nullable": True}


# --- responses ---------------------------------------------------------------------------------
#
# Each shape is ``Rendered``: its declared fields document it and render it (``source``: where
# the value is read; ``const``: a field this service does not fill; ``computed``: a value made
# from the object). The views hand each one the object (or a dict) it reads.

Char, Int, Bool, Time = (serializers.CharField, serializers.IntegerField,
                         serializers.BooleanField, serializers.DateTimeField)


def _or_none(value: Any) -> Any:
    return value or None


class DispositionTraitsSerializer(Rendered):
    skepticism = Int(min_value=1, max_value=5)
    literalism = Int(min_value=1, max_value=5)
    empathy = Int(min_value=1, max_value=5)


def _disposition(bank: Bank) -> dict[str, int]:
    return selectors.bank_disposition(bank=bank)


def _mission(bank: Bank) -> str:
    return selectors.bank_mission(bank=bank)


class BankProfileResponseSerializer(Rendered):
    bank_id = Char(source="id")
    name = Char(allow_blank=True)
    disposition = computed(DispositionTraitsSerializer(), _disposition)
    mission = computed(Char(allow_blank=True), _mission)
    background = computed(Char(allow_null=True, allow_blank=True), _mission)


class BankListItemSerializer(Rendered):
    """One ``selectors.bank_list`` row (up to 1,000 a page): the bank and its counts."""

    bank_id = Char(source="bank.id")
    name = Char(allow_null=True, allow_blank=True, source="bank.name")
    disposition = computed(DispositionTraitsSerializer(), lambda row: _disposition(row["bank"]))
    mission = computed(Char(allow_null=True, allow_blank=True), lambda row: _mission(row["bank"]))
    created_at = Time(allow_null=True, source="bank.created_at")
    updated_at = Time(allow_null=True, source="bank.updated_at")
    fact_count = Int()
    last_document_at = Time(allow_null=True)
    last_write_at = Time(allow_null=True)
    display_alias = const(Char(allow_null=True), None)
    matched_aliases = computed(serializers.ListField(child=Char()), lambda row: [])


class BankListResponseSerializer(Rendered):
    banks = BankListItemSerializer(many=True)
    total, limit, offset = page_fields()


class DeleteResponseSerializer(Rendered):
    success = const(Bool(), True)
    message = computed(Char(allow_null=True),
                       lambda d: d.get("message") or f"Bank '{d['bank_id']}' deleted")
    deleted_count = Int(allow_null=True)


class BankConfigResponseSerializer(Rendered):
    """The resolved config (defaults, then the bank's overrides), and the overrides."""

    bank_id = Char(source="id")
    config = computed(serializers.DictField(child=serializers.JSONField()),
                      lambda bank: selectors.bank_config_resolved(bank=bank))
    overrides = computed(serializers.DictField(child=serializers.JSONField()),
                         lambda bank: dict(bank.config or {}))


def _counts() -> serializers.DictField:
    return serializers.DictField(child=Int())


class BankStatsResponseSerializer(Rendered):
    """``selectors.bank_stats``'s counts."""

    bank_id = Char()
    total_nodes = Int()
    total_links = Int()
    total_documents = Int()
    nodes_by_fact_type = _counts()
    links_by_link_type = _counts()
    links_by_fact_type = _counts()
    links_breakdown = serializers.DictField(child=_counts())
    pending_operations = Int()
    failed_operations = Int()
    operations_by_status = _counts()
    last_consolidated_at = Time(allow_null=True)
    last_memory_write_at = Time(allow_null=True)
    pending_consolidation = Int()
    failed_consolidation = Int()
    total_observations = Int()
    # Ours (hindsight.banks.budget): the tokens of the last 24 hours and the budget (null:
    # unlimited).
    llm_tokens_last_24h = Int()
    llm_token_budget_per_day = Int(allow_null=True)


class TokenUsageSerializer(Rendered):
    input_tokens = Int()
    output_tokens = Int()
    total_tokens = Int()
    cached_tokens = const(Int(required=False), 0)
    thoughts_tokens = const(Int(required=False), 0)


class RetainResponseSerializer(Rendered):
    success = const(Bool(), True)
    bank_id = Char()
    items_count = Int()
    operation_id = serializers.UUIDField(allow_null=True)
    operation_ids = serializers.ListField(child=serializers.UUIDField(), allow_null=True)
    usage = TokenUsageSerializer(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``async`` is a Python keyword: declared by name, fourth (where upstream puts it).
        fields = list(super().get_fields().items())
        fields.insert(3, ("async", Bool()))
        return dict(fields)

    @classmethod
    def render_sync(cls, result: RetainResult) -> dict[str, Any]:
        """A retain done in the request: its items stored, the LLM tokens it used."""
        return cls.render(result, **{"async": False, "operation_id": None,
                                     "operation_ids": None})

    @classmethod
    def render_async(cls, queued: RetainQueued) -> dict[str, Any]:
        """A retain queued: the operation that will run it; one the budget parked also says
        why and until when (``parked``, a key upstream does not send)."""
        body = cls.render({"bank_id": queued.bank_id, "items_count": queued.items_count,
                           "operation_id": queued.operation_id,
                           "operation_ids": [queued.operation_id], "usage": None},
                          **{"async": True})
        if queued.parked is not None:
            body["parked"] = queued.parked
        return body


class RecallScoresSerializer(Rendered):
    final = serializers.FloatField(source="score")
    reranker = const(serializers.FloatField(allow_null=True), None)
    semantic = serializers.FloatField(allow_null=True)
    keyword = serializers.FloatField(allow_null=True)


class RecallResultSerializer(Rendered):
    """One hit (a recall renders every hit of its token budget)."""

    id = Char()
    text = Char()
    type = Char(allow_null=True, source="fact_type")
    entities = computed(serializers.ListField(child=Char(), allow_null=True),
                        lambda hit: hit.entities or None)
    context = computed(Char(allow_null=True), lambda hit: hit.context or None)  # type: ignore[assignment]  # a wire field named like Field.context
    occurred_start = Time(allow_null=True)
    occurred_end = Time(allow_null=True)
    mentioned_at = Time(allow_null=True)
    document_id = Char(allow_null=True)
    metadata = computed(serializers.DictField(child=Char(), allow_null=True),
                        lambda hit: hit.metadata or None)
    chunk_id = const(Char(allow_null=True), None)
    tags = serializers.ListField(child=Char(), allow_null=True)
    source_fact_ids = computed(serializers.ListField(child=Char(), allow_null=True),
                               lambda hit: hit.source_memory_ids or None)
    scores = RecallScoresSerializer(allow_null=True, source="*")


class RecallResponseSerializer(Rendered):
    results = RecallResultSerializer(many=True)
    trace = serializers.DictField(allow_null=True, help_text="Present when trace=true was sent.")
    entities = const(serializers.DictField(allow_null=True), None)
    chunks = const(serializers.DictField(allow_null=True), None)
    source_facts = const(serializers.DictField(allow_null=True), None)
    source_facts_truncated = const(Bool(allow_null=True), None)


def _state(memory: Any) -> str:
    """A live memory is valid; an archived one says it is not (``InvalidatedMemoryUnit.state``)."""
    return getattr(memory, "state", MemoryState.VALID)


class MemoryUnitListItemSerializer(Rendered):
    """One memory of a page (up to 1,000)."""

    id = computed(Char(), lambda m: str(m.id))
    text = Char()
    context = Char(allow_blank=True)  # type: ignore[assignment]  # a wire field
    date = computed(Char(allow_blank=True),
                    lambda m: iso(m.occurred_start or m.mentioned_at) or "")
    fact_type = serializers.ChoiceField(choices=FACT_TYPES)
    document_id = Char(allow_null=True)
    mentioned_at = Time(allow_null=True)
    occurred_start = Time(allow_null=True)
    occurred_end = Time(allow_null=True)
    entities = computed(Char(allow_blank=True), lambda m: ", ".join(m.entities))
    chunk_id = const(Char(allow_null=True), None)
    proof_count = const(Int(), 1)
    tags = serializers.ListField(child=Char())
    metadata = computed(serializers.DictField(child=Char()), lambda m: dict(m.metadata or {}))
    consolidated_at = Time(allow_null=True)
    consolidation_failed_at = const(Time(allow_null=True), None)
    state = computed(Char(), _state)
    invalidation_reason = computed(Char(allow_null=True),
                                   lambda m: getattr(m, "invalidation_reason", None))
    invalidated_at = computed(Time(allow_null=True), lambda m: getattr(m, "invalidated_at", None))
    edited_at = Time(allow_null=True)
    updated_at = Time(allow_null=True)
    source_memory_ids = computed(serializers.ListField(child=Char()),
                                 lambda m: [str(s) for s in m.source_memory_ids])


class ListMemoryUnitsResponseSerializer(Rendered):
    items = MemoryUnitListItemSerializer(many=True)
    total, limit, offset = page_fields()


class SourceMemorySerializer(Rendered):
    """One memory an observation was built from."""

    id = computed(Char(), lambda m: str(m.id))
    text = Char()
    type = Char(source="fact_type")
    context = Char(allow_blank=True)  # type: ignore[assignment]  # a wire field
    occurred_start = Time(allow_null=True)
    mentioned_at = Time(allow_null=True)


class MemoryDetailSerializer(Rendered):
    """``GET``/``PATCH …/memories/{id}``: one memory, live or invalidated, in upstream's detail
    shape (its keys always present: ``history`` is always empty, as upstream's is; the memory's
    history is ``…/history``)."""

    id = computed(Char(), lambda d: str(d["memory"].id))
    text = Char(source="memory.text")
    context = Char(allow_blank=True, source="memory.context")  # type: ignore[assignment]  # a wire field
    date = computed(Char(allow_blank=True),
                    lambda d: iso(d["memory"].occurred_start or d["memory"].mentioned_at) or "")
    type = Char(source="memory.fact_type")
    mentioned_at = Time(allow_null=True, source="memory.mentioned_at")
    occurred_start = Time(allow_null=True, source="memory.occurred_start")
    occurred_end = Time(allow_null=True, source="memory.occurred_end")
    entities = serializers.ListField(child=Char(), source="memory.entities")
    document_id = Char(allow_null=True, source="memory.document_id")
    chunk_id = const(Char(allow_null=True), None)
    tags = serializers.ListField(child=Char(), source="memory.tags")
    metadata = computed(serializers.DictField(child=Char()),
                        lambda d: dict(d["memory"].metadata or {}))
    observation_scopes = const(Char(allow_null=True), None)
    state = computed(Char(), lambda d: _state(d["memory"]))
    invalidation_reason = computed(Char(allow_null=True),
                                   lambda d: getattr(d["memory"], "invalidation_reason", None))
    invalidated_at = computed(Time(allow_null=True),
                              lambda d: getattr(d["memory"], "invalidated_at", None))
    edited_at = Time(allow_null=True, source="memory.edited_at")
    consolidated_at = Time(allow_null=True, source="memory.consolidated_at")
    consolidation_failed_at = const(Time(allow_null=True), None)
    updated_at = Time(allow_null=True, source="memory.updated_at")
    history = computed(serializers.ListField(child=Char()), lambda d: [])
    source_memory_ids = computed(serializers.ListField(child=Char()),
                                 lambda d: [str(s) for s in d["memory"].source_memory_ids])
    source_memories = SourceMemorySerializer(many=True, source="sources")


class MemoryHistoryEntrySerializer(Rendered):
    """One curation change of a memory, oldest first: what the memory was before it (upstream's
    observation-history entry), with the change's ``kind`` and ``reason``."""

    previous_text = computed(Char(allow_null=True), lambda c: c.previous.get("text"))
    previous_tags = computed(serializers.ListField(child=Char()),
                             lambda c: list(c.previous.get("tags") or []))
    previous_occurred_start = computed(Char(allow_null=True),
                                       lambda c: c.previous.get("occurred_start"))
    previous_occurred_end = computed(Char(allow_null=True),
                                     lambda c: c.previous.get("occurred_end"))
    previous_mentioned_at = computed(Char(allow_null=True),
                                     lambda c: c.previous.get("mentioned_at"))
    changed_at = Time()
    new_source_memory_ids = computed(serializers.ListField(child=Char()), lambda c: [])
    source_facts = computed(serializers.ListField(child=Char()), lambda c: [])
    kind = Char()
    reason = Char(allow_null=True)


class ClearMemoryObservationsResponseSerializer(Rendered):
    deleted_count = Int()


class TagItemSerializer(Rendered):
    """One ``(tag, count)`` pair."""

    tag = computed(Char(), lambda pair: pair[0])
    count = computed(Int(), lambda pair: pair[1])


class ListTagsResponseSerializer(Rendered):
    """A page of tags, most used first."""

    items = TagItemSerializer(many=True)
    total, limit, offset = page_fields()


# --- consolidation and the LLM request log -----------------------------------------------------


class ConsolidationResponseSerializer(Rendered):
    operation_id = Char()
    deduplicated = Bool()


def _logged_json(text: str, truncated: bool) -> Any:
    """A logged prompt or response: its JSON decoded, else (cut or not JSON) the text as stored."""
    if not text:
        return None
    if truncated:
        return text  # cut JSON is not JSON any more
    try:
        return json.loads(text)
    except ValueError:
        return text


class LLMRequestEntrySerializer(Rendered):
    """One logged request; an operation run is one trace, each request a span of it."""

    id = computed(Char(), lambda row: str(row.id))
    bank_id = Char(allow_null=True)
    operation = Char(allow_null=True)
    scope = computed(Char(allow_null=True), lambda row: row.scope or None)
    trace_id = computed(Char(allow_null=True),
                        lambda row: str(row.operation_id) if row.operation_id else None)
    span_id = computed(Char(allow_null=True), lambda row: str(row.id))
    parent_span_id = const(Char(allow_null=True), None)
    provider = Char(allow_null=True)
    model = computed(Char(allow_null=True), lambda row: row.model or None)
    status = Char()
    started_at = computed(Char(allow_null=True), lambda row: iso(row.started_at))
    ended_at = computed(Char(allow_null=True), lambda row: iso(row.ended_at))
    duration_ms = Int(allow_null=True)
    input_tokens = Int(allow_null=True)
    output_tokens = Int(allow_null=True)
    cached_tokens = const(Int(allow_null=True), 0)
    thoughts_tokens = const(Int(allow_null=True), None)
    total_tokens = Int(allow_null=True)
    input = computed(serializers.JSONField(allow_null=True),
                     lambda row: _logged_json(row.prompt, row.truncated))
    output = computed(serializers.JSONField(allow_null=True),
                      lambda row: _logged_json(row.response, row.truncated))
    error = Char(allow_null=True)
    # A structured request also says which structured-output step it used (json_schema,
    # json_object, prompt): how far down the server's refusals took it.
    llm_info = computed(serializers.DictField(), lambda row: {
        "kind": row.kind, "attempt": row.attempt,
        **({"structured_step": row.structured_step} if row.structured_step else {})})
    metadata = computed(serializers.DictField(), lambda row: {"truncated": row.truncated})


class LLMRequestListResponseSerializer(Rendered):
    bank_id = Char()
    total, limit, offset = page_fields()
    items = LLMRequestEntrySerializer(many=True)


class LLMRequestTokenSumsSerializer(Rendered):
    """One ``llm_requests_stats`` row's token sums."""

    input = Int()
    output = Int()
    cached = const(Int(), 0)
    thoughts = const(Int(allow_null=True), None)
    total = computed(Int(), lambda row: row["input"] + row["output"])


class LLMRequestStatsBucketSerializer(Rendered):
    """One ``llm_requests_stats`` row: counts and token sums of a time bucket."""

    time = computed(Char(), lambda row: iso(row["bucket"]))
    statuses = computed(serializers.DictField(child=Int()),
                        lambda row: {k: row[k] for k in ("success", "error") if row[k]})
    total = Int()
    tokens = LLMRequestTokenSumsSerializer(source="*")


class LLMRequestStatsResponseSerializer(Rendered):
    bank_id = Char()
    period = Char()
    trunc = Char()
    start = computed(Char(), lambda stats: iso(stats["start"]))
    buckets = LLMRequestStatsBucketSerializer(many=True)


# --- documents (docs/behaviour.md#documents) ---------------------------------------------------


class DocumentListItemSerializer(Rendered):
    """One document of a page, without its text."""

    id = Char(source="document_id")
    bank_id = Char()
    content_hash = computed(Char(allow_null=True), lambda d: d.content_hash or None)
    created_at = computed(Char(), lambda d: iso(d.created_at) or "")
    updated_at = computed(Char(), lambda d: iso(d.updated_at) or "")
    text_length = computed(Int(), lambda d: len(d.original_text))
    memory_unit_count = Int()
    retain_params = computed(serializers.DictField(allow_null=True),
                             lambda d: d.retain_params or None)
    document_metadata = computed(serializers.DictField(allow_null=True),
                                 lambda d: d.metadata or None)
    tags = serializers.ListField(child=Char())
    matched_fields = computed(serializers.ListField(child=Char()), lambda d: [])


class ListDocumentsResponseSerializer(Rendered):
    items = DocumentListItemSerializer(many=True)
    total, limit, offset = page_fields()
    total_is_estimate = const(Bool(), False)


class DocumentResponseSerializer(Rendered):
    """``GET …/documents/{id}``: the document, its text and its facts per type."""

    id = Char(source="document_id")
    bank_id = Char()
    original_text = computed(Char(allow_null=True), lambda d: d.original_text if d.chunks else None)
    content_hash = computed(Char(allow_null=True), lambda d: d.content_hash or None)
    created_at = computed(Char(), lambda d: iso(d.created_at) or "")
    updated_at = computed(Char(), lambda d: iso(d.updated_at) or "")
    memory_unit_count = Int()
    nodes_by_fact_type = serializers.DictField(child=Int())
    tags = serializers.ListField(child=Char())
    document_metadata = computed(serializers.DictField(allow_null=True),
                                 lambda d: d.metadata or None)
    retain_params = computed(serializers.DictField(allow_null=True),
                             lambda d: d.retain_params or None)
    observation_scopes = computed(serializers.JSONField(allow_null=True),
                                  lambda d: (d.retain_params or {}).get("observation_scopes"))
    attachments = computed(serializers.ListField(child=Char()), lambda d: [])


class ChunkResponseSerializer(Rendered):
    """One chunk: the text of one retain item of the document (a dict the view builds)."""

    chunk_id = Char()
    document_id = Char()
    bank_id = Char()
    chunk_index = Int()
    chunk_text = Char(allow_blank=True)
    created_at = Char(allow_blank=True)
    attachments = computed(serializers.ListField(child=Char()), lambda d: [])


class ListChunksResponseSerializer(Rendered):
    items = ChunkResponseSerializer(many=True)
    total, limit, offset = page_fields()


class DeleteDocumentResponseSerializer(Rendered):
    success = const(Bool(), True)
    message = computed(Char(), lambda d: f"Document '{d['document_id']}' and "
                                         f"{d['memory_units_deleted']} associated memory units "
                                         "deleted successfully")
    document_id = Char()
    memory_units_deleted = Int()


class UpdateDocumentResponseSerializer(Rendered):
    success = const(Bool(), True)


class ReprocessDocumentResponseSerializer(Rendered):
    success = const(Bool(), True)
    operation_id = Char()
    items_count = Int()


class ObservationIdSampleSerializer(Rendered):
    count = Int()
    ids = serializers.ListField(child=Char())


class DocumentEventSerializer(Rendered):
    """One change of the document (upstream's event kinds); observation samples are not
    kept here (null)."""

    document_id = Char()
    kind = Char()
    created_at = Char(allow_null=True)
    operation_id = computed(Char(allow_null=True), lambda e: e.get("operation_id"))
    fact_id = computed(Char(allow_null=True), lambda e: e.get("fact_id"))
    facts_added = computed(Int(), lambda e: e.get("facts_added") or 0)
    facts_removed = computed(Int(), lambda e: e.get("facts_removed") or 0)
    observations_created = const(ObservationIdSampleSerializer(allow_null=True), None)
    observations_updated = const(ObservationIdSampleSerializer(allow_null=True), None)
    observations_removed = const(ObservationIdSampleSerializer(allow_null=True), None)


class DocumentHistoryResponseSerializer(Rendered):
    document_id = Char()
    total, limit, offset = page_fields()
    items = DocumentEventSerializer(many=True)
