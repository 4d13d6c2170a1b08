"""HTTP views of bank templates: export a bank's manifest, import one (``dry_run``), serve the
manifest's JSON Schema — parse, call one service or selector, render (upstream's routes and
operation ids)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of
from mentalmodels.bank_templates import selectors, services
from mentalmodels.bank_templates import serializers as s
from mentalmodels.bank_templates.manifest import manifest_parse
from mentalmodels.bank_templates.schema import manifest_schema


class BankTemplateExportView(APIView):
    @extend_schema(operation_id="export_bank_template", summary="Export bank template",
                   request=None, responses={200: s.BankTemplateManifestSerializer,
                                            **errors(404)})
    def get(self, request: Request, bank_id: str) -> Response:
        return Response(selectors.bank_template_export(bank_id=bank_id))


class BankTemplateImportView(APIView):
    @extend_schema(operation_id="import_bank_template", summary="Import bank template",
                   request=s.BankTemplateManifestSerializer,
                   parameters=query_parameters(s.ImportQuery),
                   responses={200: s.BankTemplateImportResponseSerializer,
                              **errors(409, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        query = s.ImportQuery.parse(request.query_params)
        manifest = manifest_parse(body_of(request))
        result = services.bank_template_import(bank_id=bank_id, manifest=manifest,
                                               dry_run=query["dry_run"])
        return Response(s.BankTemplateImportResponseSerializer.render(result))


class BankTemplateSchemaView(APIView):
    @extend_schema(operation_id="get_bank_template_schema", summary="Get bank template JSON Schema",
                   request=None, responses={200: s.BankTemplateSchemaSerializer, **errors(401)})
    def get(self, request: Request) -> Response:
        return Response(manifest_schema())
