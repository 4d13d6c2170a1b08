"""Unauthenticated service endpoints: /health and /version."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from hindsight.infra.config import VERSION
from hindsight.infra.edge.schema import HealthSerializer, VersionSerializer


@extend_schema(operation_id="health_endpoint_health_get",
               responses={200: HealthSerializer,
                          503: OpenApiResponse(HealthSerializer,
                                               description="Database unreachable")})
@api_view(["GET"])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "connected"
    except Exception as exc:  # the health endpoint reports, it does not raise
        return Response({"status": "unhealthy", "database": f"error: {exc}"}, status=503)
    return Response({"status": "healthy", "database": database})


@extend_schema(operation_id="get_version", responses={200: VersionSerializer})
@api_view(["GET"])
@permission_classes([AllowAny])
def version(request: Request) -> Response:
    return Response({"api_version": VERSION, "features": {"mental_models": True},
                     "llm": settings.HINDSIGHT.llm_summary})
