"""The banks API's responses (upstream's component names), query parameters, custom fields.

Responses: each response serializer declares its shape (for the OpenAPI document) and renders
it (``render``), building the dict directly in the declared order — no per-field
``to_representation`` on a page of up to 1,000 rows or a recall's hits. ``tests/banks/
test_response_shapes.py`` holds the rendered keys to the declared fields. The extensions tell
drf-spectacular what the hand-written request fields of ``hindsight.banks.serializers`` accept.
Importing this module registers the extensions (the views import it).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from hindsight.banks import selectors
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.recall import RecallHit
from hindsight.banks.retaintypes import RetainResult, Usage
from hindsight.banks.serializers import MEMORY_FACT_TYPES, OBSERVATION_SCOPE_MODES
from hindsight.llm.models import LLMRequest

# --- request fields the serializers define by hand --------------------------------------------

_TAG_GROUP = {
    "type": "object",
    "description": "A tag-group node: a leaf {tags, match} or one of {and: [...]}, {or: [...]}, "
                   "{not: {...}}.",
    "additionalProperties": True,
}


class AnyJSONFieldExtension(OpenApiSerializerFieldExtension):
    """``tag_groups`` (recall) and config ``updates`` values: any JSON, checked by the service."""

    target_class = "hindsight.api.serializers.AnyJSON"

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


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class DispositionTraitsSerializer(serializers.Serializer):
    skepticism = serializers.IntegerField(min_value=1, max_value=5)
    literalism = serializers.IntegerField(min_value=1, max_value=5)
    empathy = serializers.IntegerField(min_value=1, max_value=5)


class BankProfileResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    disposition = DispositionTraitsSerializer()
    mission = serializers.CharField(allow_blank=True)
    background = serializers.CharField(allow_null=True, allow_blank=True)

    @staticmethod
    def render(bank: Bank) -> dict[str, Any]:
        mission = selectors.bank_mission(bank=bank)
        return {
            "bank_id": bank.id,
            "name": bank.name,
            "disposition": selectors.bank_disposition(bank=bank),
            "mission": mission,
            "background": mission,
        }


class BankListItemSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    name = serializers.CharField(allow_null=True, allow_blank=True)
    disposition = DispositionTraitsSerializer()
    mission = serializers.CharField(allow_null=True, allow_blank=True)
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    fact_count = serializers.IntegerField()
    last_document_at = serializers.DateTimeField(allow_null=True)
    last_write_at = serializers.DateTimeField(allow_null=True)
    display_alias = serializers.CharField(allow_null=True)
    matched_aliases = serializers.ListField(child=serializers.CharField())

    @staticmethod
    def render(row: dict[str, Any]) -> dict[str, Any]:
        """One ``selectors.bank_list`` row (up to 1,000 a page)."""
        bank = row["bank"]
        return {
            "bank_id": bank.id,
            "name": bank.name,
            "disposition": selectors.bank_disposition(bank=bank),
            "mission": selectors.bank_mission(bank=bank),
            "created_at": iso(bank.created_at),
            "updated_at": iso(bank.updated_at),
            "fact_count": row["fact_count"],
            "last_document_at": iso(row["last_document_at"]),
            "last_write_at": iso(row["last_write_at"]),
            "display_alias": None,
            "matched_aliases": [],
        }


class BankListResponseSerializer(serializers.Serializer):
    banks = BankListItemSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()

    @staticmethod
    def render(rows: list[dict[str, Any]], *, total: int, limit: int,
               offset: int) -> dict[str, Any]:
        render = BankListItemSerializer.render
        return {"banks": [render(row) for row in rows], "total": total, "limit": limit,
                "offset": offset}


class DeleteResponseSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    message = serializers.CharField(allow_null=True)
    deleted_count = serializers.IntegerField(allow_null=True)

    @staticmethod
    def render(bank_id: str, deleted_count: int) -> dict[str, Any]:
        return {"success": True, "message": f"Bank '{bank_id}' deleted",
                "deleted_count": deleted_count}


class BankConfigResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    config = serializers.DictField(child=serializers.JSONField())
    overrides = serializers.DictField(child=serializers.JSONField())

    @staticmethod
    def render(bank: Bank) -> dict[str, Any]:
        """The resolved config (defaults, then the bank's overrides), and the overrides."""
        return {"bank_id": bank.id, "config": selectors.bank_config_resolved(bank=bank),
                "overrides": dict(bank.config or {})}


class BankStatsResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    total_nodes = serializers.IntegerField()
    total_links = serializers.IntegerField()
    total_documents = serializers.IntegerField()
    nodes_by_fact_type = serializers.DictField(child=serializers.IntegerField())
    links_by_link_type = serializers.DictField(child=serializers.IntegerField())
    links_by_fact_type = serializers.DictField(child=serializers.IntegerField())
    links_breakdown = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField())
    )
    pending_operations = serializers.IntegerField()
    failed_operations = serializers.IntegerField()
    operations_by_status = serializers.DictField(child=serializers.IntegerField())
    last_consolidated_at = serializers.DateTimeField(allow_null=True)
    last_memory_write_at = serializers.DateTimeField(allow_null=True)
    pending_consolidation = serializers.IntegerField()
    failed_consolidation = serializers.IntegerField()
    total_observations = serializers.IntegerField()
    # Ours (hindsight.banks.budget): the tokens of the last 24 hours and the budget (null:
    # unlimited).
    llm_tokens_last_24h = serializers.IntegerField()
    llm_token_budget_per_day = serializers.IntegerField(allow_null=True)

    @staticmethod
    def render(stats: dict[str, Any]) -> dict[str, Any]:
        """``selectors.bank_stats``'s counts."""
        return {
            "bank_id": stats["bank_id"],
            "total_nodes": stats["total_nodes"],
            "total_links": stats["total_links"],
            "total_documents": stats["total_documents"],
            "nodes_by_fact_type": stats["nodes_by_fact_type"],
            "links_by_link_type": stats["links_by_link_type"],
            "links_by_fact_type": stats["links_by_fact_type"],
            "links_breakdown": stats["links_breakdown"],
            "pending_operations": stats["pending_operations"],
            "failed_operations": stats["failed_operations"],
            "operations_by_status": stats["operations_by_status"],
            "last_consolidated_at": iso(stats["last_consolidated_at"]),
            "last_memory_write_at": iso(stats["last_memory_write_at"]),
            "pending_consolidation": stats["pending_consolidation"],
            "failed_consolidation": stats["failed_consolidation"],
            "total_observations": stats["total_observations"],
            "llm_tokens_last_24h": stats["llm_tokens_last_24h"],
            "llm_token_budget_per_day": stats["llm_token_budget_per_day"],
        }


class TokenUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField(required=False)
    thoughts_tokens = serializers.IntegerField(required=False)

    @staticmethod
    def render(usage: Usage) -> dict[str, int]:
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "cached_tokens": 0,
            "thoughts_tokens": 0,
        }


class RetainResponseSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    bank_id = serializers.CharField()
    items_count = serializers.IntegerField()
    operation_id = serializers.UUIDField(allow_null=True)
    operation_ids = serializers.ListField(child=serializers.UUIDField(), allow_null=True)
    usage = TokenUsageSerializer(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``async`` is a Python keyword: declared by name, after the class's fields in the
        # document, but rendered fourth (where upstream puts it).
        fields = super().get_fields()
        fields["async"] = serializers.BooleanField()
        return fields

    @staticmethod
    def render_sync(result: RetainResult) -> dict[str, Any]:
        """A retain done in the request: its items stored, the LLM tokens it used."""
        return {"success": True, "bank_id": result.bank_id, "items_count": result.items_count,
                "async": False, "operation_id": None, "operation_ids": None,
                "usage": TokenUsageSerializer.render(result.usage)}

    @staticmethod
    def render_async(bank_id: str, *, items_count: int, operation_id: str) -> dict[str, Any]:
        """A retain queued: the operation that will run it."""
        return {"success": True, "bank_id": bank_id, "items_count": items_count, "async": True,
                "operation_id": operation_id, "operation_ids": [operation_id], "usage": None}


class RecallScoresSerializer(serializers.Serializer):
    final = serializers.FloatField()
    reranker = serializers.FloatField(allow_null=True)
    semantic = serializers.FloatField(allow_null=True)
    keyword = serializers.FloatField(allow_null=True)


class RecallResultSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField()
    type = serializers.CharField(allow_null=True)
    entities = serializers.ListField(child=serializers.CharField(), allow_null=True)
    context = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # a wire field named like Field.context
    occurred_start = serializers.DateTimeField(allow_null=True)
    occurred_end = serializers.DateTimeField(allow_null=True)
    mentioned_at = serializers.DateTimeField(allow_null=True)
    document_id = serializers.CharField(allow_null=True)
    metadata = serializers.DictField(child=serializers.CharField(), allow_null=True)
    chunk_id = serializers.CharField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), allow_null=True)
    source_fact_ids = serializers.ListField(child=serializers.CharField(), allow_null=True)
    scores = RecallScoresSerializer(allow_null=True)

    @staticmethod
    def render(hit: RecallHit) -> dict[str, Any]:
        """One hit, with its scores (``RecallScoresSerializer``'s fields, inlined: a recall
        renders every hit of its token budget)."""
        return {
            "id": hit.id,
            "text": hit.text,
            "type": hit.fact_type,
            "entities": hit.entities or None,
            "context": hit.context or None,
            "occurred_start": hit.occurred_start.isoformat() if hit.occurred_start else None,
            "occurred_end": hit.occurred_end.isoformat() if hit.occurred_end else None,
            "mentioned_at": hit.mentioned_at.isoformat() if hit.mentioned_at else None,
            "document_id": hit.document_id,
            "metadata": hit.metadata or None,
            "chunk_id": None,
            "tags": hit.tags,
            "source_fact_ids": hit.source_memory_ids or None,
            "scores": {"final": hit.score, "reranker": None, "semantic": hit.semantic,
                       "keyword": hit.keyword},
        }


