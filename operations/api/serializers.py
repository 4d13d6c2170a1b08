"""The operations API's wire format (upstream's ``OperationResponse``,
``OperationStatusResponse``, ``OperationsListResponse`` and the action answers): one serializer
per response, which declares its shape (for the OpenAPI document) and renders it (``render``),
building the dict directly in the declared order. A test holds the rendered keys to the
declared fields. The query strings are parsed by the query serializers at the end, which also
document them (``hindsight.api.schema.query_parameters``).

Rendered from an ``OperationReport``: who the operation is (id, type, model, payload, created)
comes from its own row; where its work stands (status, error, retries, times, details, result)
from its carrier — itself, or the operation its work was merged into, which
``result_metadata.superseded_by`` (first hop) and ``carried_by`` (the end) then name.

``details`` is documented by the serializer its operation type registered
(``operations.api.details``; a refresh's: ``mentalmodels.api.operation_details``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from hindsight.api.serializers import (
    Boolean,
    Choice,
    Query,
    Text,
    limit_field,
    offset_field,
)
from operations.api.details import details_serializer, details_shape
from operations.models import STATUSES, SUPERSEDED_BY, TERMINAL_STATUSES, Operation
from operations.selectors import OperationReport

NOT_FOUND = "not_found"
OPERATION_STATUSES = (*STATUSES, NOT_FOUND)


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


def _result_metadata(report: OperationReport) -> dict[str, Any] | None:
    if not report.carried:
        return report.operation.result_metadata
    carried = {k: v for k, v in (report.carrier.result_metadata or {}).items()
               if k != SUPERSEDED_BY}
    return {**carried, SUPERSEDED_BY: report.superseded_by, "carried_by": str(report.carrier.id)}


# --- responses -----------------------------------------------------------------------------------


class OperationDetailsField(serializers.DictField):
    """An operation's typed ``details``: documented by the registered shape's serializer."""


class OperationDetailsFieldExtension(OpenApiSerializerFieldExtension):
    target_class = OperationDetailsField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        serializer = details_serializer()
        if serializer is None:
            return {"type": "object", "additionalProperties": True}
        return auto_schema.resolve_serializer(serializer, direction).ref


class OperationResponseSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    task_type = serializers.CharField()
    operation_id = serializers.UUIDField(allow_null=True)
    operation_type = serializers.CharField(allow_null=True)
    items_count = serializers.IntegerField()
    document_id = serializers.CharField(allow_null=True)
    filename = serializers.CharField(allow_null=True)
    mental_model_id = serializers.CharField(allow_null=True)
    details = OperationDetailsField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(allow_null=True)
    status = serializers.ChoiceField(choices=STATUSES)
    error_message = serializers.CharField(allow_null=True)
    retry_count = serializers.IntegerField(allow_null=True)
    next_retry_at = serializers.DateTimeField(allow_null=True)
    progress = serializers.DictField(allow_null=True)

    @staticmethod
    def render(report: OperationReport) -> dict[str, Any]:
        """One operation of a list page, the declared fields in their order."""
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


class OperationsListResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    operations = OperationResponseSerializer(many=True)

    @staticmethod
    def render(bank_id: str, page: list[OperationReport], *, total: int, limit: int,
               offset: int) -> dict[str, Any]:
        render = OperationResponseSerializer.render
        return {
            "bank_id": bank_id,
            "total": total,
            "limit": limit,
            "offset": offset,
            "operations": [render(report) for report in page],
        }


class OperationStatusResponseSerializer(serializers.Serializer):
    operation_id = serializers.CharField()
    status = serializers.ChoiceField(choices=OPERATION_STATUSES)
    operation_type = serializers.CharField(allow_null=True)
    id = serializers.UUIDField(allow_null=True)
    task_type = serializers.CharField(allow_null=True)
    mental_model_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    error_message = serializers.CharField(allow_null=True)
    retry_count = serializers.IntegerField(allow_null=True)
    next_retry_at = serializers.DateTimeField(allow_null=True)
    progress = serializers.DictField(allow_null=True)
    result_metadata = serializers.DictField(allow_null=True)
    details = OperationDetailsField(allow_null=True)
    child_operations = serializers.ListField(child=serializers.DictField(), allow_null=True)
    task_payload = serializers.DictField(allow_null=True)

    @staticmethod
    def render(report: OperationReport, *, include_payload: bool = False) -> dict[str, Any]:
        """An operation found, the declared fields in their order."""
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

    @staticmethod
    def render_not_found(operation_id: str) -> dict[str, Any]:
        """No such operation (upstream answers 200): the id asked for, ``not_found``, and every
        other declared field null."""
        return {
            "operation_id": operation_id,
            "status": NOT_FOUND,
            "operation_type": None,
            "id": None,
            "task_type": None,
            "mental_model_id": None,
            "created_at": None,
            "updated_at": None,
            "completed_at": None,
            "error_message": None,
            "retry_count": None,
            "next_retry_at": None,
            "progress": None,
            "result_metadata": None,
            "details": None,
            "child_operations": None,
            "task_payload": None,
        }


class OperationActionResponseSerializer(serializers.Serializer):
    """Upstream's ``CancelOperationResponse``, ``RetryOperationResponse`` and
    ``DeleteOperationResponse`` (one shape)."""

    success = serializers.BooleanField()
    message = serializers.CharField()
    operation_id = serializers.UUIDField()

    @staticmethod
    def render(operation_id: Any, message: str) -> dict[str, Any]:
        return {"success": True, "message": message, "operation_id": str(operation_id)}


# --- query strings -------------------------------------------------------------------------------


class OperationsListQuery(Query):
    status = Choice(choices=STATUSES, required=False, help_text="Only operations in this status")
    type = Text(required=False, max_length=64,
                help_text="Only operations of this type (e.g. refresh_mental_model)")
    limit = limit_field(20, 100)
    offset = offset_field()
    exclude_parents = Boolean(required=False, default=False,
                              help_text="Accepted for upstream's clients; no effect here")


class OperationGetQuery(Query):
    include_payload = Boolean(required=False, default=False,
                              help_text="Include the submitted task payload")
