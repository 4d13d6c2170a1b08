"""Malformed requests to the mental-model and operations endpoints: a 4xx naming the field and
the rule, never a 500, and nothing changed.

PostgreSQL text and jsonb cannot hold NUL characters, so a NUL anywhere in a path id, a query
parameter or a body string must be refused before it reaches a query.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from mentalmodels.models import MentalModel
from operations.models import Lease, Operation
from tests.factories import make_mental_model

pytestmark = pytest.mark.django_db

MM = "/v1/default/banks/mm-bank/mental-models"
OPS = "/v1/default/banks/mm-bank/operations"
UUID0 = "00000000-0000-0000-0000-000000000000"


def call(api, method: str, path: str, body: Any = None):
    """One request in its own savepoint, so a database error cannot poison the next one."""
    with transaction.atomic():
        if body is None:
            return getattr(api, method)(path)
        return getattr(api, method)(path, data=body, content_type="application/json")


def snapshot() -> tuple:
    return (
        sorted(MentalModel.objects.values_list("mental_model_id", "name", "content", "tags")),
        sorted(Operation.objects.values_list("id", "status")),
        sorted(Lease.objects.values_list("key", "fence")),
    )


@pytest.fixture
def api():
    from rest_framework.test import APIClient

    return APIClient(raise_request_exception=False)


NUL_BODIES = [
    ({"name": "a\x00", "source_query": "q"}, ["body", "name"]),
    ({"name": "a", "source_query": "q\x00"}, ["body", "source_query"]),
    ({"name": "a", "source_query": "q", "tags": ["ok", "t\x00"]}, ["body", "tags", 1]),
    ({"name": "a", "source_query": "q", "trigger": {"exclude_mental_model_ids": ["x\x00"]}},
     ["body", "trigger", "exclude_mental_model_ids", 0]),
    ({"name": "a", "source_query": "q", "trigger": {"response_schema": {
        "type": "object", "properties": {"k\x00": {"type": "string"}}}}},
     ["body", "trigger", "response_schema", "properties", "k\x00"]),
    ({"name": "a", "source_query": "q", "trigger": {"response_schema": {
        "type": "object", "properties": {"k": {"type": "string", "description": "d\x00"}}}}},
     ["body", "trigger", "response_schema", "properties", "k", "description"]),
]


@pytest.mark.parametrize(("body", "loc"), NUL_BODIES)
def test_nul_characters_in_a_create_body_are_422_naming_the_field(api, bank, body, loc):
    before = snapshot()
    response = call(api, "post", MM, body)
    assert response.status_code == 422, response.content
    assert loc in [e["loc"] for e in response.json()["detail"]]
    assert all(e["type"] == "null_characters_not_allowed" for e in response.json()["detail"])
    assert snapshot() == before


@pytest.mark.parametrize(("body", "loc"), [
    ({"name": "a\x00"}, ["body", "name"]),
    ({"tags": ["t\x00"]}, ["body", "tags", 0]),
    ({"trigger": {"exclude_mental_model_ids": ["x\x00"]}},
     ["body", "trigger", "exclude_mental_model_ids", 0]),
])
def test_nul_characters_in_a_patch_body_are_422_and_change_nothing(api, bank, body, loc):
    make_mental_model(bank, "m1", content="doc")
    before = snapshot()
    response = call(api, "patch", f"{MM}/m1", body)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == [loc]
    assert snapshot() == before


@pytest.mark.parametrize(("method", "path", "name"), [
    ("get", f"{MM}/a%00b", "mental_model_id"),
    ("patch", f"{MM}/a%00b", "mental_model_id"),
    ("delete", f"{MM}/a%00b", "mental_model_id"),
    ("get", f"{MM}/a%00b/history", "mental_model_id"),
    ("post", f"{MM}/a%00b/refresh", "mental_model_id"),
    ("post", f"{MM}/a%00b/clear", "mental_model_id"),
    ("post", f"{MM}/a%00b/dry-run-refresh", "mental_model_id"),
    ("get", "/v1/default/banks/a%00b/mental-models", "bank_id"),
    ("get", "/v1/default/banks/a%00b/mental-models/m1", "bank_id"),
    ("get", "/v1/default/banks/a%00b/operations", "bank_id"),
    ("get", f"/v1/default/banks/a%00b/operations/{UUID0}", "bank_id"),
    ("delete", f"/v1/default/banks/a%00b/operations/{UUID0}", "bank_id"),
])
def test_nul_characters_in_path_ids_are_422_naming_the_parameter(api, bank, method, path, name):
    make_mental_model(bank, "m1", content="doc")
    before = snapshot()
    body = {"name": "x"} if method == "patch" else None
    response = call(api, method, path, body)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["path", name]
    assert snapshot() == before


@pytest.mark.parametrize(("path", "loc"), [
    (f"{MM}?tags=a%00b", ["query", "tags", 0]),
    (f"{MM}?offset=99999999999999999999", ["query", "offset"]),
    (f"{OPS}?offset=99999999999999999999", ["query", "offset"]),
])
def test_bad_list_query_parameters_are_422_naming_them(api, bank, path, loc):
    response = call(api, "get", path)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == [loc]


@pytest.mark.parametrize("raw", ["[]", "0", "false", '""', '"text"', "[1]"])
def test_a_patch_body_that_is_not_an_object_is_422_and_changes_nothing(api, bank, raw):
    make_mental_model(bank, "m1", content="doc")
    before = snapshot()
    response = call(api, "patch", f"{MM}/m1", raw)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert snapshot() == before


@pytest.mark.parametrize("raw", ['""', "0", "[]"])
def test_a_refresh_body_that_is_not_an_object_or_null_is_422(api, bank, raw):
    make_mental_model(bank, "m1", content="doc")
    before = snapshot()
    response = call(api, "post", f"{MM}/m1/refresh", raw)
    assert response.status_code == 422, response.content
    assert snapshot() == before


@pytest.mark.parametrize("key", [
    "min_refresh_interval_seconds", "recall_max_tokens", "recall_chunks_max_tokens",
    "reflect_search_observations_max_tokens",
])
def test_huge_trigger_integers_are_422_naming_the_key(api, bank, key):
    before = snapshot()
    response = call(api, "post", MM, {"name": "a", "source_query": "q",
                                      "trigger": {key: 10**30}})
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "trigger", key]]
    assert snapshot() == before


def _nested_schema(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_json_nested_past_the_parsers_recursion_limit_is_422_not_500(api, bank):
    raw = '{"name": "a", "source_query": "q", "trigger": ' + "[" * 50000 + "]" * 50000 + "}"
    before = snapshot()
    response = call(api, "post", MM, raw)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert snapshot() == before


def test_a_response_schema_nested_too_deep_is_422_naming_it(api, bank):
    before = snapshot()
    response = call(api, "post", MM, {"name": "a", "source_query": "q",
                                      "trigger": {"response_schema": _nested_schema(300)}})
    assert response.status_code == 422, response.content
    loc = response.json()["detail"][0]["loc"]
    assert loc[:4] == ["body", "trigger", "response_schema", "properties"]
    assert snapshot() == before


def test_a_response_schema_nested_up_to_the_limit_is_accepted(api, bank):
    response = call(api, "post", MM, {"name": "a", "source_query": "q",
                                      "trigger": {"response_schema": _nested_schema(31)}})
    assert response.status_code == 200, response.content


def test_deep_nesting_outside_properties_is_a_422_naming_the_depth_limit(api, bank):
    inner: dict = {"type": "string"}
    for _ in range(31):
        inner = {"allOf": [inner]}
    schema = {"type": "object", "properties": {"a": {"type": "string", "not": inner}}}
    response = call(api, "post", MM, {"name": "a", "source_query": "q",
                                      "trigger": {"response_schema": schema}})
    # Each ``allOf`` level is two levels of the document (the key, the list): past the limit.
    assert response.status_code == 422, response.content
    [error] = response.json()["detail"]
    assert error["loc"][:8] == ["body", "trigger", "response_schema", "properties", "a", "not",
                                "allOf", 0]
    assert error["msg"] == "response_schema may nest at most 64 levels deep"
    assert not MentalModel.objects.exists()


def test_too_many_query_parameters_is_a_json_400(api, bank):
    query = "&".join(f"tags=t{i}" for i in range(2000))
    response = call(api, "get", f"{MM}?{query}")
    assert response.status_code == 400
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in response.json()["detail"]


@pytest.mark.parametrize("action", ["clear", "dry-run-refresh"])
@pytest.mark.parametrize("raw", ['{"mode": "delta"}', "[]", '"x"'])
def test_clear_and_dry_run_take_no_parameters_and_refuse_a_body_that_sends_some(
    api, bank, action, raw
):
    """A dry run "takes no parameters, on purpose" (seed): a body asking for something (say a
    delta preview) would otherwise be ignored silently and mislead. Nothing runs or changes."""
    make_mental_model(bank, "m1", content="doc")
    before = snapshot()
    response = call(api, "post", f"{MM}/m1/{action}", raw)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"][0] == "body"
    assert snapshot() == before


@pytest.mark.parametrize("action", ["clear", "dry-run-refresh"])
@pytest.mark.parametrize("raw", [None, "{}", "null"])
def test_clear_and_dry_run_accept_no_body_an_empty_object_or_null(api, bank, action, raw):
    make_mental_model(bank, "m1", content="doc")
    response = call(api, "post", f"{MM}/m1/{action}", raw)
    assert response.status_code == 200, response.content


def test_an_unknown_model_with_a_bad_body_is_still_a_404(api, bank):
    for action in ("clear", "dry-run-refresh"):
        response = call(api, "post", f"{MM}/nope/{action}", '{"mode": "delta"}')
        assert response.status_code == 404


def test_a_huge_bank_floor_is_422_not_an_overflow_in_the_trigger_gate(api, bank):
    """The bank-wide rate floor becomes a timedelta when an automatic trigger fires: a value
    past what a timedelta holds would crash every automatic refresh of the bank."""
    response = call(api, "patch", "/v1/default/banks/mm-bank/config",
                    {"updates": {"mental_model_min_refresh_interval_seconds": 10**30}})
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == [
        "body", "updates", "mental_model_min_refresh_interval_seconds"]
    bank.refresh_from_db()
    assert "mental_model_min_refresh_interval_seconds" not in (bank.config or {})


@pytest.mark.parametrize(("method", "suffix"), [("delete", ""), ("post", "/clear"),
                                               ("patch", ""), ("post", "/refresh")])
def test_an_overlong_model_id_is_a_404_not_a_500(api, bank, method, suffix):
    """No model id is longer than 64 characters; an edit must say "not found" before it
    touches the refresh lease (whose key would overflow)."""
    before = snapshot()
    body = {"name": "x"} if method == "patch" else None
    response = call(api, method, f"{MM}/{'x' * 5000}{suffix}", body)
    assert response.status_code == 404, response.content
    assert snapshot() == before
