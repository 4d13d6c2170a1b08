"""Writes of the LLM request log: one row per request (the gateway's sink) and the purge.

A row is written in its own short statement after the request returned (never inside the
request), in a savepoint when the caller is in a transaction, so a failed insert cannot poison
the caller's transaction. Prompt and response are stored as JSON text cut to
``HINDSIGHT_API_LLM_REQUEST_LOG_MAX_CHARS`` characters each.

Outside a transaction the row commits asynchronously (``hindsight.infra.db.execute_without_flush_wait``:
``SET LOCAL synchronous_commit = off`` after the insert, one round trip): the commit does
not wait for its WAL to reach the disk. That wait — a flush per LLM request, three per refresh —
was the longest statement of a refresh (about 8 ms each on this machine, a pooled connection
held through it). The row is an observation of a request that already happened: a PostgreSQL
crash within the WAL writer's delay (200 ms) may lose the last rows, never corrupt them or
anything else; every later durable commit (the job's own) flushes them first. The job's record
keeps its tally of requests and tokens durably either way. Inside a caller's transaction the
row stays durable (a ``SET LOCAL`` there would make the caller's commit asynchronous too).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from hindsight.infra.db import execute_without_flush_wait
from hindsight.infra.llm.context import LLMContext
from hindsight.infra.llm.models import ERROR, SUCCESS, LLMRequest
from hindsight.infra.llm.types import LLMRequestEvent


def _cut(value: Any, limit: int) -> tuple[str, bool]:
    if value is None:
        return "", False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# One plain INSERT (``ended_at`` is the column's default, the database clock): the ORM's
# save() costs about as much again in Python as the round trip itself, on every LLM request.
_COLUMNS = ("id", "bank_id", "operation", "operation_id", "scope", "kind", "structured_step",
            "provider", "model",
            "status", "attempt", "started_at", "duration_ms", "input_tokens", "output_tokens",
            "prompt", "response", "truncated", "error")
_INSERT_SQL = (
    f"INSERT INTO {LLMRequest._meta.db_table} ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(_COLUMNS))})"
)


def llm_request_record(event: LLMRequestEvent, context: LLMContext | None) -> None:
    limit = settings.HINDSIGHT.llm_request_log_max_chars
    prompt, prompt_cut = _cut(event.request, limit)
    response, response_cut = _cut(event.response, limit)
    values = [
        uuid.uuid4(),
        context.bank_id if context else None,
        context.operation if context else None,
        _uuid_or_none(context.operation_id) if context else None,
        event.purpose[:128],
        event.kind,
        event.structured_step,
        event.provider[:32],
        event.model[:255],
        ERROR if event.error else SUCCESS,
        event.attempt,
        event.started_at,
        max(0, event.duration_ms),
        event.usage.input_tokens,
        event.usage.output_tokens,
        prompt,
        response,
        prompt_cut or response_cut,
        event.error,
    ]
    if connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_INSERT_SQL, values)
        return
    execute_without_flush_wait(_INSERT_SQL, values)


# The banks' token budgets count the last 24 hours of rows (``hindsight.banks.budget``).
SPEND_WINDOW = timedelta(hours=24)


def llm_requests_purge(*, now: datetime | None = None) -> int:
    """Delete rows older than the retention period; returns how many went.

    A row of the last 24 hours is what a bank's token budget counts: with a retention shorter
    than that, such a row only loses its prompt and response (its tokens stay counted)."""
    now = now or timezone.now()
    horizon = now - timedelta(hours=settings.HINDSIGHT.llm_request_log_retention_hours)
    if horizon > now - SPEND_WINDOW:
        LLMRequest.objects.filter(started_at__lt=horizon).exclude(prompt="", response="").update(
            prompt="", response="", truncated=True
        )
        horizon = now - SPEND_WINDOW
    deleted, _ = LLMRequest.objects.filter(started_at__lt=horizon).delete()
    return deleted
