"""The directives API: upstream's routes and shapes, the list's filters and order, and every
malformed request a 4xx naming the field and the rule that changes nothing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from mentalmodels.directives.models import Directive
from mentalmodels.directives.services import directive_create
from tests.factories import make_bank

pytestmark = pytest.mark.django_db

BANK = "dir-api"
BASE = f"/v1/default/banks/{BANK}/directives"
SHAPE = ["id", "bank_id", "name", "content", "priority", "is_active", "tags", "created_at",
         "updated_at"]


@pytest.fixture
def api() -> APIClient:
    make_bank(BANK)
    return APIClient()


def post(api: APIClient, path: str, body) -> object:
    return api.post(path, data=json.dumps(body), content_type="application/json")


def patch(api: APIClient, path: str, body) -> object:
    return api.patch(path, data=json.dumps(body), content_type="application/json")


def snapshot() -> list:
    return list(Directive.objects.order_by("id").values_list(
        "id", "name", "content", "priority", "is_active", "tags", "updated_at"))


def test_crud_round_trip_in_upstreams_shape(api):
    created = post(api, BASE, {"name": "Formal", "content": "Answer in formal English.",
                               "priority": 5, "tags": ["team", "team"]})
    assert created.status_code == 200
    body = created.json()
    assert list(body) == SHAPE
    assert body["bank_id"] == BANK and body["priority"] == 5 and body["is_active"] is True
    assert body["tags"] == ["team"] and body["created_at"] and body["updated_at"]
    item = f"{BASE}/{body['id']}"
    assert api.get(item).json() == body

    changed = patch(api, item, {"content": "Answer in formal British English.",
                                "is_active": False}).json()
    assert changed["content"] == "Answer in formal British English."
    assert changed["is_active"] is False and changed["name"] == "Formal"
    assert changed["updated_at"] >= body["updated_at"]

    assert api.delete(item).json() == {"status": "deleted"}
    assert api.get(item).status_code == 404
    assert api.delete(item).status_code == 404


def test_create_makes_the_bank():
    response = post(APIClient(), "/v1/default/banks/dir-new/directives",
                    {"name": "n", "content": "c"})
    assert response.status_code == 200 and response.json()["tags"] == []


def test_list_orders_by_priority_and_filters_by_scope_and_state(api):
    low = directive_create(bank_id=BANK, name="low", content="l", priority=1)
    high = directive_create(bank_id=BANK, name="high", content="h", priority=9)
    team = directive_create(bank_id=BANK, name="team", content="t", tags=["team"])
    both = directive_create(bank_id=BANK, name="both", content="b", tags=["team", "ops"])
    off = directive_create(bank_id=BANK, name="off", content="o", is_active=False)

    def names(query: str = "") -> list[str]:
        response = api.get(BASE + query)
        assert response.status_code == 200, response.content
        return [item["name"] for item in response.json()["items"]]

    # Priority first, then the newest.
    assert names() == [high.name, low.name, both.name, team.name]
    assert set(names("?active_only=false")) == {low.name, high.name, team.name, both.name,
                                                off.name}
    # A tag filter: the untagged ones, and the tagged ones it selects.
    assert set(names("?tags=ops")) == {"low", "high", "both"}
    assert set(names("?tags=team&tags=ops&tags_match=all")) == {"low", "high", "both"}
    assert set(names("?tags=team&tags_match=exact")) == {"low", "high", "team"}
    page = api.get(BASE + "?limit=1&offset=1").json()
    assert [i["name"] for i in page["items"]] == ["low"]
    assert (page["total"], page["limit"], page["offset"]) == (4, 1, 1)


def test_list_of_a_missing_bank_is_404():
    assert APIClient().get("/v1/default/banks/nobody/directives").status_code == 404


@pytest.mark.parametrize(("body", "locs"), [
    ({"content": "c"}, [["body", "name"]]),
    ({"name": "n"}, [["body", "content"]]),
    ({"name": "", "content": "  "}, [["body", "name"], ["body", "content"]]),
    ({"name": 5, "content": "c"}, [["body", "name"]]),
    ({"name": "n", "content": "c", "priority": "high"}, [["body", "priority"]]),
    ({"name": "n", "content": "c", "priority": 2**31}, [["body", "priority"]]),
    ({"name": "n", "content": "c", "priority": True}, [["body", "priority"]]),
    ({"name": "n", "content": "c", "is_active": "yes"}, [["body", "is_active"]]),
    ({"name": "n", "content": "c", "tags": "team"}, [["body", "tags"]]),
    ({"name": "n", "content": "c", "tags": [1]}, [["body", "tags", 0]]),
    ({"name": "n", "content": "c", "tags": ["x" * 600]}, [["body", "tags", 0]]),
    ({"name": "n\x00", "content": "c"}, [["body", "name"]]),
    ({"name": "n", "content": "c", "colour": "red"}, [["body", "colour"]]),
    ([], [["body"]]),
])
def test_bad_create_is_422_naming_the_field_and_changes_nothing(api, body, locs):
    before = snapshot()
    response = post(api, BASE, body)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == locs
    assert all(e["msg"] for e in response.json()["detail"])
    assert snapshot() == before


@pytest.mark.parametrize(("body", "locs"), [
    ({"name": ""}, [["body", "name"]]),
    ({"priority": 1.5}, [["body", "priority"]]),
    ({"is_active": 1}, [["body", "is_active"]]),
    ({"tags": {"a": 1}}, [["body", "tags"]]),
    ({"bank_id": "other"}, [["body", "bank_id"]]),
    ("text", [["body"]]),
])
def test_bad_update_is_422_and_changes_nothing(api, body, locs):
    directive = directive_create(bank_id=BANK, name="n", content="c")
    before = snapshot()
    response = patch(api, f"{BASE}/{directive.id}", body)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == locs
    assert snapshot() == before


@pytest.mark.parametrize("query", ["?limit=0", "?limit=1001", "?offset=-1", "?limit=x",
                                   "?active_only=maybe", "?tags_match=any_strict"])
def test_bad_list_query_is_422(api, query):
    response = api.get(BASE + query)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "query"


@pytest.mark.parametrize("directive_id", ["not-a-uuid", "3c869d50-99b9-431a-b9c0-7868ae3c1f1d"])
def test_unknown_directive_is_404_on_every_verb(api, directive_id):
    item = f"{BASE}/{directive_id}"
    assert api.get(item).status_code == 404
    assert patch(api, item, {"name": "x"}).status_code == 404
    assert api.delete(item).status_code == 404


def test_a_directive_of_another_bank_is_not_found_here(api):
    other = directive_create(bank_id="dir-other", name="n", content="c")
    assert api.get(f"{BASE}/{other.id}").status_code == 404
    assert api.delete(f"{BASE}/{other.id}").status_code == 404
    assert Directive.objects.filter(id=other.id).exists()
