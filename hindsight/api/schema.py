"""OpenAPI documentation shapes shared by every app: the error bodies and the service endpoints.

Schema-only: nothing here validates or renders a request. The runtime error shape is owned by
``hindsight.api.errors``; these serializers describe it (FastAPI's ``HTTPValidationError`` for a
422, ``{"detail": "..."}`` for the rest) so each view can list its 4xx answers with ``errors()``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers

_STATUS_TEXT = {
    400: "Bad request (or the LLM is not configured)",
    401: "Missing or invalid API key",
    404: "Not found",
    409: "Conflict with the current state",
    422: "Validation error: the body names the field (loc) and the rule (msg)",
    502: "The LLM answered with an error",
    503: "A dependency (database lookup, embedder) is unavailable",
    504: "The LLM timed out",
}


@extend_schema_field({"anyOf": [{"type": "string"}, {"type": "integer"}]})
class LocPartField(serializers.Field):
    """One step of an error location: a key (string) or a list index (integer)."""


class ValidationErrorItemSerializer(serializers.Serializer):
    loc = serializers.ListField(child=LocPartField())
    msg = serializers.CharField()
    type = serializers.CharField()


class HTTPValidationErrorSerializer(serializers.Serializer):
    detail = ValidationErrorItemSerializer(many=True)


class ErrorMessageSerializer(serializers.Serializer):
    detail = serializers.CharField()


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The documented error answers of an operation: 422 in FastAPI's shape, the rest a message."""
    out: dict[int, OpenApiResponse] = {}
    for code in codes:
        shape: Any = HTTPValidationErrorSerializer if code == 422 else ErrorMessageSerializer
        out[code] = OpenApiResponse(shape, description=_STATUS_TEXT.get(code, "Error"))
    return out


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=("healthy", "unhealthy"))
    database = serializers.CharField()


class FeaturesSerializer(serializers.Serializer):
    mental_models = serializers.BooleanField()


class VersionSerializer(serializers.Serializer):
    api_version = serializers.CharField()
    features = FeaturesSerializer()
