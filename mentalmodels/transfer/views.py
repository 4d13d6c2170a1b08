"""HTTP views of the bank transfer: export, import, clone (each answers 202 with the operation)
and the download of an export's archive — parse, call one service, render."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.errors import BadRequest, FieldError
from mentalmodels.transfer import serializers as s
from mentalmodels.transfer import services, storage


def _accepted(operation: Any) -> Response:
    return Response(s.TransferSubmitResponseSerializer.render(operation), status=202)


class BankExportView(APIView):
    @extend_schema(operation_id="export_bank_transfer", request=None,
                   parameters=query_parameters(s.ExportQuery),
                   responses={202: s.TransferSubmitResponseSerializer, **errors(400, 404, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        query = s.ExportQuery.parse(request.query_params)
        if query.get("document_id"):
            raise BadRequest("document_id is not offered here: an export carries the whole bank")
        return _accepted(services.bank_export_submit(bank_id=bank_id, scope=s.scope_of(query)))


class BankCloneView(APIView):
    @extend_schema(operation_id="clone_bank", request=None,
                   parameters=query_parameters(s.CloneQuery),
                   responses={202: s.TransferSubmitResponseSerializer, **errors(400, 404, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        query = s.CloneQuery.parse(request.query_params)
        return _accepted(services.bank_clone_submit(
            bank_id=bank_id, target_bank_id=query["target_bank_id"], scope=s.scope_of(query)))


class BankImportView(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(operation_id="import_bank_transfer",
                   request={"multipart/form-data": {
                       "type": "object", "required": ["file"],
                       "properties": {"file": {"type": "string", "format": "binary"}}}},
                   parameters=query_parameters(s.ImportQuery),
                   responses={202: s.TransferSubmitResponseSerializer,
                              **errors(400, 404, 413, 422)})
    def post(self, request: Request, bank_id: str) -> Response:
        query = s.ImportQuery.parse(request.query_params)
        import_request = s.ImportQuery.request(query)
        if import_request.mode != "restore":
            if query.get("target_bank_id"):
                raise BadRequest("target_bank_id is only valid with mode=restore; a merge "
                                 "imports into the bank in the path")
            if any(query.get(f) is not None for f in
                   ("include_data", "include_bank_config", "include_history")):
                raise BadRequest("include_data / include_bank_config / include_history apply "
                                 "to mode=restore; a merge imports the archive's documents only")
        upload = request.FILES.get("file")
        if upload is None:
            raise FieldError(("body", "file"), "Field required: the archive, as a multipart "
                                               "file named 'file'", "missing")
        path = getattr(upload, "temporary_file_path", lambda: None)()
        if path is not None:  # spooled to disk by the upload handler: never read into memory
            return _accepted(services.bank_import_submit(
                bank_id=bank_id, archive_path=path, request=import_request))
        fd, path = tempfile.mkstemp(prefix="hindsight-upload-", suffix=".zip")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            return _accepted(services.bank_import_submit(
                bank_id=bank_id, archive_path=path, request=import_request))
        finally:
            os.unlink(path)


class FileDownloadView(APIView):
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The client asks for application/zip: the archive is a file response, not rendered,
        # and a refusal still answers in JSON.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(operation_id="download_file", request=None,
                   responses={(200, "application/zip"): OpenApiResponse(
                       OpenApiTypes.BINARY, description="The archive"), **errors(404)})
    def get(self, request: Request, key: str) -> FileResponse:
        download = storage.download_open(key)
        response = FileResponse(download.file, content_type="application/zip", as_attachment=True,
                                filename=download.filename)
        if download.size is not None:
            response["Content-Length"] = str(download.size)
        return response