class RecallResponseSerializer(serializers.Serializer):
    results = RecallResultSerializer(many=True)
    trace = serializers.DictField(allow_null=True, help_text="Present when trace=true was sent.")
    entities = serializers.DictField(allow_null=True)
    chunks = serializers.DictField(allow_null=True)
    source_facts = serializers.DictField(allow_null=True)
    source_facts_truncated = serializers.BooleanField(allow_null=True)

    @staticmethod
    def render(hits: list[RecallHit], *, trace: dict[str, Any] | None = None) -> dict[str, Any]:
        render = RecallResultSerializer.render
        return {
            "results": [render(hit) for hit in hits],
            "trace": trace,
            "entities": None,
            "chunks": None,
            "source_facts": None,
            "source_facts_truncated": None,
        }


class MemoryUnitListItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField()
    context = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # a wire field
    date = serializers.CharField(allow_blank=True)
    fact_type = serializers.ChoiceField(choices=MEMORY_FACT_TYPES)
    document_id = serializers.CharField(allow_null=True)
    mentioned_at = serializers.DateTimeField(allow_null=True)
    occurred_start = serializers.DateTimeField(allow_null=True)
    occurred_end = serializers.DateTimeField(allow_null=True)
    entities = serializers.CharField(allow_blank=True)
    chunk_id = serializers.CharField(allow_null=True)
    proof_count = serializers.IntegerField()
    tags = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField(child=serializers.CharField())
    consolidated_at = serializers.DateTimeField(allow_null=True)
    consolidation_failed_at = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField()
    invalidation_reason = serializers.CharField(allow_null=True)
    invalidated_at = serializers.DateTimeField(allow_null=True)
    edited_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    source_memory_ids = serializers.ListField(child=serializers.CharField())

    @staticmethod
    def render(m: MemoryUnit) -> dict[str, Any]:
        """One memory of a page (up to 1,000)."""
        event = m.occurred_start or m.mentioned_at
        return {
            "id": str(m.id),
            "text": m.text,
            "context": m.context,
            "date": iso(event) or "",
            "fact_type": m.fact_type,
            "document_id": m.document_id,
            "mentioned_at": iso(m.mentioned_at),
            "occurred_start": iso(m.occurred_start),
            "occurred_end": iso(m.occurred_end),
            "entities": ", ".join(m.entities),
            "chunk_id": None,
            "proof_count": 1,
            "tags": list(m.tags),
            "metadata": dict(m.metadata or {}),
            "consolidated_at": iso(m.consolidated_at),
            "consolidation_failed_at": None,
            "state": "valid",
            "invalidation_reason": None,
            "invalidated_at": None,
            "edited_at": None,
            "updated_at": iso(m.updated_at),
            "source_memory_ids": [str(s) for s in m.source_memory_ids],
        }


class ListMemoryUnitsResponseSerializer(serializers.Serializer):
    items = MemoryUnitListItemSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()

    @staticmethod
    def render(page: list[MemoryUnit], *, total: int, limit: int, offset: int) -> dict[str, Any]:
        render = MemoryUnitListItemSerializer.render
        return {"items": [render(m) for m in page], "total": total, "limit": limit,
                "offset": offset}


class TagItemSerializer(serializers.Serializer):
    tag = serializers.CharField()
    count = serializers.IntegerField()


