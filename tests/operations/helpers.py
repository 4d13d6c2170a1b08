"""Helpers for the worker tests: submit ``test.job`` operations and read their records."""

from __future__ import annotations

from typing import Any

from django.db import connection

from hindsight.banks.services import bank_ensure
from operations.models import Operation
from operations.queue import operation_submit
from operations.testing_handlers import TEST_JOB


def submit_job(bank_id: str = "ops-bank", *, key: str | None = None,
               operation_type: str = TEST_JOB, **payload: Any) -> Operation:
    """A ``test.job`` (or ``operation_type``, another testing handler's) with ``payload``."""
    bank_ensure(bank_id=bank_id)  # the engine's callers ensure the bank; here the test is one
    return operation_submit(
        bank_id=bank_id, operation_type=operation_type, dedupe_key=key, payload=payload
    ).operation


def job_log(op_ids: list[Any] | None = None) -> list[dict[str, Any]]:
    sql = ("SELECT op_id, key, attempt, fence, pid, started_at, ended_at, outcome "
           "FROM test_job_log")
    params: list[Any] = []
    if op_ids is not None:
        sql += " WHERE op_id = ANY(%s::uuid[])"
        params.append([str(i) for i in op_ids])
    sql += " ORDER BY started_at"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cols = [c.name for c in cursor.description]
        return [dict(zip(cols, row)) for row in cursor.fetchall()]


def effects(op_ids: list[Any]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT op_id, key, fence FROM test_job_effect WHERE op_id = ANY(%s::uuid[])",
            [[str(i) for i in op_ids]],
        )
        return [{"op_id": r[0], "key": r[1], "fence": r[2]} for r in cursor.fetchall()]


def statuses(op_ids: list[Any]) -> dict[str, str]:
    return {str(i): s for i, s in Operation.objects.filter(id__in=op_ids)
            .values_list("id", "status")}
