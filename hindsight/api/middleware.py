"""Request body size limit (``HINDSIGHT_API_MAX_REQUEST_BYTES``) answered with a 413."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.HINDSIGHT.max_request_bytes
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Content-Length must be an integer"}, status=400)
        if length > limit:
            return JsonResponse(
                {"detail": f"request body of {length} bytes exceeds the limit of {limit} bytes "
                           "(HINDSIGHT_API_MAX_REQUEST_BYTES)"},
                status=413,
            )
        return self.get_response(request)
