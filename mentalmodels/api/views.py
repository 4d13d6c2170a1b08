"""HTTP views of ``/v1/default/banks/{bank_id}/mental-models``: parse, call one service or
selector, render — each with the serializer that documents it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of
from mentalmodels import selectors, services
from mentalmodels.api import serializers as s
from mentalmodels.api.preview import MentalModelDryRunRefreshResultSerializer
from mentalmodels.models import MentalModel
from mentalmodels.refresh.pipeline import refresh_dry_run
from mentalmodels.staleness import stale_flags


def _full(model: MentalModel) -> dict[str, Any]:
    return s.MentalModelResponseSerializer.render_model(model, detail="full",
                                                        is_stale=stale_flags([model])[model.uid])


class MentalModelCollection(APIView):
    @extend_schema(operation_id="list_mental_models",
                   parameters=query_parameters(s.MentalModelListQuerySerializer),
                   responses={200: s.MentalModelListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> Response:
        query = s.MentalModelListQuerySerializer.parse(request.query_params)
        page = selectors.mental_models_list(
            bank_id=bank_id,
            tags=query["tags"] or [],
            tags_match=query["tags_match"],
            limit=query["limit"],
            offset=query["offset"],
            detail=query["detail"],
            exclude_knowledge_pages=query["exclude_knowledge_pages"],
        )
        flags = stale_flags(page.items, last_write={bank_id: page.last_memory_write_at})
        render = s.MentalModelResponseSerializer.render_model
        items = [render(m, detail=query["detail"], is_stale=flags[m.uid]) for m in page.items]
        return Response(s.MentalModelListResponseSerializer.render(
            {"total": page.total, "limit": query["limit"], "offset": query["offset"]},
            items=items,
        ))

    @extend_schema(operation_id="create_mental_model",
                   request=s.CreateMentalModelRequestSerializer,
                   responses={200: s.CreateMentalModelResponseSerializer,
                              **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.CreateMentalModelRequestSerializer.parse(body_of(request))
        model, operation = services.mental_model_create(
            bank_id=bank_id, **s.CreateMentalModelRequestSerializer.service_kwargs(fields)
        )
        return Response(s.CreateMentalModelResponseSerializer.render(
            {"mental_model_id": model.mental_model_id, "operation_id": operation.id}
        ))


class MentalModelItem(APIView):
    @extend_schema(operation_id="get_mental_model",
                   parameters=query_parameters(s.MentalModelQuerySerializer),
                   responses={200: s.MentalModelResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        detail = s.MentalModelQuerySerializer.parse(request.query_params)["detail"]
        model = selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        flags = stale_flags([model])
        return Response(s.MentalModelResponseSerializer.render_model(
            model, detail=detail, is_stale=flags[model.uid]
        ))

    @extend_schema(operation_id="update_mental_model",
                   request=s.UpdateMentalModelRequestSerializer,
                   responses={200: s.MentalModelResponseSerializer, **errors(404, 422)})
    def patch(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        # Unknown model before body problems: a PATCH of a missing model is a 404.
        selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        fields = s.UpdateMentalModelRequestSerializer.parse(body_of(request))
        model = services.mental_model_update(
            bank_id=bank_id, mental_model_id=mental_model_id,
            **s.UpdateMentalModelRequestSerializer.service_kwargs(fields),
        )
        return Response(_full(model))

    @extend_schema(operation_id="delete_mental_model", request=None,
                   responses={200: s.MentalModelDeleteResponseSerializer, **errors(404)})
    def delete(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        services.mental_model_delete(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(s.MentalModelDeleteResponseSerializer.render())


class MentalModelRefresh(APIView):
    @extend_schema(operation_id="refresh_mental_model",
                   request=s.RefreshMentalModelRequestSerializer,
                   responses={200: s.AsyncOperationSubmitResponseSerializer,
                              **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        mode = s.RefreshMentalModelRequestSerializer.parse(body_of(request)).get("mode")
        operation = services.mental_model_refresh_request(
            bank_id=bank_id, mental_model_id=mental_model_id, mode=mode
        )
        return Response(s.AsyncOperationSubmitResponseSerializer.render(operation))


class MentalModelClear(APIView):
    # The body takes no parameters (``ClearMentalModelRequestSerializer``): documented as none.
    @extend_schema(operation_id="clear_mental_model", request=None,
                   responses={200: s.MentalModelResponseSerializer, **errors(404)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        # Unknown model before body problems, and the body checked before anything changes.
        selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        s.ClearMentalModelRequestSerializer.parse(body_of(request))
        model = services.mental_model_clear(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(_full(model))


class MentalModelHistoryView(APIView):
    @extend_schema(operation_id="get_mental_model_history",
                   responses={200: OpenApiResponse(
                                  s.MentalModelHistoryEntrySerializer(many=True),
                                  description="Newest first"),
                              **errors(404)})
    def get(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        entries = selectors.mental_model_history(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(s.MentalModelHistoryEntrySerializer.render_many(entries))


class MentalModelDryRun(APIView):
    # The body takes no parameters (``DryRunRefreshRequestSerializer``): documented as none.
    @extend_schema(operation_id="dry_run_refresh_mental_model", request=None,
                   responses={200: MentalModelDryRunRefreshResultSerializer,
                              **errors(400, 404, 502, 503, 504)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        if selectors.mental_model_exists(bank_id=bank_id, mental_model_id=mental_model_id):
            s.DryRunRefreshRequestSerializer.parse(body_of(request))
        preview = refresh_dry_run(bank_id=bank_id, mental_model_id=mental_model_id)
        return Response(MentalModelDryRunRefreshResultSerializer.render(preview))
