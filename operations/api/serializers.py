"""The operations API's wire format (upstream's ``OperationResponse``,
``OperationStatusResponse``, ``OperationsListResponse`` and the action answers): one serializer
per response, ``Rendered`` (``hindsight.infra.edge.serializers``): its declared fields are its
OpenAPI shape and its renderer. The query strings are parsed by the query serializers at the end, which also
document them (``hindsight.infra.edge.schema.query_parameters``).

Rendered from an ``OperationReport``: who the operation is (id, type, model, payload, created)
comes from its own row; where its work stands (status, error, retries, times, details, result)
from its carrier — itself, or the operation its work was merged into, which
``result_metadata.superseded_by`` (first hop) and ``carried_by`` (the end) then name.

``details`` is documented by the serializer its operation type registered
(``operations.api.details``; a refresh's: ``mentalmodels.api.operation_details``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    Boolean,
    Choice,
    Query,
    Rendered,
    Text,
    computed,
    const,
    limit_field,
    offset_field,
    page_fields,
)
from hindsight.infra.vocabulary import TERMINAL_STATUSES
from operations.api.details import details_serializer, details_shape
from operations.models import STATUSES, SUPERSEDED_BY, Operation
from operations.selectors import OperationReport

NOT_FOUND = "not_found"
OPERATION_STATUSES = (*STATUSES, NOT_FOUND)


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


def _own(name: str) -> Any:
    """A field read off the operation itself (who it is)."""
    return lambda report: getattr(report.operation, name)


def _state(name: str) -> Any:
    """A field read off the carrier (where its work stands)."""
    return lambda report: getattr(report.carrier, name)


class OperationResponseSerializer(Rendered):
    """One operation of a list page (an ``OperationReport``)."""

    id = computed(serializers.UUIDField(), _own("id"))
    task_type = computed(serializers.CharField(), _own("operation_type"))
    operation_id = computed(serializers.UUIDField(allow_null=True), _own("id"))
    operation_type = computed(serializers.CharField(allow_null=True), _own("operation_type"))
    items_count = computed(serializers.IntegerField(), lambda r: _items_count(r.operation))
    document_id = computed(serializers.CharField(allow_null=True),
                           lambda r: _document_id(r.operation))
    filename = const(serializers.CharField(allow_null=True), None)
    mental_model_id = computed(serializers.CharField(allow_null=True), _own("mental_model_id"))
    details = computed(OperationDetailsField(allow_null=True), lambda r: _details(r.carrier))
    created_at = computed(serializers.DateTimeField(), _own("created_at"))
    updated_at = computed(serializers.DateTimeField(allow_null=True), _state("updated_at"))
    status = computed(serializers.ChoiceField(choices=STATUSES), _state("status"))
    error_message = computed(serializers.CharField(allow_null=True), _state("error_message"))
    retry_count = computed(serializers.IntegerField(allow_null=True), _state("retry_count"))
    next_retry_at = computed(serializers.DateTimeField(allow_null=True), _state("next_retry_at"))
    progress = const(serializers.DictField(allow_null=True), None)


class OperationsListResponseSerializer(Rendered):
    bank_id = serializers.CharField()
    total, limit, offset = page_fields()
    operations = OperationResponseSerializer(many=True)


class OperationStatusResponseSerializer(Rendered):
    """An operation found (an ``OperationReport``); ``task_payload`` only when asked for."""

    operation_id = computed(serializers.CharField(), lambda r: str(r.operation.id))
    status = computed(serializers.ChoiceField(choices=OPERATION_STATUSES), _state("status"))
    operation_type = computed(serializers.CharField(allow_null=True), _own("operation_type"))
    id = computed(serializers.UUIDField(allow_null=True), _own("id"))
    task_type = computed(serializers.CharField(allow_null=True), _own("operation_type"))
    mental_model_id = computed(serializers.CharField(allow_null=True), _own("mental_model_id"))
    created_at = computed(serializers.DateTimeField(allow_null=True), _own("created_at"))
    updated_at = computed(serializers.DateTimeField(allow_null=True), _state("updated_at"))
    completed_at = computed(serializers.DateTimeField(allow_null=True), _state("completed_at"))
    error_message = computed(serializers.CharField(allow_null=True), _state("error_message"))
    retry_count = computed(serializers.IntegerField(allow_null=True), _state("retry_count"))
    next_retry_at = computed(serializers.DateTimeField(allow_null=True), _state("next_retry_at"))
    progress = const(serializers.DictField(allow_null=True), None)
    result_metadata = computed(serializers.DictField(allow_null=True), _result_metadata)
    details = computed(OperationDetailsField(allow_null=True), lambda r: _details(r.carrier))
    child_operations = const(serializers.ListField(child=serializers.DictField(),
                                                   allow_null=True), None)
    task_payload = computed(serializers.DictField(allow_null=True), _own("payload"))

    @classmethod
    def render_report(cls, report: OperationReport, *, include_payload: bool) -> dict[str, Any]:
        return cls.render(report) if include_payload else cls.render(report, task_payload=None)

    @classmethod
    def render_not_found(cls, operation_id: str) -> dict[str, Any]:
        """No such operation (upstream answers 200): the id asked for, ``not_found``, and every
        other declared field null."""
        return {name: None for name in cls.plan_names()} | {"operation_id": operation_id,
                                                             "status": NOT_FOUND}


class OperationActionResponseSerializer(Rendered):
    """Upstream's ``CancelOperationResponse``, ``RetryOperationResponse`` and
    ``DeleteOperationResponse`` (one shape)."""

    success = const(serializers.BooleanField(), True)
    message = serializers.CharField()
    operation_id = serializers.UUIDField()


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
