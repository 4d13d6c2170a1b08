"""HTTP views of ``/v1/default/banks/{bank_id}/directives``: parse, call one service or
selector, render (upstream's operation ids; create answers 200, as upstream)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of
from mentalmodels.api.serializers import MentalModelDeleteResponseSerializer
from mentalmodels.directives import selectors, services
from mentalmodels.directives.api import serializers as s


class DirectiveCollection(APIView):
    @extend_schema(operation_id="list_directives", summary="List directives",
                   parameters=query_parameters(s.DirectiveListQuerySerializer),
                   responses={200: s.DirectiveListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> Response:
        query = s.DirectiveListQuerySerializer.parse(request.query_params)
        page = selectors.directives_list(
            bank_id=bank_id, tags=query["tags"] or (), tags_match=query["tags_match"],
            active_only=query["active_only"], limit=query["limit"], offset=query["offset"])
        return Response(s.DirectiveListResponseSerializer.render(
            page, limit=query["limit"], offset=query["offset"]))

    @extend_schema(operation_id="create_directive", summary="Create directive",
                   request=s.CreateDirectiveRequestSerializer,
                   responses={200: s.DirectiveResponseSerializer, **errors(400, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.CreateDirectiveRequestSerializer.parse(body_of(request))
        directive = services.directive_create(
            bank_id=bank_id, **s.CreateDirectiveRequestSerializer.service_kwargs(fields))
        return Response(s.DirectiveResponseSerializer.render(directive))


class DirectiveItem(APIView):
    @extend_schema(operation_id="get_directive", summary="Get directive",
                   responses={200: s.DirectiveResponseSerializer, **errors(404)})
    def get(self, request: Request, bank_id: str, directive_id: str) -> Response:
        directive = selectors.directive_get(bank_id=bank_id, directive_id=directive_id)
        return Response(s.DirectiveResponseSerializer.render(directive))

    @extend_schema(operation_id="update_directive", summary="Update directive",
                   request=s.UpdateDirectiveRequestSerializer,
                   responses={200: s.DirectiveResponseSerializer, **errors(404, 422)})
    def patch(self, request: Request, bank_id: str, directive_id: str) -> Response:
        fields = s.UpdateDirectiveRequestSerializer.parse(body_of(request))
        directive = services.directive_update(
            bank_id=bank_id, directive_id=directive_id,
            **s.UpdateDirectiveRequestSerializer.service_kwargs(fields))
        return Response(s.DirectiveResponseSerializer.render(directive))

    @extend_schema(operation_id="delete_directive", summary="Delete directive", request=None,
                   responses={200: MentalModelDeleteResponseSerializer, **errors(404)})
    def delete(self, request: Request, bank_id: str, directive_id: str) -> Response:
        services.directive_delete(bank_id=bank_id, directive_id=directive_id)
        return Response(MentalModelDeleteResponseSerializer.render())
