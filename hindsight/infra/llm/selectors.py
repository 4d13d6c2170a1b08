"""Reads of the LLM request log: a page of requests, and per time bucket the counts per status
and token sums (one query); the banks API renders them (``hindsight.banks.schema``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, Trunc
from django.utils import timezone

from hindsight.infra.llm.models import LLMRequest

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
    provider: str | None = None


def _filtered(bank_id: str, filters: LLMRequestFilters) -> QuerySet[LLMRequest]:
    qs = LLMRequest.objects.filter(bank_id=bank_id)
    if filters.status:
        qs = qs.filter(status=filters.status)
    if filters.operation:
        qs = qs.filter(operation=filters.operation)
    if filters.scope:
        qs = qs.filter(scope=filters.scope)
    if filters.provider:
        qs = qs.filter(provider=filters.provider)
    if filters.trace_id:
        qs = qs.filter(operation_id=filters.trace_id)
    if filters.start:
        qs = qs.filter(started_at__gte=filters.start)
    if filters.end:
        qs = qs.filter(started_at__lt=filters.end)
    return qs


def llm_requests_list(
    *, bank_id: str, filters: LLMRequestFilters, limit: int, offset: int
) -> tuple[list[LLMRequest], int]:
    """A page of the bank's logged requests, newest first, and how many the filters select."""
    qs = _filtered(bank_id, filters)
    total = qs.count()
    return list(qs.order_by("-started_at", "-id")[offset: offset + limit]), total


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
) -> tuple[datetime, str, list[dict[str, Any]]]:
    """The period's start, its bucket width, and per bucket (oldest first): ``bucket``,
    ``total``, ``success``, ``error``, ``input`` and ``output`` (token sums)."""
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
    return start, trunc, [dict(row) for row in rows]
