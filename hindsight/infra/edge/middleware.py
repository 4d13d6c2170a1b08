"""Request guards applied before any view: the body size limit
(``HINDSIGHT_API_MAX_REQUEST_BYTES``, a 413; a bank archive's upload has its own,
``HINDSIGHT_API_TRANSFER_MAX_UPLOAD_BYTES``) and NUL characters in path parameters (a 422);
and after it, a database outage as a 503 (``UnavailableMiddleware``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from hindsight.infra.edge.errors import unavailable_response
from hindsight.infra.edge.problems import problem

# The bank import route (mentalmodels.transfer): the one body that is an archive.
ARCHIVE_UPLOAD_SUFFIX = "/transfer/import"


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit, variable = settings.HINDSIGHT.max_request_bytes, "HINDSIGHT_API_MAX_REQUEST_BYTES"
        # An archive upload is streamed to disk by the multipart parser, never held whole.
        if request.path.endswith(ARCHIVE_UPLOAD_SUFFIX):
            limit = settings.HINDSIGHT.transfer_max_upload_bytes
            variable = "HINDSIGHT_API_TRANSFER_MAX_UPLOAD_BYTES"
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Content-Length must be an integer"}, status=400)
        if length > limit:
            return JsonResponse(
                {"detail": f"request body of {length} bytes exceeds the limit of {limit} bytes "
                           f"({variable})"},
                status=413,
            )
        return self.get_response(request)


class PathNulMiddleware:
    """A NUL character in a path parameter is a 422 naming the parameter.

    PostgreSQL text cannot hold NUL, so such an id would otherwise reach a query and fail there
    as a 500. Checked once, for every route, on the resolved URL parameters.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], view_args: Any,
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        bad = [name for name, value in view_kwargs.items()
               if isinstance(value, str) and "\x00" in value]
        if not bad:
            return None
        return JsonResponse(
            {"detail": [problem("null_characters", ["path", name]) for name in bad]},
            status=422,
        )


class UnavailableMiddleware:
    """A view (DRF's, the admin's, any) or its rendering that meets PostgreSQL unreachable
    answers 503 with ``Retry-After`` instead of a 500 (``errors.unavailable_response``). DRF
    hands an exception its handler does not map back to Django, so this one place sees them all.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable_response(exception)
