"""Unauthenticated service endpoints: /health, the probes /health/live and /health/ready, and
/version."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from hindsight.infra.config import VERSION
from hindsight.infra.edge.schema import (
    HealthSerializer,
    LivenessSerializer,
    ReadinessSerializer,
    VersionSerializer,
)

# A probe answers within a Kubernetes probe's default timeout (1 s) only if its checks do; a
# server that does not answer in this long is as good as down for the API.
PROBE_TIMEOUT_SECONDS = 0.5
# When this process loaded its views: the liveness probe's uptime.
_STARTED = time.monotonic()


@extend_schema(operation_id="health_endpoint_health_get",
               responses={200: HealthSerializer,
                          503: OpenApiResponse(HealthSerializer,
                                               description="Database unreachable")})
@api_view(["GET"])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    database = _database_problem()
    if database is not None:
        return Response({"status": "unhealthy", "database": database}, status=503)
    return Response({"status": "healthy", "database": "connected"})


def _database_problem() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # a probe reports, it does not raise
        return f"error: {exc}"
    return None


def _broker_problem() -> str | None:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL,
                                  socket_connect_timeout=PROBE_TIMEOUT_SECONDS,
                                  socket_timeout=PROBE_TIMEOUT_SECONDS)
    try:
        client.ping()
    except Exception as exc:  # a probe reports, it does not raise
        return f"error: {exc}"
    finally:
        client.close()
    return None


@extend_schema(operation_id="get_liveness", responses={200: LivenessSerializer})
@api_view(["GET"])
@permission_classes([AllowAny])
def health_live(request: Request) -> Response:
    """Liveness: the process answers. It checks nothing else, so a database or broker outage
    never gets a healthy API process restarted (readiness takes it out of service instead)."""
    return Response({"status": "alive", "version": VERSION,
                     "uptime_seconds": round(time.monotonic() - _STARTED, 3)})


@extend_schema(operation_id="get_readiness",
               responses={200: ReadinessSerializer,
                          503: OpenApiResponse(ReadinessSerializer,
                                               description="PostgreSQL or the broker unreachable")})
@api_view(["GET"])
@permission_classes([AllowAny])
def health_ready(request: Request) -> Response:
    """Readiness: PostgreSQL and the broker both answer, so requests can be served and the work
    they submit can be sent. Upstream's shape (``/health``'s), and the broker beside it."""
    database, broker = _database_problem(), _broker_problem()
    ready = database is None and broker is None
    return Response({"status": "healthy" if ready else "unhealthy",
                     "database": database or "connected", "broker": broker or "connected"},
                    status=200 if ready else 503)


@extend_schema(operation_id="get_version", responses={200: VersionSerializer})
@api_view(["GET"])
@permission_classes([AllowAny])
def version(request: Request) -> Response:
    return Response({"api_version": VERSION, "features": {"mental_models": True},
                     "llm": settings.HINDSIGHT.llm_summary})
