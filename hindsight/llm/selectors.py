"""Reads of the LLM request log: upstream's ``LLMRequestListResponse`` items and the per-bucket
``LLMRequestStatsResponse`` (counts per status and token sums, one query)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, Trunc
from django.utils import timezone

from hindsight.llm.models import LLMRequest

# Upstream's periods and the bucket width each is charted in.
PERIODS = {"1d": (timedelta(days=1), "hour"), "7d": (timedelta(days=7), "day"),
           "30d": (timedelta(days=30), "day")}


@dataclass(frozen=True)
class LLMRequestFilters:
    status: str | None = None
    operation: str | None = None
    scope: str | None = None
    trace_id: str | None = None
    start: datetime | None = None
    end: datetime | None = None


def _filtered(bank_id: str, filters: LLMRequestFilters) -> QuerySet[LLMRequest]:
    qs = LLMRequest.objects.filter(bank_id=bank_id)
    if filters.status:
        qs = qs.filter(status=filters.status)
    if filters.operation:
        qs = qs.filter(operation=filters.operation)
    if filters.scope:
        qs = qs.filter(scope=filters.scope)
    if filters.trace_id:
        qs = qs.filter(operation_id=filters.trace_id)
    if filters.start:
        qs = qs.filter(started_at__gte=filters.start)
    if filters.end:
        qs = qs.filter(started_at__lt=filters.end)
    return qs


def _decoded(text: str, truncated: bool) -> Any:
    if not text:
        return None
    if truncated:
        return text  # cut JSON is not JSON any more: the text as stored
    try:
        return json.loads(text)
    except ValueError:
        return text


def llm_request_entry(row: LLMRequest) -> dict[str, Any]:
    """One row in upstream's ``LLMRequestEntry`` shape."""
    return {
        "id": str(row.id),
        "bank_id": row.bank_id,
        "operation": row.operation,
        "scope": row.scope or None,
        # One operation run is one trace; each request is a span of it.
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
        "input": _decoded(row.prompt, row.truncated),
        "output": _decoded(row.response, row.truncated),
        "error": row.error,
        "llm_info": {"kind": row.kind, "attempt": row.attempt},
        "metadata": {"truncated": row.truncated},
    }


def llm_requests_list(
    *, bank_id: str, filters: LLMRequestFilters, limit: int, offset: int
) -> dict[str, Any]:
    qs = _filtered(bank_id, filters)
    total = qs.count()
    rows = list(qs.order_by("-started_at", "-id")[offset: offset + limit])
    return {"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
            "items": [llm_request_entry(r) for r in rows]}


def llm_requests_totals(*, bank_id: str) -> dict[str, int]:
    """Requests and tokens of the bank still in the log (tests, the bench)."""
    agg = LLMRequest.objects.filter(bank_id=bank_id).aggregate(
        requests=Count("id"),
        input=Coalesce(Sum("input_tokens"), 0),
        output=Coalesce(Sum("output_tokens"), 0),
    )
    return {"requests": agg["requests"], "input_tokens": agg["input"],
            "output_tokens": agg["output"], "total_tokens": agg["input"] + agg["output"]}


def llm_requests_stats(
    *, bank_id: str, period: str, operation: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    span, trunc = PERIODS[period]
    start = (now or timezone.now()) - span
    qs = LLMRequest.objects.filter(bank_id=bank_id, started_at__gte=start)
    if operation:
        qs = qs.filter(operation=operation)
    rows = (
        qs.annotate(bucket=Trunc("started_at", trunc))
        .values("bucket")
        .annotate(
            total=Count("id"),
            success=Count("id", filter=Q(status="success")),
            error=Count("id", filter=Q(status="error")),
            input=Coalesce(Sum("input_tokens"), 0),
            output=Coalesce(Sum("output_tokens"), 0),
        )
        .order_by("bucket")
    )
    buckets = [
        {
            "time": row["bucket"].isoformat(),
            "statuses": {k: v for k, v in (("success", row["success"]),
                                            ("error", row["error"])) if v},
            "total": row["total"],
            "tokens": {"input": row["input"], "output": row["output"], "cached": 0,
                       "thoughts": None, "total": row["input"] + row["output"]},
        }
        for row in rows
    ]
    return {"bank_id": bank_id, "period": period, "trunc": trunc, "start": start.isoformat(),
            "buckets": buckets}