class ListTagsResponseSerializer(serializers.Serializer):
    items = TagItemSerializer(many=True)
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()

    @staticmethod
    def render(counts: list[tuple[str, int]], *, total: int, limit: int,
               offset: int) -> dict[str, Any]:
        """A page of ``(tag, count)`` pairs, most used first."""
        return {"items": [{"tag": tag, "count": n} for tag, n in counts], "total": total,
                "limit": limit, "offset": offset}


# --- consolidation and the LLM request log -----------------------------------------------------


class ConsolidationResponseSerializer(serializers.Serializer):
    operation_id = serializers.CharField()
    deduplicated = serializers.BooleanField()

    @staticmethod
    def render(operation_id: str, *, deduplicated: bool) -> dict[str, Any]:
        return {"operation_id": operation_id, "deduplicated": deduplicated}


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


class LLMRequestEntrySerializer(serializers.Serializer):
    id = serializers.CharField()
    bank_id = serializers.CharField(allow_null=True)
    operation = serializers.CharField(allow_null=True)
    scope = serializers.CharField(allow_null=True)
    trace_id = serializers.CharField(allow_null=True)
    span_id = serializers.CharField(allow_null=True)
    parent_span_id = serializers.CharField(allow_null=True)
    provider = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    started_at = serializers.CharField(allow_null=True)
    ended_at = serializers.CharField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    cached_tokens = serializers.IntegerField(allow_null=True)
    thoughts_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)
    input = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    llm_info = serializers.DictField()
    metadata = serializers.DictField()

    @staticmethod
    def render(row: LLMRequest) -> dict[str, Any]:
        """One logged request; an operation run is one trace, each request a span of it."""
        return {
            "id": str(row.id),
            "bank_id": row.bank_id,
            "operation": row.operation,
            "scope": row.scope or None,
            "trace_id": str(row.operation_id) if row.operation_id else None,
            "span_id": str(row.id),
            "parent_span_id": None,
            "provider": row.provider,
            "model": row.model or None,
            "status": row.status,
            "started_at": row.started_at.isoformat(),
            "ended_at": row.ended_at.isoformat() if row.ended_at else None,
            "duration_ms": row.duration_ms,
            "input_tokens": row.input_tokens,
            "output_tokens": row.output_tokens,
            "cached_tokens": 0,
            "thoughts_tokens": None,
            "total_tokens": row.total_tokens,
            "input": _logged_json(row.prompt, row.truncated),
            "output": _logged_json(row.response, row.truncated),
            "error": row.error,
            "llm_info": {"kind": row.kind, "attempt": row.attempt},
            "metadata": {"truncated": row.truncated},
        }


class LLMRequestListResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    items = LLMRequestEntrySerializer(many=True)

    @staticmethod
    def render(bank_id: str, rows: list[LLMRequest], *, total: int, limit: int,
               offset: int) -> dict[str, Any]:
        render = LLMRequestEntrySerializer.render
        return {"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
                "items": [render(row) for row in rows]}


class LLMRequestTokenSumsSerializer(serializers.Serializer):
    input = serializers.IntegerField()
    output = serializers.IntegerField()
    cached = serializers.IntegerField()
    thoughts = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField()


class LLMRequestStatsBucketSerializer(serializers.Serializer):
    time = serializers.CharField()
    statuses = serializers.DictField(child=serializers.IntegerField())
    total = serializers.IntegerField()
    tokens = LLMRequestTokenSumsSerializer()


class LLMRequestStatsResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    period = serializers.CharField()
    trunc = serializers.CharField()
    start = serializers.CharField()
    buckets = LLMRequestStatsBucketSerializer(many=True)

    @staticmethod
    def render(bank_id: str, *, period: str, trunc: str, start: datetime,
               buckets: list[dict[str, Any]]) -> dict[str, Any]:
        """``buckets``: ``llm_requests_stats``'s rows (counts and token sums per bucket)."""
        return {
            "bank_id": bank_id,
            "period": period,
            "trunc": trunc,
            "start": start.isoformat(),
            "buckets": [
                {
                    "time": row["bucket"].isoformat(),
                    "statuses": {k: v for k, v in (("success", row["success"]),
                                                    ("error", row["error"])) if v},
                    "total": row["total"],
                    "tokens": {"input": row["input"], "output": row["output"], "cached": 0,
                               "thoughts": None, "total": row["input"] + row["output"]},
                }
                for row in buckets
            ],
        }
