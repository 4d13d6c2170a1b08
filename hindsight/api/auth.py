"""Tenant API key: with ``HINDSIGHT_API_TENANT_API_KEY`` set, every /v1 call needs the bearer."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class TenantApiKey(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        expected = settings.HINDSIGHT.tenant_api_key
        if not expected or not request.path.startswith("/v1/"):
            return True
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), expected.encode()
        ):
            raise NotAuthenticated("missing or invalid API key (Authorization: Bearer <key>)")
        return True
