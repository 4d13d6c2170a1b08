"""Tenant API key: with ``HINDSIGHT_API_TENANT_API_KEY`` set, /v1 and /mcp requests need the bearer.

A middleware, not a DRF permission, so it covers every /v1 path (unknown routes included) before
any view runs. ``/health``, ``/version``, the API docs and the admin (Django's own login) stay
open. The key is compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


def bearer_matches(header: str, expected: str) -> bool:
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode(), expected.encode()
    )


def _is_mcp(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


class TenantApiKeyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        expected = settings.HINDSIGHT.tenant_api_key
        if (
            expected
            and (request.path.startswith("/v1/") or _is_mcp(request.path))
            and not bearer_matches(request.META.get("HTTP_AUTHORIZATION", ""), expected)
        ):
            response = JsonResponse(
                {"detail": "missing or invalid API key (Authorization: Bearer <key>)"},
                status=401,
            )
            response["WWW-Authenticate"] = "Bearer"
            return response
        return self.get_response(request)
