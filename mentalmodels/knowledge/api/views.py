"""HTTP views of ``/v1/default/banks/{bank_id}/knowledge-base``: parse, call one service or
selector, render — each with the serializer that documents it (upstream's operation ids and
status codes: the creates answer 201)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of
from mentalmodels.api.serializers import MentalModelDeleteResponseSerializer
from mentalmodels.knowledge import selectors, services
from mentalmodels.knowledge.api import serializers as s
from mentalmodels.knowledge.api import treecache


def _node(bank_id: str, node_id: str) -> dict[str, Any]:
    tree = selectors.knowledge_tree_node(bank_id=bank_id, node_id=node_id)
    [node] = tree.nodes
    return s.KnowledgeNodeSerializer.render_node(node, is_stale=tree.stale.get(node.id))


class KnowledgeTree(APIView):
    @extend_schema(operation_id="get_knowledge_base_tree",
                   parameters=query_parameters(s.KnowledgeTreeQuerySerializer),
                   responses={200: s.KnowledgeTreeResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> HttpResponse:
        query = s.KnowledgeTreeQuerySerializer.parse(request.query_params)
        return treecache.tree_response(
            bank_id=bank_id, page_filter=s.KnowledgeTreeQuerySerializer.page_filter(query),
            if_none_match=request.headers.get("If-None-Match"))


class KnowledgeFolders(APIView):
    @extend_schema(operation_id="create_knowledge_folder",
                   request=s.CreateFolderRequestSerializer,
                   responses={201: s.KnowledgeNodeSerializer, **errors(400, 409, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.CreateFolderRequestSerializer.parse(body_of(request))
        node = services.knowledge_folder_create(bank_id=bank_id, name=fields["name"],
                                                parent_id=fields["parent_id"])
        return Response(_node(bank_id, node.id), status=201)


class KnowledgePages(APIView):
    @extend_schema(operation_id="create_knowledge_page",
                   request=s.CreatePageRequestSerializer,
                   responses={201: s.CreateKnowledgePageResponseSerializer,
                              **errors(400, 409, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        fields = s.CreatePageRequestSerializer.parse(body_of(request))
        node, operation = services.knowledge_page_create(
            bank_id=bank_id, **s.CreatePageRequestSerializer.service_kwargs(fields))
        return Response(s.CreateKnowledgePageResponseSerializer.render((node, operation)),
                        status=201)


class KnowledgePage(APIView):
    @extend_schema(operation_id="get_knowledge_page",
                   responses={200: s.KnowledgePageResponseSerializer, **errors(404)})
    def get(self, request: Request, bank_id: str, page_id: str) -> Response:
        node = selectors.knowledge_page_get(bank_id=bank_id, page_id=page_id)
        return Response(s.KnowledgePageResponseSerializer.render(node))


class KnowledgeNodeItem(APIView):
    @extend_schema(operation_id="update_knowledge_node",
                   request=s.UpdateNodeRequestSerializer,
                   responses={200: s.KnowledgeNodeSerializer, **errors(400, 404, 409, 422)})
    def patch(self, request: Request, bank_id: str, node_id: str) -> Response:
        fields = s.UpdateNodeRequestSerializer.parse(body_of(request))
        services.knowledge_node_update(bank_id=bank_id, node_id=node_id,
                                       update=s.UpdateNodeRequestSerializer.node_update(fields))
        return Response(_node(bank_id, node_id))

    @extend_schema(operation_id="delete_knowledge_node", request=None,
                   responses={200: MentalModelDeleteResponseSerializer, **errors(404)})
    def delete(self, request: Request, bank_id: str, node_id: str) -> Response:
        services.knowledge_node_delete(bank_id=bank_id, node_id=node_id)
        return Response(MentalModelDeleteResponseSerializer.render())


class KnowledgeSearch(APIView):
    @extend_schema(operation_id="search_knowledge_base",
                   parameters=query_parameters(s.KnowledgeSearchQuerySerializer),
                   responses={200: s.KnowledgePageSearchResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str) -> Response:
        query = s.KnowledgeSearchQuerySerializer.parse(request.query_params)
        hits = selectors.knowledge_search(
            bank_id=bank_id, query=query["q"], limit=query["limit"],
            page_filter=s.KnowledgeSearchQuerySerializer.page_filter(query))
        return Response(s.KnowledgePageSearchResponseSerializer.render(hits))


class KnowledgeExport(APIView):
    @extend_schema(operation_id="export_knowledge_base",
                   responses={200: s.KnowledgePageBundleResponseSerializer, **errors(404)})
    def get(self, request: Request, bank_id: str) -> Response:
        return Response(s.KnowledgePageBundleResponseSerializer.render(
            selectors.knowledge_export(bank_id=bank_id)))
