"""HTTP edge of the banks app (upstream's v1 wire format): parse, call one service/selector, and
answer what the response serializer renders (``hindsight.banks.schema``: each shape in one place)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.api.schema import errors as api_errors
from hindsight.banks import schema, selectors, services
from hindsight.banks.recall import RecallFloors, RecallHit, memory_recall
from hindsight.banks.serializers import (
    BankConfigUpdateSerializer,
    BankWriteSerializer,
    ConsolidationRequestSerializer,
    DispositionUpdateSerializer,
    RecallRequestSerializer,
    RetainRequestSerializer,
    parse_datetime_value,
)
from hindsight.banks.tags import tags_list
from hindsight.embeddings import EmbeddingError
from hindsight.errors import FieldError
from hindsight.llm.context import llm_context
from hindsight.llm.models import LLMRequest
from hindsight.llm.selectors import (
    PERIODS,
    LLMRequestFilters,
    llm_requests_list,
    llm_requests_stats,
)
from hindsight.tagscope import TAGS_MATCH_MODES, TagScope


def _doc(operation_id: str, *, response: Any, request: Any = None, params: Any = (),
         errors: tuple[int, ...] = (404, 422)) -> Any:
    """OpenAPI metadata with upstream's operation ids (shapes: ``hindsight.banks.schema``)."""
    return extend_schema(
        operation_id=operation_id,
        request=request,
        responses={200: response, **api_errors(*errors)},
        parameters=list(params),
    )


# Past PostgreSQL's bigint an OFFSET is a database error (a 500); no page is that far anyway.
OFFSET_MAX = schema.OFFSET_MAX


def _validated(serializer_class: type, data: Any) -> Any:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer


def _query_int(request: Request, name: str, default: int, *, minimum: int = 0,
               maximum: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FieldError(("query", name), "must be an integer", "int_parsing") from None
    if value < minimum:
        raise FieldError(("query", name), f"must be >= {minimum}", "greater_than_equal")
    if maximum is not None and value > maximum:
        raise FieldError(("query", name), f"must be <= {maximum}", "less_than_equal")
    return value


def _query_text(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if "\x00" in raw:
        raise FieldError(("query", name), "Null characters are not allowed.",
                         "null_characters_not_allowed")
    return raw


def _query_choice(request: Request, name: str, choices: tuple[str, ...]) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise FieldError(("query", name), f"must be one of {', '.join(choices)}", "literal_error")
    return raw


def _query_bool(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off", ""):
        return False
    raise FieldError(("query", name), "must be a boolean", "bool_parsing")


def _query_datetime(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        return parse_datetime_value(raw)
    except ValueError:
        raise FieldError(("query", name), "must be an ISO 8601 date-time", "datetime_parsing") from None


class BankListView(APIView):
    @_doc("list_banks", response=schema.BankListResponseSerializer,
          params=schema.BANK_LIST_PARAMS, errors=(422,))
    def get(self, request: Request) -> Response:
        limit = _query_int(request, "limit", 100, maximum=1000)
        offset = _query_int(request, "offset", 0, maximum=OFFSET_MAX)
        rows, total = selectors.bank_list(q=_query_text(request, "q"), limit=limit, offset=offset)
        return Response(schema.BankListResponseSerializer.render(rows, total=total, limit=limit,
                                                                 offset=offset))


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
        data = _validated(BankWriteSerializer, request.data).validated_data
        bank = services.bank_upsert(bank_id=bank_id, data=data)
        return Response(schema.BankProfileResponseSerializer.render(bank))

    @_doc("update_bank", request=BankWriteSerializer,
          response=schema.BankProfileResponseSerializer, errors=(422,))
    def patch(self, request: Request, bank_id: str) -> Response:
        return self.put(request, bank_id)

    @_doc("delete_bank", response=schema.DeleteResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str) -> Response:
        deleted = services.bank_delete(bank_id=bank_id)
        return Response(schema.DeleteResponseSerializer.render(bank_id, deleted))


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
        data = _validated(DispositionUpdateSerializer, request.data).validated_data
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
        updates = _validated(BankConfigUpdateSerializer, request.data).validated_data["updates"]
        services.bank_config_update(bank_id=bank_id, updates=updates)
        return _config(bank_id)

    @_doc("reset_bank_config", response=schema.BankConfigResponseSerializer, errors=(404,))
    def delete(self, request: Request, bank_id: str) -> Response:
        services.bank_config_reset(bank_id=bank_id)
        return _config(bank_id)


class BankStatsView(APIView):
    @_doc("get_agent_stats", response=schema.BankStatsResponseSerializer,
          params=schema.STATS_PARAMS)
    def get(self, request: Request, bank_id: str) -> Response:
        # ``refresh`` is accepted for upstream's clients; stats are computed on every call anyway.
        _query_bool(request, "refresh")
        stats = selectors.bank_stats(bank_id=bank_id)
        return Response(schema.BankStatsResponseSerializer.render(stats))


class MemoriesView(APIView):
    """``POST …/memories`` (retain)."""

    @_doc("retain_memories", request=RetainRequestSerializer,
          response=schema.RetainResponseSerializer, errors=(400, 404, 422, 503, 504))
    def post(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        serializer = _validated(RetainRequestSerializer, request.data)
        items = serializer.retain_items()
        if serializer.validated_data.get("async"):
            operation_id = services.retain_submit_async(
                bank_id=bank_id,
                items=items,
                operation_id=(
                    str(serializer.validated_data["operation_id"])
                    if serializer.validated_data.get("operation_id") else None
                ),
            )
            return Response(schema.RetainResponseSerializer.render_async(
                bank_id, items_count=len(items), operation_id=operation_id))
        # document_tags were merged into each item by the serializer.
        with llm_context(bank_id=bank_id, operation="retain"):  # the request log's labels
            result = services.memories_retain_sync(bank_id=bank_id, items=items)
        return Response(schema.RetainResponseSerializer.render_sync(result))


class RecallView(APIView):
    @_doc("recall_memories", request=RecallRequestSerializer,
          response=schema.RecallResponseSerializer, errors=(404, 422, 503))
    def post(self, request: Request, bank_id: str) -> Response:
        started = time.monotonic()
        data = _validated(RecallRequestSerializer, request.data).validated_data
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
        return Response(schema.RecallResponseSerializer.render(hits, trace=trace))

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
            and "observation" in types and bool(types & {"world", "experience"}),
        )


class MemoryListView(APIView):
    @_doc("list_memories", response=schema.ListMemoryUnitsResponseSerializer,
          params=schema.MEMORY_LIST_PARAMS)
    def get(self, request: Request, bank_id: str) -> Response:
        params = request.query_params
        limit = _query_int(request, "limit", 100, maximum=1000)
        offset = _query_int(request, "offset", 0, maximum=OFFSET_MAX)
        time_field = params.get("time_field") or None
        if time_field is not None and time_field not in selectors.TIME_FIELDS:
            raise FieldError(("query", "time_field"),
                             f"must be one of {', '.join(selectors.TIME_FIELDS)}", "literal_error")
        tags_match = params.get("tags_match") or "any"
        if tags_match not in TAGS_MATCH_MODES:
            raise FieldError(("query", "tags_match"),
                             f"must be one of {', '.join(TAGS_MATCH_MODES)}", "literal_error")
        tags = params.getlist("tags")
        if any("\x00" in tag for tag in tags):
            raise FieldError(("query", "tags"), "Null characters are not allowed.",
                             "null_characters_not_allowed")
        scope = TagScope(tags=tuple(tags), tags_match=tags_match) if tags or tags_match == "exact" else None
        consolidation_state = _query_choice(request, "consolidation_state",
                                            selectors.CONSOLIDATION_STATES)
        state = _query_choice(request, "state", selectors.MEMORY_STATES)
        fact_type = params.get("type") or None
        if fact_type is not None and fact_type not in ("world", "experience", "observation", "opinion"):
            raise FieldError(("query", "type"), "must be one of world, experience, observation",
                             "literal_error")
        page, total = selectors.memories_list(
            bank_id=bank_id,
            fact_type=fact_type,
            q=_query_text(request, "q"),
            document_id=_query_text(request, "document_id"),
            scope=scope,
            consolidation_state=consolidation_state,
            state=state,
            entity_id=_query_text(request, "entity_id"),
            time_field=time_field,
            start=_query_datetime(request, "start_date"),
            end=_query_datetime(request, "end_date"),
            limit=limit,
            offset=offset,
        )
        return Response(schema.ListMemoryUnitsResponseSerializer.render(
            page, total=total, limit=limit, offset=offset))


class TagsView(APIView):
    @_doc("list_tags", response=schema.ListTagsResponseSerializer,
          params=schema.TAG_LIST_PARAMS)
    def get(self, request: Request, bank_id: str) -> Response:
        source = request.query_params.get("source") or "memories"
        if source not in ("memories", "mental_models"):
            raise FieldError(("query", "source"), "must be one of memories, mental_models",
                             "literal_error")
        limit = _query_int(request, "limit", 100, maximum=1000)
        offset = _query_int(request, "offset", 0, maximum=OFFSET_MAX)
        counts, total = tags_list(bank_id=bank_id, source=source, q=_query_text(request, "q"),
                                  limit=limit, offset=offset)
        return Response(schema.ListTagsResponseSerializer.render(counts, total=total, limit=limit,
                                                                 offset=offset))


class ConsolidateView(APIView):
    """``POST …/consolidate``: queue the bank's consolidation (or return the queued one)."""

    @_doc("trigger_consolidation", request=ConsolidationRequestSerializer,
          response=schema.ConsolidationResponseSerializer, errors=(400, 422))
    def post(self, request: Request, bank_id: str) -> Response:
        services.bank_id_validate(bank_id)
        # The body is optional (upstream: ConsolidationRequest | null).
        _validated(ConsolidationRequestSerializer, request.data or {})
        operation_id, deduplicated = services.consolidation_request(bank_id=bank_id)
        return Response(schema.ConsolidationResponseSerializer.render(
            operation_id, deduplicated=deduplicated))


def _uuid_query(request: Request, name: str) -> str | None:
    raw = _query_text(request, name)
    if raw is None:
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise FieldError(("query", name), "must be an operation id (a UUID)", "uuid_parsing") from None


class LLMRequestsView(APIView):
    """``GET …/llm-requests``: the bank's logged LLM requests, newest first."""

    @_doc("list_llm_requests", response=schema.LLMRequestListResponseSerializer,
          params=schema.LLM_REQUEST_PARAMS)
    def get(self, request: Request, bank_id: str) -> Response:
        selectors.bank_get(bank_id=bank_id)
        limit = _query_int(request, "limit", 50, minimum=1, maximum=500)
        offset = _query_int(request, "offset", 0, maximum=OFFSET_MAX)
        status = _query_choice(request, "status", schema.LLM_REQUEST_STATUSES)
        call_type = _query_choice(request, "call_type", schema.LLM_CALL_TYPES)
        provider = _query_text(request, "provider")
        _query_bool(request, "group")
        filters = LLMRequestFilters(
            status=status,
            operation=_query_text(request, "operation"),
            scope=_query_text(request, "scope"),
            trace_id=_uuid_query(request, "trace_id"),
            start=_query_datetime(request, "start_date"),
            end=_query_datetime(request, "end_date"),
        )
        # Kinds and links this log does not hold select nothing rather than being ignored.
        nothing = (
            (call_type not in (None, "llm")) or (provider not in (None, "openai"))
            or _query_text(request, "document_id") is not None
            or _query_text(request, "memory_id") is not None
        )
        rows: list[LLMRequest] = []
        total = 0
        if not nothing:
            rows, total = llm_requests_list(bank_id=bank_id, filters=filters, limit=limit,
                                            offset=offset)
        return Response(schema.LLMRequestListResponseSerializer.render(
            bank_id, rows, total=total, limit=limit, offset=offset))


class LLMRequestStatsView(APIView):
    """``GET …/llm-requests/stats``: requests per time bucket and status, with token sums."""

    @_doc("llm_request_stats", response=schema.LLMRequestStatsResponseSerializer,
          params=schema.LLM_REQUEST_STATS_PARAMS)
    def get(self, request: Request, bank_id: str) -> Response:
        selectors.bank_get(bank_id=bank_id)
        period = _query_choice(request, "period", tuple(PERIODS)) or "7d"
        call_type = _query_choice(request, "call_type", schema.LLM_CALL_TYPES)
        start, trunc, buckets = llm_requests_stats(bank_id=bank_id, period=period,
                                                   operation=_query_text(request, "operation"))
        if call_type not in (None, "llm"):
            buckets = []
        return Response(schema.LLMRequestStatsResponseSerializer.render(
            bank_id, period=period, trunc=trunc, start=start, buckets=buckets))
