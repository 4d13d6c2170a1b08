"""HTTP views of ``/v1/default/banks/{bank_id}/webhooks``: parse, call one service or selector,
render (upstream's operation ids and statuses: create answers 201)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of, parse_datetime_value
from hindsight.infra.errors import FieldError
from hindsight.infra.vocabulary import iso
from hindsight.webhooks import selectors, services
from hindsight.webhooks.api import serializers as s


class WebhookCollection(APIView):
    @extend_schema(operation_id="list_webhooks", summary="List webhooks",
                   parameters=query_parameters(s.WebhookListQuerySerializer),
                   responses={200: s.WebhookListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> Response:
        query = s.WebhookListQuerySerializer.parse(request.query_params)
        page = selectors.webhooks_list(bank_id=bank_id, limit=query["limit"],
                                       offset=query["offset"])
        return Response(s.WebhookListResponseSerializer.render(
            page, limit=query["limit"], offset=query["offset"]))

    @extend_schema(operation_id="create_webhook", summary="Register webhook",
                   request=s.CreateWebhookRequestSerializer,
                   responses={201: s.WebhookResponseSerializer, **errors(404, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.CreateWebhookRequestSerializer.parse(body_of(request))
        hook = services.webhook_create(
            bank_id=bank_id, **s.CreateWebhookRequestSerializer.service_kwargs(fields))
        return Response(s.WebhookResponseSerializer.render(hook), status=201)


class WebhookItem(APIView):
    @extend_schema(operation_id="update_webhook", summary="Update webhook",
                   request=s.UpdateWebhookRequestSerializer,
                   responses={200: s.WebhookResponseSerializer, **errors(404, 422)})
    def patch(self, request: Request, bank_id: str, webhook_id: str) -> Response:
        selectors.webhook_get(bank_id=bank_id, webhook_id=webhook_id)  # 404 before the body
        changes = s.UpdateWebhookRequestSerializer.parse(body_of(request))
        hook = services.webhook_update(bank_id=bank_id, webhook_id=webhook_id, changes=changes)
        return Response(s.WebhookResponseSerializer.render(hook))

    @extend_schema(operation_id="delete_webhook", summary="Delete webhook", request=None,
                   responses={200: s.WebhookDeleteResponseSerializer, **errors(404, 422)})
    def delete(self, request: Request, bank_id: str, webhook_id: str) -> Response:
        services.webhook_delete(bank_id=bank_id, webhook_id=webhook_id)
        return Response(s.WebhookDeleteResponseSerializer.render())


class WebhookDeliveries(APIView):
    @extend_schema(operation_id="list_webhook_deliveries", summary="List webhook deliveries",
                   parameters=query_parameters(s.WebhookDeliveryListQuerySerializer),
                   responses={200: s.WebhookDeliveryListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str, webhook_id: str) -> Response:
        query = s.WebhookDeliveryListQuerySerializer.parse(request.query_params)
        cursor = None
        if query.get("cursor"):
            try:
                cursor = parse_datetime_value(query["cursor"])
            except ValueError:
                raise FieldError(("query", "cursor"), "the cursor is a next_cursor answered "
                                 "before (an ISO 8601 date-time)", "datetime_parsing") from None
        page, next_cursor = selectors.webhook_deliveries(
            bank_id=bank_id, webhook_id=webhook_id, limit=query["limit"], cursor=cursor)
        return Response(s.WebhookDeliveryListResponseSerializer.render(
            None, items=s.WebhookDeliveryResponseSerializer.render_many(page),
            next_cursor=iso(next_cursor)))
