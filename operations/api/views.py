"""Operations API (docs/behaviour.md#the-operations-api): list, get, cancel, retry, delete —
upstream's wire format."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors as api_errors
from hindsight.infra.edge.schema import query_parameters
from hindsight.infra.errors import BadRequest, NotFound
from operations.actions import operation_cancel, operation_delete, operation_retry
from operations.api.serializers import (
    OperationActionResponseSerializer,
    OperationGetQuery,
    OperationsListQuery,
    OperationsListResponseSerializer,
    OperationStatusResponseSerializer,
)
from operations.selectors import operation_report, operations_bank_exists, operations_list


def _doc(operation_id: str, *, response: Any, params: Any = (),
         statuses: tuple[int, ...] = ()) -> Any:
    """OpenAPI metadata with upstream's operation ids: the response serializer that renders the
    answer documents it."""
    return extend_schema(
        operation_id=operation_id,
        request=None,
        responses={200: response, **api_errors(*statuses)},
        parameters=list(params),
    )


def _operation_uuid(operation_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(operation_id)
    except ValueError:
        raise BadRequest(f"Invalid operation_id format: {operation_id}") from None


def _action(operation_id: uuid.UUID, message: str) -> dict[str, Any]:
    return OperationActionResponseSerializer.render({"operation_id": operation_id,
                                                     "message": message})


class OperationsListView(APIView):
    @_doc("list_operations", response=OperationsListResponseSerializer,
          params=query_parameters(OperationsListQuery), statuses=(404, 422))
    def get(self, request: Request, bank_id: str) -> Response:
        query = OperationsListQuery.parse(request.query_params)
        if not operations_bank_exists(bank_id=bank_id):
            raise NotFound(f"Bank '{bank_id}' not found")
        total, page = operations_list(
            bank_id=bank_id,
            status=query.get("status") or None,
            operation_type=query.get("type") or None,
            limit=query["limit"],
            offset=query["offset"],
        )
        return Response(OperationsListResponseSerializer.render(
            {"bank_id": bank_id, "operations": page, "total": total, "limit": query["limit"],
             "offset": query["offset"]}
        ))


class OperationView(APIView):
    @_doc("get_operation_status", response=OperationStatusResponseSerializer,
          params=query_parameters(OperationGetQuery), statuses=(400, 422))
    def get(self, request: Request, bank_id: str, operation_id: str) -> Response:
        op_uuid = _operation_uuid(operation_id)
        query = OperationGetQuery.parse(request.query_params)
        report = operation_report(bank_id=bank_id, operation_id=op_uuid)
        if report is None:
            return Response(OperationStatusResponseSerializer.render_not_found(operation_id))
        return Response(OperationStatusResponseSerializer.render_report(
            report, include_payload=query["include_payload"]
        ))

    @_doc("cancel_operation", response=OperationActionResponseSerializer,
          statuses=(400, 404, 409))
    def delete(self, request: Request, bank_id: str, operation_id: str) -> Response:
        op = operation_cancel(bank_id=bank_id, operation_id=_operation_uuid(operation_id))
        return Response(_action(op.id, f"Operation {op.id} cancelled"))


class OperationRetryView(APIView):
    @_doc("retry_operation", response=OperationActionResponseSerializer,
          statuses=(400, 404, 409))
    def post(self, request: Request, bank_id: str, operation_id: str) -> Response:
        op, message = operation_retry(bank_id=bank_id,
                                      operation_id=_operation_uuid(operation_id))
        return Response(_action(op.id, message))


class OperationDeleteView(APIView):
    @_doc("delete_operation", response=OperationActionResponseSerializer,
          statuses=(400, 404, 409))
    def delete(self, request: Request, bank_id: str, operation_id: str) -> Response:
        op_uuid = _operation_uuid(operation_id)
        operation_delete(bank_id=bank_id, operation_id=op_uuid)
        return Response(_action(op_uuid, f"Operation {op_uuid} deleted"))
