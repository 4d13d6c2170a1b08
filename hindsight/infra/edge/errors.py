"""The one error shape: upstream's FastAPI bodies, so the official clients parse them.

422 ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`` for field problems;
``{"detail": "..."}`` for 400/401/404/409/413 and the rest. A view that meets PostgreSQL
unreachable answers 503 with ``Retry-After`` (``unavailable_response``, applied to every view by
``hindsight.infra.edge.middleware.UnavailableMiddleware``), never a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from hindsight.infra.edge.problems import problem
from hindsight.infra.errors import DomainError, FieldError, FieldErrors

log = logging.getLogger(__name__)

# What a 503 asks a client to wait before it tries again: a database restart or failover takes
# seconds, and the next request after it is back is served (each request connects anew).
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


def unavailable_response(exc: BaseException) -> JsonResponse | None:
    """503 with ``Retry-After`` when ``exc`` says PostgreSQL cannot serve the request now — it
    refuses or drops connections, or fails a statement for an operational reason (a restart,
    a failover, too many connections) — else None (docs/behaviour.md#unavailable-never-500).
    Nothing half-written stays: the request's transaction, if any, rolled back."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return None
    log.warning("the database is unavailable: %s", exc)
    response = JsonResponse(
        {"detail": "the database is unavailable; nothing was changed: retry in "
                   f"{UNAVAILABLE_RETRY_AFTER_SECONDS} s"},
        status=503,
    )
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    return response


def flatten_errors(detail: Any, loc: list[str | int]) -> list[dict[str, object]]:
    """DRF's nested error detail → FastAPI's flat list, each ``loc`` starting with ``loc``."""
    if isinstance(detail, dict):
        out: list[dict[str, object]] = []
        for key, value in detail.items():
            sub = loc if key == "non_field_errors" else [*loc, key]
            out.extend(flatten_errors(value, sub))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return [
                {"loc": loc, "msg": str(item), "type": getattr(item, "code", None) or "value_error"}
                for item in detail
            ]
        out = []
        for index, item in enumerate(detail):
            out.extend(flatten_errors(item, [*loc, index]))
        return out
    return [{"loc": loc, "msg": str(detail), "type": getattr(detail, "code", None) or "value_error"}]


def validation_body(detail: Any, root: str = "body") -> dict[str, object]:
    return {"detail": flatten_errors(detail, [root])}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, (FieldError, FieldErrors)):
        return Response({"detail": exc.errors}, status=422)
    if isinstance(exc, DomainError):
        return Response({"detail": exc.detail, **exc.body_extra()}, status=exc.status_code,
                        headers=exc.headers() or None)
    if isinstance(exc, exceptions.ValidationError):
        return Response(validation_body(exc.detail), status=422)
    if isinstance(exc, exceptions.ParseError):
        return Response({"detail": [problem("json_invalid", ["body"], error=exc.detail)]},
                        status=422)
    if isinstance(exc, Http404):
        return Response({"detail": "Not Found"}, status=404)
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if isinstance(exc, exceptions.NotAuthenticated):
            headers["WWW-Authenticate"] = "Bearer"
            return Response({"detail": str(exc.detail)}, status=401, headers=headers)
        return Response({"detail": str(exc.detail)}, status=exc.status_code)
    return None


def json_400(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """Django's own 400s (too many query parameters or fields, a suspicious request) in the
    error shape, with Django's message, which names the setting at fault."""
    detail = str(exception) if exception is not None and str(exception) else "Bad Request"
    return JsonResponse({"detail": detail}, status=status.HTTP_400_BAD_REQUEST)


def json_404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "Not Found"}, status=status.HTTP_404_NOT_FOUND)


def json_500(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"detail": "Internal Server Error"}, status=500)
