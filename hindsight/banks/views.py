"""HTTP edge of the banks app (upstream's v1 wire format): parse, call one service/selector, and
answer what the response serializer renders (``hindsight.banks.schema``: each shape in one place)."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.banks import curation, documents, schema, selectors, services
from hindsight.banks.documentrows import chunk_id, chunk_id_parse
from hindsight.banks.models import Document, InvalidatedMemoryUnit, MemoryUnit
from hindsight.banks.recall import RecallFloors, RecallHit, memory_recall
from hindsight.banks.retaintypes import RetainQueued
from hindsight.banks.serializers import (
    BankConfigUpdateSerializer,
    BankListQuery,
    BankStatsQuery,
    BankWriteSerializer,
    ConsolidationRequestSerializer,
    DispositionUpdateSerializer,
    DocumentListQuery,
    DocumentPageQuery,
    LLMRequestListQuery,
    LLMRequestStatsQuery,
    MemoryClearQuery,
    MemoryListQuery,
    RecallRequestSerializer,
    RetainRequestSerializer,
    TagListQuery,
    UpdateDocumentRequestSerializer,
    UpdateMemoryRequestSerializer,
)
from hindsight.banks.tags import tags_list
from hindsight.infra.edge.schema import errors as api_errors
from hindsight.infra.edge.schema import query_parameters
from hindsight.infra.edge.serializers import body_of
from hindsight.infra.embeddings import EmbeddingError
from hindsight.infra.errors import NotFound
from hindsight.infra.llm.context import llm_context
from hindsight.infra.llm.models import LLMRequest
from hindsight.infra.llm.selectors import (
    LLMRequestFilters,
    llm_requests_list,
    llm_requests_stats,
)
from hindsight.infra.tagscope import TagScope
from hindsight.infra.vocabulary import EXTRACTED_FACT_TYPES, FactType, iso


def _doc(operation_id: str, *, response: Any, request: Any = None, query: Any = None,
         errors: tuple[int, ...] = (404, 422)) -> Any:
    """OpenAPI metadata with upstream's operation ids: the request part serializers
    (``hindsight.banks.serializers``) and the response one (``hindsight.banks.schema``) that
    parse and render the call document it."""
    return extend_schema(
        operation_id=operation_id,
        request=request,
        responses={200: response, **api_errors(*errors)},
        parameters=query_parameters(query) if query is not None else [],
    )


class BankListView(APIView):
    @_doc("list_banks", response=schema.BankListResponseSerializer,
          query=BankListQuery, errors=(422,))
    def get(self, request: Request) -> Response:
        query = BankListQuery.parse(request.query_params)
        rows, total = selectors.bank_list(q=query.get("q"), limit=query["limit"],
                                          offset=query["offset"])
        return Response(schema.BankListResponseSerializer.render(
            {"banks": rows, "total": total, "limit": query["limit"], "offset": query["offset"]}))


def _profile(bank_id: str) -> Response:
    return Response(schema.BankProfileResponseSerializer.render(selectors.bank_get(bank_id=bank_id)))


class BankView(APIView):
    @_doc("get_bank", response=schema.BankProfileResponseSerializer, errors=(404,))
    def get(self, request: Request, bank_id: str) -> Response:
        return _profile(bank_id)

    @_doc("create_or_update_bank", request=BankWriteSerializer,
          response=schema.BankProfileResponseSerializer, errors=(422,))
    def put(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        data = BankWriteSerializer.parse(body_of(request))
        bank = services.bank_upsert(bank_id=bank_id, data=data)
        return Response(schema.BankProfileResponseSerializer.render(bank))

    @_doc("update_bank", request=BankWriteSerializer,
          response=schema.BankProfileResponseSerializer, errors=(422,))
    def patch(self, request: Request, bank_id: str) -> Response:
        return self.put(request, bank_id)

    @_doc("delete_bank", response=schema.DeleteResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str) -> Response:
        deleted = services.bank_delete(bank_id=bank_id)
        return Response(schema.DeleteResponseSerializer.render(
            {"bank_id": bank_id, "deleted_count": deleted}))


class BankProfileView(APIView):
    """``…/profile``: upstream's profile routes (the client's ``get_bank_profile`` and
    ``update_bank_disposition``); the same body as ``GET …/banks/{bank_id}``."""

    @_doc("get_bank_profile", response=schema.BankProfileResponseSerializer, errors=(404,))
    def get(self, request: Request, bank_id: str) -> Response:
        return _profile(bank_id)

    @_doc("update_bank_disposition", request=DispositionUpdateSerializer,
          response=schema.BankProfileResponseSerializer, errors=(422,))
    def put(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        data = DispositionUpdateSerializer.parse(body_of(request))
        bank = services.bank_upsert(bank_id=bank_id, data=data)
        return Response(schema.BankProfileResponseSerializer.render(bank))


def _config(bank_id: str) -> Response:
    bank = selectors.bank_get(bank_id=bank_id)
    return Response(schema.BankConfigResponseSerializer.render(bank))


class BankConfigView(APIView):
    @_doc("get_bank_config", response=schema.BankConfigResponseSerializer, errors=(404,))
    def get(self, request: Request, bank_id: str) -> Response:
        return _config(bank_id)

    @_doc("update_bank_config", request=BankConfigUpdateSerializer,
          response=schema.BankConfigResponseSerializer)
    def patch(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        updates = BankConfigUpdateSerializer.parse(body_of(request))["updates"]
        services.bank_config_update(bank_id=bank_id, updates=updates)
        return _config(bank_id)

    @_doc("reset_bank_config", response=schema.BankConfigResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str) -> Response:
        services.bank_config_reset(bank_id=bank_id)
        return _config(bank_id)


class BankStatsView(APIView):
    @_doc("get_agent_stats", response=schema.BankStatsResponseSerializer,
          query=BankStatsQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        # ``refresh`` is accepted for upstream's clients; stats are computed on every call anyway.
        BankStatsQuery.parse(request.query_params)
        stats = selectors.bank_stats(bank_id=bank_id)
        return Response(schema.BankStatsResponseSerializer.render(stats))


class MemoriesView(APIView):
    """``POST …/memories`` (retain), ``DELETE …/memories`` (empty the bank, keep it)."""

    @_doc("retain_memories", request=RetainRequestSerializer,
          response=schema.RetainResponseSerializer, errors=(400, 404, 422, 503, 504))
    def post(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        data = RetainRequestSerializer.parse(body_of(request))
        items = RetainRequestSerializer.retain_items(data)
        if data.get("async"):
            queued = services.retain_submit_async(
                bank_id=bank_id,
                items=items,
                operation_id=str(data["operation_id"]) if data.get("operation_id") else None,
            )
            return Response(schema.RetainResponseSerializer.render_async(queued))
        # document_tags were merged into each item by the serializer.
        with llm_context(bank_id=bank_id, operation="retain"):  # the request log's labels
            result = services.memories_retain_sync(bank_id=bank_id, items=items)
        if isinstance(result, RetainQueued):  # the bank's budget is spent: parked, kept
            return Response(schema.RetainResponseSerializer.render_async(result))
        return Response(schema.RetainResponseSerializer.render_sync(result))

    @_doc("clear_bank_memories", response=schema.DeleteResponseSerializer,
          query=MemoryClearQuery, errors=(404, 422))
    def delete(self, request: Request, bank_id: str) -> Response:
        """Empty the bank and keep it (docs/behaviour.md#memory-curation)."""
        fact_type = MemoryClearQuery.parse(request.query_params).get("type")
        deleted = curation.bank_memories_clear(bank_id=bank_id, fact_type=fact_type)
        kind = f" of type '{fact_type}'" if fact_type else ""
        return Response(schema.DeleteResponseSerializer.render(
            {"bank_id": bank_id, "deleted_count": deleted,
             "message": f"Cleared {deleted} memory unit(s){kind} from bank '{bank_id}'"}))


class RecallView(APIView):
    @_doc("recall_memories", request=RecallRequestSerializer,
          response=schema.RecallResponseSerializer, errors=(404, 422, 503))
    def post(self, request: Request, bank_id: str) -> Response:
        started = time.monotonic()
        data = RecallRequestSerializer.parse(body_of(request))
        scope = TagScope.parse(
            tags=data.get("tags"), tags_match=data.get("tags_match"),
            tag_groups=data.get("tag_groups"), fact_types=data.get("types"),
            fact_types_key="types",
        )
        selectors.bank_get(bank_id=bank_id)
        types = set(data.get("types") or ())
        try:
            hits = self._recall(bank_id, data, scope, types)
        except EmbeddingError as exc:
            raise services.EmbeddingUnavailable(f"embedding the query failed: {exc}") from exc
        trace = None
        if data.get("trace"):
            trace = {
                "query": data["query"],
                "num_results": len(hits),
                "time_seconds": round(time.monotonic() - started, 4),
                "total_tokens": sum(h.tokens for h in hits),
                "max_tokens": data["max_tokens"],
                "arms": {h.id: h.arms for h in hits},
            }
        return Response(schema.RecallResponseSerializer.render({"results": hits, "trace": trace}))

    def _recall(self, bank_id: str, data: dict[str, Any], scope: TagScope,
                types: set[str]) -> list[RecallHit]:
        window = data.get("temporal_window")
        floors = data.get("min_scores") or {}
        return memory_recall(
            bank_id=bank_id,
            query=data["query"],
            scope=scope,
            max_tokens=data["max_tokens"],
            budget=data["budget"],
            temporal_window=(window["start"], window["end"]) if window else None,
            floors=RecallFloors(
                semantic=floors.get("semantic"), keyword=floors.get("keyword"),
                final=floors.get("final"),
            ),
            prefer_observations=bool(data.get("prefer_observations"))
            and FactType.OBSERVATION in types and not types.isdisjoint(EXTRACTED_FACT_TYPES),
        )


class MemoryListView(APIView):
    @_doc("list_memories", response=schema.ListMemoryUnitsResponseSerializer,
          query=MemoryListQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        query = MemoryListQuery.parse(request.query_params)
        tags, tags_match = query.get("tags") or [], query["tags_match"]
        scope = (TagScope(tags=tuple(tags), tags_match=tags_match)
                 if tags or tags_match == "exact" else None)
        limit, offset = query["limit"], query["offset"]
        page, total = selectors.memories_list(
            bank_id=bank_id,
            fact_type=query.get("type"),
            q=query.get("q"),
            document_id=query.get("document_id"),
            scope=scope,
            consolidation_state=query.get("consolidation_state"),
            state=query.get("state"),
            entity_id=query.get("entity_id"),
            time_field=query.get("time_field"),
            start=query.get("start_date"),
            end=query.get("end_date"),
            limit=limit,
            offset=offset,
        )
        return Response(schema.ListMemoryUnitsResponseSerializer.render(
            {"items": page, "total": total, "limit": limit, "offset": offset}))


class TagsView(APIView):
    @_doc("list_tags", response=schema.ListTagsResponseSerializer,
          query=TagListQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        query = TagListQuery.parse(request.query_params)
        limit, offset = query["limit"], query["offset"]
        counts, total = tags_list(bank_id=bank_id, source=query["source"], q=query.get("q"),
                                  limit=limit, offset=offset)
        return Response(schema.ListTagsResponseSerializer.render(
            {"items": counts, "total": total, "limit": limit, "offset": offset}))


class ConsolidateView(APIView):
    """``POST …/consolidate``: queue the bank's consolidation (or return the queued one)."""

    @_doc("trigger_consolidation", request=ConsolidationRequestSerializer,
          response=schema.ConsolidationResponseSerializer, errors=(400, 422))
    def post(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        ConsolidationRequestSerializer.parse(body_of(request))
        operation_id, deduplicated = services.consolidation_request(bank_id=bank_id)
        return Response(schema.ConsolidationResponseSerializer.render(
            {"operation_id": operation_id, "deduplicated": deduplicated}))


class LLMRequestsView(APIView):
    """``GET …/llm-requests``: the bank's logged LLM requests, newest first."""

    @_doc("list_llm_requests", response=schema.LLMRequestListResponseSerializer,
          query=LLMRequestListQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        selectors.bank_get(bank_id=bank_id)
        query = LLMRequestListQuery.parse(request.query_params)
        limit, offset = query["limit"], query["offset"]
        trace_id = query.get("trace_id")
        filters = LLMRequestFilters(
            status=query.get("status"),
            operation=query.get("operation"),
            scope=query.get("scope"),
            trace_id=str(trace_id) if trace_id is not None else None,
            start=query.get("start_date"),
            end=query.get("end_date"),
            provider=query.get("provider"),
        )
        # Kinds and links this log does not hold select nothing rather than being ignored.
        nothing = (
            query.get("call_type") not in (None, "llm")
            or query.get("document_id") is not None
            or query.get("memory_id") is not None
        )
        rows: list[LLMRequest] = []
        total = 0
        if not nothing:
            rows, total = llm_requests_list(bank_id=bank_id, filters=filters, limit=limit,
                                            offset=offset)
        return Response(schema.LLMRequestListResponseSerializer.render(
            {"bank_id": bank_id, "items": rows, "total": total, "limit": limit,
             "offset": offset}))


class LLMRequestStatsView(APIView):
    """``GET …/llm-requests/stats``: requests per time bucket and status, with token sums."""

    @_doc("llm_request_stats", response=schema.LLMRequestStatsResponseSerializer,
          query=LLMRequestStatsQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        selectors.bank_get(bank_id=bank_id)
        query = LLMRequestStatsQuery.parse(request.query_params)
        period, call_type = query["period"], query.get("call_type")
        start, trunc, buckets = llm_requests_stats(bank_id=bank_id, period=period,
                                                   operation=query.get("operation"))
        if call_type not in (None, "llm"):
            buckets = []
        return Response(schema.LLMRequestStatsResponseSerializer.render(
            {"bank_id": bank_id, "period": period, "trunc": trunc, "start": start,
             "buckets": buckets}))


# --- memory curation (docs/behaviour.md#memory-curation) -------------------------------------


def _memory(bank_id: str, memory_id: str) -> MemoryUnit | InvalidatedMemoryUnit:
    """The bank's memory, live or archived: 404 for an unknown bank or memory, 400 for an id
    that is no UUID."""
    selectors.bank_get(bank_id=bank_id)
    memory = selectors.memory_get(bank_id=bank_id, memory_id=curation.memory_uuid(memory_id))
    if memory is None:
        raise NotFound(f"Memory unit '{memory_id}' not found")
    return memory


def _memory_detail(bank_id: str, memory_id: str) -> Response:
    memory = _memory(bank_id, memory_id)
    sources = selectors.memory_sources(bank_id=bank_id, memory=memory)
    return Response(schema.MemoryDetailSerializer.render({"memory": memory, "sources": sources}))


class MemoryView(APIView):
    """``GET``/``PATCH …/memories/{memory_id}``: one memory, and its curation."""

    @_doc("get_memory", response=schema.MemoryDetailSerializer, errors=(400, 404))
    def get(self, request: Request, bank_id: str, memory_id: str) -> Response:
        return _memory_detail(bank_id, memory_id)

    @_doc("update_memory", request=UpdateMemoryRequestSerializer,
          response=schema.MemoryDetailSerializer, errors=(400, 404, 422, 503))
    def patch(self, request: Request, bank_id: str, memory_id: str) -> Response:
        _memory(bank_id, memory_id)  # an unknown memory is a 404 whatever the body
        data = UpdateMemoryRequestSerializer.parse(body_of(request))
        curation.memory_update(bank_id=bank_id, memory_id=memory_id, edits=data["edits"],
                               state=data["state"], reason=data["reason"])
        return _memory_detail(bank_id, memory_id)


class MemoryHistoryView(APIView):
    """``GET …/memories/{memory_id}/history``: the memory's curation changes, oldest first."""

    @_doc("get_observation_history", response=schema.MemoryHistoryEntrySerializer(many=True),
          errors=(400, 404))
    def get(self, request: Request, bank_id: str, memory_id: str) -> Response:
        memory = _memory(bank_id, memory_id)
        changes = selectors.memory_changes(bank_id=bank_id, memory_id=memory.id)
        return Response([schema.MemoryHistoryEntrySerializer.render(c) for c in changes])


class MemoryObservationsView(APIView):
    """``DELETE …/memories/{memory_id}/observations``."""

    @_doc("clear_memory_observations", response=schema.ClearMemoryObservationsResponseSerializer,
          errors=(400, 404))
    def delete(self, request: Request, bank_id: str, memory_id: str) -> Response:
        deleted = curation.memory_observations_clear(bank_id=bank_id, memory_id=memory_id)
        return Response(schema.ClearMemoryObservationsResponseSerializer.render(
            {"deleted_count": deleted}))


class BankObservationsView(APIView):
    """``DELETE …/observations``: every observation of the bank."""

    @_doc("clear_observations", response=schema.DeleteResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str) -> Response:
        deleted = curation.bank_observations_clear(bank_id=bank_id)
        return Response(schema.DeleteResponseSerializer.render(
            {"bank_id": bank_id, "deleted_count": deleted,
             "message": f"Cleared {deleted} observations"}))


# --- documents (docs/behaviour.md#documents) ---------------------------------------------------


class DocumentListView(APIView):
    @_doc("list_documents", response=schema.ListDocumentsResponseSerializer,
          query=DocumentListQuery)
    def get(self, request: Request, bank_id: str) -> Response:
        query = DocumentListQuery.parse(request.query_params)
        limit, offset = query["limit"], query["offset"]
        page, total = selectors.documents_list(
            bank_id=bank_id, q=query.get("q"), tags=query.get("tags"),
            tags_match=query["tags_match"], time_field=query.get("time_field"),
            start=query.get("start_date"), end=query.get("end_date"), limit=limit,
            offset=offset)
        return Response(schema.ListDocumentsResponseSerializer.render(
            {"items": page, "total": total, "limit": limit, "offset": offset}))


class DocumentView(APIView):
    @_doc("get_document", response=schema.DocumentResponseSerializer, errors=(404,))
    def get(self, request: Request, bank_id: str, document_id: str) -> Response:
        document = selectors.document_get(bank_id=bank_id, document_id=document_id)
        return Response(schema.DocumentResponseSerializer.render(document))

    @_doc("update_document", request=UpdateDocumentRequestSerializer,
          response=schema.UpdateDocumentResponseSerializer)
    def patch(self, request: Request, bank_id: str, document_id: str) -> Response:
        selectors.document_get(bank_id=bank_id, document_id=document_id)
        data = UpdateDocumentRequestSerializer.parse(body_of(request))
        documents.document_update(bank_id=bank_id, document_id=document_id, **data)
        return Response(schema.UpdateDocumentResponseSerializer.render({}))

    @_doc("delete_document", response=schema.DeleteDocumentResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str, document_id: str) -> Response:
        deleted = documents.document_delete(bank_id=bank_id, document_id=document_id)
        return Response(schema.DeleteDocumentResponseSerializer.render(
            {"document_id": document_id, "memory_units_deleted": deleted}))


def _chunks(document: Document) -> list[dict[str, Any]]:
    return [{"chunk_id": chunk_id(document.bank_id, document.document_id, index),
             "document_id": document.document_id, "bank_id": document.bank_id,
             "chunk_index": index, "chunk_text": text,
             "created_at": iso(document.created_at) or ""}
            for index, text in enumerate(document.chunks)]


class DocumentChunksView(APIView):
    @_doc("list_document_chunks", response=schema.ListChunksResponseSerializer,
          query=DocumentPageQuery)
    def get(self, request: Request, bank_id: str, document_id: str) -> Response:
        query = DocumentPageQuery.parse(request.query_params)
        limit, offset = query["limit"], query["offset"]
        chunks = _chunks(selectors.document_get(bank_id=bank_id, document_id=document_id))
        return Response(schema.ListChunksResponseSerializer.render(
            {"items": chunks[offset: offset + limit], "total": len(chunks), "limit": limit,
             "offset": offset}))


class DocumentHistoryView(APIView):
    @_doc("get_document_history", response=schema.DocumentHistoryResponseSerializer,
          query=DocumentPageQuery)
    def get(self, request: Request, bank_id: str, document_id: str) -> Response:
        query = DocumentPageQuery.parse(request.query_params)
        limit, offset = query["limit"], query["offset"]
        events = selectors.document_history(bank_id=bank_id, document_id=document_id)
        page = [{"document_id": document_id, **e} for e in events[offset: offset + limit]]
        return Response(schema.DocumentHistoryResponseSerializer.render(
            {"document_id": document_id, "total": len(events), "limit": limit,
             "offset": offset, "items": page}))


class DocumentReprocessView(APIView):
    @_doc("reprocess_document", response=schema.ReprocessDocumentResponseSerializer,
          errors=(400, 404))
    def post(self, request: Request, bank_id: str, document_id: str) -> Response:
        operation_id, count = documents.document_reprocess(bank_id=bank_id,
                                                           document_id=document_id)
        return Response(schema.ReprocessDocumentResponseSerializer.render(
            {"operation_id": operation_id, "items_count": count}))


class ChunkView(APIView):
    """``GET /v1/default/chunks/{chunk_id}``: one chunk, found by its id alone."""

    @_doc("get_chunk", response=schema.ChunkResponseSerializer, errors=(404,))
    def get(self, request: Request, chunk_id: str) -> Response:
        parsed = chunk_id_parse(chunk_id)
        if parsed is None:
            raise NotFound("Chunk not found")
        bank_id, document_id, index = parsed
        document = Document.objects.filter(bank_id=bank_id, document_id=document_id).first()
        if document is None or index >= len(document.chunks):
            raise NotFound("Chunk not found")
        return Response(schema.ChunkResponseSerializer.render(_chunks(document)[index]))
