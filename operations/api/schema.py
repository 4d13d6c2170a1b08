"""OpenAPI documentation of the operations API's query parameters, as upstream names them.

The bodies are documented by the serializers that render them (``operations.api.serializers``).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter

from hindsight.api.schema import query_bool, query_int
from operations.models import STATUSES

LIST_PARAMS = [
    OpenApiParameter("status", {"type": "string", "enum": list(STATUSES)},
                     OpenApiParameter.QUERY, description="Only operations in this status"),
    OpenApiParameter("type", {"type": "string", "maxLength": 64}, OpenApiParameter.QUERY,
                     description="Only operations of this type (e.g. refresh_mental_model)"),
    query_int("limit", 20, minimum=1, maximum=100),
    query_int("offset", 0, maximum=2**31 - 1),
    query_bool("exclude_parents", "Accepted for upstream's clients; no effect here"),
]
GET_PARAMS = [query_bool("include_payload", "Include the submitted task payload")]
