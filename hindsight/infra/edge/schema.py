"""OpenAPI documentation shapes shared by every app: the error bodies and the service endpoints.

Schema-only: nothing here validates or renders a request. The runtime error shape is owned by
``hindsight.infra.edge.errors``; these serializers describe it (FastAPI's ``HTTPValidationError`` for a
422, ``{"detail": "..."}`` for the rest) so each view can list its 4xx answers with ``errors()``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

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


HEALTH_STATUSES = ("healthy", "unhealthy")


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=HEALTH_STATUSES)
    database = serializers.CharField()


LIVENESS_STATUSES = ("alive",)


class LivenessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=LIVENESS_STATUSES)
    version = serializers.CharField()
    uptime_seconds = serializers.FloatField()


class ReadinessSerializer(HealthSerializer):
    broker = serializers.CharField()


class FeaturesSerializer(serializers.Serializer):
    mental_models = serializers.BooleanField()


class LLMSerializer(serializers.Serializer):
    """The LLM this deployment resolved: provider name, base URL and model (null without one)."""

    provider = serializers.CharField()
    base_url = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)


class VersionSerializer(serializers.Serializer):
    api_version = serializers.CharField()
    features = FeaturesSerializer()
    llm = LLMSerializer()


class ClosedObjectExtension(OpenApiSerializerExtension):
    """A ``Body`` refuses unknown keys: every one is documented as a closed object
    (``additionalProperties: false``), under the component name it declares
    (``component_name``, upstream's, where two bodies would otherwise share a name)."""

    target_class: Any = "hindsight.infra.edge.serializers.Body"
    match_subclasses = True

    def get_name(self, auto_schema: Any, direction: str) -> str | None:
        cls = self.target if isinstance(self.target, type) else type(self.target)
        name = cls.__dict__.get("component_name")
        return str(name) if name else None

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


# --- query parameters, as the OpenAPI document declares them ---------------------------------


def _query_type(field: serializers.Field) -> dict[str, Any]:
    if isinstance(field, serializers.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, serializers.IntegerField):
        return dict(build_basic_type(OpenApiTypes.INT) or {})
    if isinstance(field, serializers.ListField):
        return {"type": "array", "items": _query_type(field.child)}
    if isinstance(field, serializers.ChoiceField):
        return {"type": "string", "enum": [v for v in field.choices if v not in ("", None)]}
    if isinstance(field, serializers.DateTimeField):
        return {"type": "string", "format": "date-time"}
    if isinstance(field, serializers.UUIDField):
        return {"type": "string", "format": "uuid"}
    return {"type": "string"}


def query_parameters(serializer_class: type[serializers.Serializer]) -> list[OpenApiParameter]:
    """The query parameters a ``Query`` serializer parses, documented from its fields: the JSON
    type of the field's DRF class, its choices, default, bounds, length and help text. A list
    is the parameter repeated (``explode``)."""
    parameters = []
    for name, field in serializer_class().fields.items():
        schema = _query_type(field)
        if field.default is not empty and not callable(field.default):
            schema["default"] = field.default
        for attribute, keyword in (("min_value", "minimum"), ("max_value", "maximum"),
                                   ("max_length", "maxLength")):
            bound = getattr(field, attribute, None)
            if bound is not None and not isinstance(field, serializers.ListField):
                schema[keyword] = bound
        parameters.append(OpenApiParameter(
            name, schema, OpenApiParameter.QUERY, description=str(field.help_text or ""),
            explode=True if isinstance(field, serializers.ListField) else None,
        ))
    return parameters
