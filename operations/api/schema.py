"""OpenAPI documentation of the operations API: upstream's operation shapes and their enums.

Schema-only: ``operations.api.serializers`` renders the bodies; these serializers describe them.
``details`` is documented by the serializer its operation type registered
(``operations.api.details``; a refresh's: ``mentalmodels.api.operation_details``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from hindsight.api.schema import query_bool, query_int
from operations.api.details import details_serializer
from operations.models import STATUSES

OPERATION_STATUSES = (*STATUSES, "not_found")


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


class OperationsListResponseSerializer(serializers.Serializer):
    bank_id = serializers.CharField()
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    operations = OperationResponseSerializer(many=True)


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


class OperationActionResponseSerializer(serializers.Serializer):
    """Upstream's ``CancelOperationResponse``, ``RetryOperationResponse`` and
    ``DeleteOperationResponse`` (one shape)."""

    success = serializers.BooleanField()
    message = serializers.CharField()
    operation_id = serializers.UUIDField()


LIST_PARAMS = [
    OpenApiParameter("status", {"type": "string", "enum": list(STATUSES)},
                     OpenApiParameter.QUERY, description="Only operations in this status"),
    OpenApiParameter("type", {"type": "string", "maxLength": 64}, OpenApiParameter.QUERY,
                     description="Only operations of this type (e.g. refresh_mental_model)"),
    query_int("limit", 20, minimum=1, maximum=100),
    query_int("offset", 0, maximum=2**31 - 1),
    query_bool("exclude_parents", "Accepted for upstream's clients; no effect here"),
]
GET_PARAMS = [query_bool("include_payload", "Include the submitted task payload")]
