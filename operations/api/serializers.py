"""Wire shapes of operations (upstream's ``OperationResponse`` / ``OperationStatusResponse``).

Rendered from an ``OperationReport``: who the operation is (id, type, model, payload, created)
comes from its own row; where its work stands (status, error, retries, times, details, result)
from its carrier — itself, or the operation its work was merged into, which
``result_metadata.superseded_by`` (first hop) and ``carried_by`` (the end) then name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from hindsight.api.serializers import QuerySerializer
from operations.api.details import details_shape
from operations.models import STATUSES, SUPERSEDED_BY, TERMINAL_STATUSES, Operation
from operations.selectors import OperationReport


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _details(op: Operation) -> dict[str, Any] | None:
    # Typed details exist for the operation types that registered a shape (a refresh's), and
    # only in the shape's terms. Upstream: null while the operation is in flight — a pending
    # retry included (its last failure is in ``error_message``).
    details = op.details
    shape = details_shape(op.operation_type)
    if shape is None or not isinstance(details, dict):
        return None
    if op.status not in TERMINAL_STATUSES:
        return None
    return shape.render(details)


def _items(op: Operation) -> list[dict[str, Any]]:
    items = (op.payload or {}).get("items")
    return items if isinstance(items, list) else []


def _items_count(op: Operation) -> int:
    return len(_items(op))


def _document_id(op: Operation) -> str | None:
    ids = {item.get("document_id") for item in _items(op) if isinstance(item, dict)}
    if len(ids) == 1:
        (only,) = ids
        return only if isinstance(only, str) else None
    return None


def operation_list_item(report: OperationReport) -> dict[str, Any]:
    op, state = report.operation, report.carrier
    return {
        "id": str(op.id),
        "task_type": op.operation_type,
        "operation_id": str(op.id),
        "operation_type": op.operation_type,
        "items_count": _items_count(op),
        "document_id": _document_id(op),
        "filename": None,
        "mental_model_id": op.mental_model_id,
        "details": _details(state),
        "created_at": _iso(op.created_at),
        "updated_at": _iso(state.updated_at),
        "status": state.status,
        "error_message": state.error_message,
        "retry_count": state.retry_count,
        "next_retry_at": _iso(state.next_retry_at),
        "progress": None,
    }


def _result_metadata(report: OperationReport) -> dict[str, Any] | None:
    if not report.carried:
        return report.operation.result_metadata
    carried = {k: v for k, v in (report.carrier.result_metadata or {}).items()
               if k != SUPERSEDED_BY}
    return {**carried, SUPERSEDED_BY: report.superseded_by, "carried_by": str(report.carrier.id)}


def operation_status(report: OperationReport, *, include_payload: bool = False) -> dict[str, Any]:
    op, state = report.operation, report.carrier
    return {
        "operation_id": str(op.id),
        "status": state.status,
        "operation_type": op.operation_type,
        "id": str(op.id),
        "task_type": op.operation_type,
        "mental_model_id": op.mental_model_id,
        "created_at": _iso(op.created_at),
        "updated_at": _iso(state.updated_at),
        "completed_at": _iso(state.completed_at),
        "error_message": state.error_message,
        "retry_count": state.retry_count,
        "next_retry_at": _iso(state.next_retry_at),
        "progress": None,
        "result_metadata": _result_metadata(report),
        "details": _details(state),
        "child_operations": None,
        "task_payload": op.payload if include_payload else None,
    }


def operation_not_found(operation_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {key: None for key in (
        "operation_id", "status", "operation_type", "id", "task_type", "mental_model_id",
        "created_at", "updated_at", "completed_at", "error_message", "retry_count",
        "next_retry_at", "progress", "result_metadata", "details", "child_operations",
        "task_payload",
    )}
    body["operation_id"] = operation_id
    body["status"] = "not_found"
    return body


class OperationsListQuery(QuerySerializer):
    status = serializers.ChoiceField(choices=STATUSES, required=False, allow_null=True,
                                     allow_blank=True)
    type = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                 max_length=64)
    limit = serializers.IntegerField(required=False, default=20, min_value=1, max_value=100)
    # Past PostgreSQL's bigint an OFFSET is a database error; no page is that far anyway.
    offset = serializers.IntegerField(required=False, default=0, min_value=0,
                                      max_value=2**31 - 1)
    exclude_parents = serializers.BooleanField(required=False, default=False)


class OperationGetQuery(QuerySerializer):
    include_payload = serializers.BooleanField(required=False, default=False)
