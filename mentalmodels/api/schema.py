"""OpenAPI documentation of the mental-models API's query parameters, as upstream names them.

The request and response bodies are documented by the serializers that parse and render them
(``mentalmodels.api.serializers``; the dry run's result: ``mentalmodels.api.preview``). The
query parameters are parsed by the query serializers; they are declared here. Enum values
(detail levels) are upstream's; a test compares them with the upstream document.
"""

from __future__ import annotations

from typing import Any

from hindsight.banks.schema import query_bool, query_enum, query_int, query_tags
from mentalmodels.api.serializers import DETAILS, LIST_LIMIT_MAX, OFFSET_MAX
from mentalmodels.selectors import LIST_TAGS_MATCH

_DETAIL_HELP = ("'metadata' (names, tags, staleness), 'content' (adds content and config), "
                "'full' (adds reflect_response)")


def detail_param(default: str) -> Any:
    return query_enum("detail", DETAILS, default=default, description=_DETAIL_HELP)


LIST_PARAMS = [
    query_tags(),
    query_enum("tags_match", LIST_TAGS_MATCH, default="any", description="How to match tags"),
    detail_param("metadata"),
    query_int("limit", 100, minimum=1, maximum=LIST_LIMIT_MAX),
    query_int("offset", 0, maximum=OFFSET_MAX),
    query_bool("exclude_knowledge_pages",
               "Accepted for upstream's clients; this service has no knowledge pages"),
]
GET_PARAMS = [detail_param("full")]
