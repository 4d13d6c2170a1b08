"""The OpenAPI document: valid, complete (every /v1 route and method), upstream's ids and enums."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

# Operation ids, query parameter enums/defaults and response enums of upstream's OpenAPI
# document (hindsight-api-slim 1.1.0), extracted into the repository so every clone tests them.
UPSTREAM = Path(__file__).resolve().parent / "fixtures" / "upstream_wire_facts.json"
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = APIClient().get("/openapi.json")
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    return json.loads(UPSTREAM.read_text())


def _routes(patterns: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            out.extend(_routes(pattern.url_patterns, route))
        elif isinstance(pattern, URLPattern):
            out.append((route, pattern.callback))
    return out


def _v1_routes() -> dict[str, set[str]]:
    """Every /v1 route of the URLconf as an OpenAPI path, with the methods its view handles."""
    routes: dict[str, set[str]] = {}
    for route, callback in _routes(get_resolver().url_patterns):
        if not route.startswith("v1/"):
            continue
        view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        assert view_class is not None, route
        methods = {m for m in HTTP_METHODS if hasattr(view_class, m)}
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        routes[path] = methods
    return routes


def test_openapi_json_is_served_as_json_without_asking() -> None:
    response = APIClient().get("/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert json.loads(response.content)["openapi"].startswith("3.")


def test_document_validates_without_a_warning(tmp_path: Path) -> None:
    # --fail-on-warn: an undocumented view, an unresolvable field or an enum name collision fails.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    assert (tmp_path / "s.yml").read_text().startswith("openapi: 3.")


def test_every_v1_route_appears_with_each_of_its_methods(document: dict[str, Any]) -> None:
    routes = _v1_routes()
    assert len(routes) >= 17  # banks, memories, operations, mental models, reflect
    documented = {path: set(ops) & set(HTTP_METHODS)
                  for path, ops in document["paths"].items() if path.startswith("/v1/")}
    assert documented == routes


def test_every_v1_operation_documents_its_body_and_error_shapes(document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            responses = operation["responses"]
            # 201 for the knowledge base's creates, 202 for a bank transfer (upstream's).
            success = responses.get("200") or responses.get("201") or responses["202"]
            if "application/json" in success["content"]:
                ok = success["content"]["application/json"]["schema"]
                assert ok.get("$ref") or ok.get("type") == "array", (method, path)
            else:  # the archive's download
                assert success["content"] == {"application/zip": {
                    "schema": {"type": "string", "format": "binary"}}}, (method, path)
            errors = [code for code in responses if code.startswith("4")]
            assert errors, (method, path)
            for code in errors:
                ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
                expected = "HTTPValidationError" if code == "422" else "ErrorMessage"
                assert ref.endswith("/" + expected), (method, path, code)


def test_operation_ids_match_upstream_on_shared_routes(document: dict[str, Any],
                                                      upstream: dict[str, Any]) -> None:
    shared = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            theirs = upstream["paths"].get(path, {}).get(method)
            if theirs is None:
                continue
            shared += 1
            assert operation["operationId"] == theirs["operationId"], (method, path)
    assert shared >= 28


def _enum(schema: dict[str, Any], components: dict[str, Any]) -> list[Any]:
    """The enum of a schema, following $ref / allOf / anyOf / oneOf (the null branch skipped)."""
    if "$ref" in schema:
        return _enum(components[schema["$ref"].rsplit("/", 1)[1]], components)
    if "enum" in schema:
        return [v for v in schema["enum"] if v is not None]
    for key in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(key, []):
            values = _enum(branch, components)
            if values:
                return values
    return []


def _prop(doc: dict[str, Any], component: str, field: str) -> list[Any]:
    components = doc["components"]["schemas"]
    return _enum(components[component]["properties"][field], components)


def _param(doc: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    (param,) = [p for p in doc["paths"][path][method]["parameters"] if p["name"] == name]
    return param


MM = "/v1/default/banks/{bank_id}/mental-models"


@pytest.mark.parametrize(
    ("component", "field", "upstream_component"),
    [
        ("OperationStatusResponse", "status", "OperationStatusResponse"),
        ("RefreshMentalModelOperationDetails", "outcome", "RefreshMentalModelOperationDetails"),
        ("RefreshMentalModelOperationDetails", "failure_reason",
         "RefreshMentalModelOperationDetails"),
        ("MentalModelDryRunRefreshResult", "outcome", "MentalModelDryRunRefreshResult"),
        ("MentalModelDryRunRefreshResult", "mode_fallback_reason",
         "MentalModelDryRunRefreshResult"),
        ("MentalModelDryRunRefreshResult", "effective_mode", "MentalModelDryRunRefreshResult"),
        ("MentalModelRefreshTrace", "outcome", "MentalModelRefreshTrace"),
        ("MentalModelTrigger", "mode", "MentalModelTrigger-Input"),
        ("MentalModelTrigger", "tags_match", "MentalModelTrigger-Input"),
        ("MentalModelTrigger", "budget", "MentalModelTrigger-Input"),
        ("ReflectRequest", "budget", "ReflectRequest"),
        ("RecallRequest", "tags_match", "RecallRequest"),
    ],
)
def test_response_and_request_enums_match_upstream(document: dict[str, Any],
                                                   upstream: dict[str, Any], component: str,
                                                   field: str, upstream_component: str) -> None:
    ours = _prop(document, component, field)
    assert ours, (component, field)
    assert sorted(ours) == sorted(_prop(upstream, upstream_component, field))


@pytest.mark.parametrize(
    ("path", "method", "name"),
    [
        (MM, "get", "detail"),
        (MM, "get", "tags_match"),
        (MM + "/{mental_model_id}", "get", "detail"),
        ("/v1/default/banks/{bank_id}/tags", "get", "source"),
        ("/v1/default/banks/{bank_id}/memories/list", "get", "tags_match"),
        ("/v1/default/banks/{bank_id}/memories/list", "get", "time_field"),
    ],
)
def test_query_enums_and_defaults_match_upstream(document: dict[str, Any], upstream: dict[str, Any],
                                                 path: str, method: str, name: str) -> None:
    ours = _param(document, path, method, name)["schema"]
    theirs = _param(upstream, path, method, name)["schema"]
    assert sorted(_enum(ours, {})) == sorted(_enum(theirs, {}))
    assert ours.get("default") == theirs.get("default")


def test_detail_defaults_differ_between_list_and_get(document: dict[str, Any]) -> None:
    # Content is opt-in on the list (metadata), the full record on a single get.
    assert _param(document, MM, "get", "detail")["schema"]["default"] == "metadata"
    single = _param(document, MM + "/{mental_model_id}", "get", "detail")
    assert single["schema"]["default"] == "full"


def test_operation_status_enum_is_the_model_statuses_plus_not_found(
    document: dict[str, Any],
) -> None:
    from operations.models import STATUSES

    assert _prop(document, "OperationStatusResponse", "status") == [*STATUSES, "not_found"]
    listed = _param(document, "/v1/default/banks/{bank_id}/operations", "get", "status")
    assert listed["schema"]["enum"] == list(STATUSES)
