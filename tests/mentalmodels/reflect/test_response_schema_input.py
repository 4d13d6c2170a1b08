"""POST …/reflect input: a response_schema is checked by the one response-schema rule (docs/behaviour.md#response-schema)
(mentalmodels.triggers), so a schema nested too deeply is a 422 naming it, not a RecursionError
(a 500); list fields take strings only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

URL = "/v1/default/banks/reflect-bank/reflect"


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("depth", [80, 300])
def test_a_response_schema_nested_too_deep_is_422_naming_it(bank, depth: int) -> None:
    api = APIClient(raise_request_exception=False)
    response = api.post(URL, {"query": "q", "response_schema": _nested(depth)}, format="json")
    assert response.status_code == 422, response.content[:300]
    (error,) = response.json()["detail"]
    assert error["loc"][:2] == ["body", "response_schema"] and "64 levels" in error["msg"]


def test_required_naming_a_missing_property_is_422(bank) -> None:
    api = APIClient(raise_request_exception=False)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}
    response = api.post(URL, {"query": "q", "response_schema": schema}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "response_schema"]


def test_a_non_string_excluded_model_id_is_422_not_coerced(bank) -> None:
    api = APIClient(raise_request_exception=False)
    response = api.post(URL, {"query": "q", "exclude_mental_model_ids": ["ok", 5]}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "exclude_mental_model_ids", 1]
