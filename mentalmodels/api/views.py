"""HTTP views of ``/v1/default/banks/{bank_id}/mental-models``: parse, call one service or
selector, render (SPEC section 2)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.api.schema import errors
from mentalmodels import selectors, services
from mentalmodels.api import schema
from mentalmodels.api import serializers as s
from mentalmodels.api.preview import render_preview
from mentalmodels.pipeline import refresh_dry_run
from mentalmodels.staleness import stale_flags


def _body(request: Request) -> Any:
    # An empty body parses to an empty QueryDict/dict in DRF; treat it as "no body".
    data = request.data
    if hasattr(data, "dict") and not data:
        return None
    return data


class MentalModelCollection(APIView):
    @extend_schema(operation_id="list_mental_models", parameters=schema.LIST_PARAMS,
                   responses={200: schema.MentalModelListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> Response:
        query = s.parse_list_query(request.query_params)
        page, total = selectors.mental_models_list(
            bank_id=bank_id,
            tags=query["tags"],
            tags_match=query["tags_match"],
            limit=query["limit"],
            offset=query["offset"],
            detail=query["detail"],
        )
        flags = stale_flags(page)
        items = [s.render_model(m, detail=query["detail"], is_stale=flags[m.uid]) for m in page]
        return Response(
            {"items": items, "total": total, "limit": query["limit"], "offset": query["offset"]}
        )

    @extend_schema(operation_id="create_mental_model",
                   request=schema.CreateMentalModelRequestSerializer,
                   responses={200: schema.CreateMentalModelResponseSerializer,
                              **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.parse_create(_body(request))
        model, operation = services.mental_model_create(bank_id=bank_id, **fields)
        return Response({"mental_model_id": model.mental_model_id, "operation_id": str(operation.id)})


class MentalModelItem(APIView):
    @extend_schema(operation_id="get_mental_model", parameters=schema.GET_PARAMS,
                   responses={200: schema.MentalModelResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        detail = s.parse_detail(request.query_params, default="full")
        model = selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        flags = stale_flags([model])
        return Response(s.render_model(model, detail=detail, is_stale=flags[model.uid]))

    @extend_schema(operation_id="update_mental_model",
                   request=schema.UpdateMentalModelRequestSerializer,
                   responses={200: schema.MentalModelResponseSerializer, **errors(404, 422)})
    def patch(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        # Unknown model before body problems: a PATCH of a missing model is a 404.
        selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        fields = s.parse_update(_body(request))
        model = services.mental_model_update(
            bank_id=bank_id, mental_model_id=mental_model_id, **fields
        )
        return Response(s.render_model(model, detail="full", is_stale=stale_flags([model])[model.uid]))

    @extend_schema(operation_id="delete_mental_model", request=None,
                   responses={200: schema.MentalModelDeleteResponseSerializer, **errors(404)})
    def delete(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        services.mental_model_delete(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response({"status": "deleted"})


class MentalModelRefresh(APIView):
    @extend_schema(operation_id="refresh_mental_model",
                   request=schema.RefreshMentalModelRequestSerializer,
                   responses={200: schema.AsyncOperationSubmitResponseSerializer,
                              **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        mode = s.parse_refresh(_body(request))
        operation = services.mental_model_refresh_request(
            bank_id=bank_id, mental_model_id=mental_model_id, mode=mode
        )
        return Response({"operation_id": str(operation.id), "status": "queued"})


class MentalModelClear(APIView):
    @extend_schema(operation_id="clear_mental_model", request=None,
                   responses={200: schema.MentalModelResponseSerializer, **errors(404)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        # Unknown model before body problems, and the body checked before anything changes.
        selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        s.parse_no_parameters(_body(request), call="clear")
        model = services.mental_model_clear(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(s.render_model(model, detail="full", is_stale=stale_flags([model])[model.uid]))


class MentalModelHistoryView(APIView):
    @extend_schema(operation_id="get_mental_model_history",
                   responses={200: OpenApiResponse(
                                  schema.MentalModelHistoryEntrySerializer(many=True),
                                  description="Newest first"),
                              **errors(404)})
    def get(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        entries = selectors.mental_model_history(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response([s.render_history_entry(e) for e in entries])


class MentalModelDryRun(APIView):
    @extend_schema(operation_id="dry_run_refresh_mental_model", request=None,
                   responses={200: schema.MentalModelDryRunRefreshResultSerializer,
                              **errors(400, 404, 502, 503, 504)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        if selectors.mental_model_exists(bank_id=bank_id, mental_model_id=mental_model_id):
            s.parse_no_parameters(_body(request), call="dry-run-refresh")
        preview = refresh_dry_run(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(render_preview(preview))
