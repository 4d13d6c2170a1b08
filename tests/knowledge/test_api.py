"""The knowledge-base API's edges: every malformed request is a 4xx naming the field and the
rule and changes nothing; the wire shapes and status codes are upstream's."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.knowledge.services import knowledge_folder_create, knowledge_page_create
from mentalmodels.models import MentalModel
from tests.factories import make_bank

pytestmark = pytest.mark.django_db

BANK = "kb-api"
KB = f"/v1/default/banks/{BANK}/knowledge-base"


@pytest.fixture
def api() -> APIClient:
    make_bank(BANK)
    return APIClient()


def locs(response) -> list[list]:
    return [e["loc"] for e in response.json()["detail"]]


def snapshot() -> list:
    return list(KnowledgeNode.objects.order_by("id").values_list("id", "parent_id", "name")) + [
        list(MentalModel.objects.order_by("uid").values_list("uid", "name", "tags", "trigger"))]


@pytest.mark.parametrize(("path", "body", "expected"), [
    ("/folders", {"name": "", "parent_id": 5}, [["body", "name"], ["body", "parent_id"]]),
    ("/folders", {"name": "Ops", "colour": "red"}, [["body", "colour"]]),
    ("/folders", [], [["body"]]),
    ("/folders", None, [["body"]]),
    ("/pages", {"name": "P"}, [["body", "source_query"]]),
    ("/pages", {"name": "P", "source_query": "q?", "max_tokens": 10, "tags": "x"},
     [["body", "tags"], ["body", "max_tokens"]]),
    ("/pages", {"name": "P", "source_query": "q?", "trigger": {"refersh_cron": "x"}},
     [["body", "trigger", "refersh_cron"]]),
    ("/pages", {"name": "P", "source_query": "q?", "trigger": {"fact_types": []}},
     [["body", "trigger", "fact_types"]]),
    ("/pages", {"name": "P\x00", "source_query": "q?"}, [["body", "name"]]),
])
def test_a_malformed_create_is_a_422_naming_the_field_and_changes_nothing(api, path, body,
                                                                         expected):
    before = snapshot()
    response = api.post(KB + path, json.dumps(body), content_type="application/json")
    assert response.status_code == 422, response.content
    assert locs(response) == expected
    assert snapshot() == before


@pytest.mark.parametrize(("query", "expected"), [
    ("", [["query", "q"]]),
    ("?q=", [["query", "q"]]),
    ("?q=x&limit=0", [["query", "limit"]]),
    ("?q=x&limit=51", [["query", "limit"]]),
    ("?q=x&tags_match=some", [["query", "tags_match"]]),
    ("?q=x&tag_groups=[{", [["query", "tag_groups"]]),
    ('?q=x&tag_groups=[{"tags":["a"],"match":"most"}]', [["query", "tag_groups", 0, "match"]]),
])
def test_a_malformed_search_is_a_422_naming_the_parameter(api, query, expected):
    response = api.get(KB + "/search" + query)
    assert response.status_code == 422
    assert locs(response) == expected


def test_a_malformed_tree_filter_is_a_422_and_an_unknown_bank_a_404(api):
    assert locs(api.get(KB + "/tree?tags_match=none")) == [["query", "tags_match"]]
    assert locs(api.get(KB + "/tree?tag_groups=7")) == [["query", "tag_groups"]]
    missing = api.get("/v1/default/banks/nope/knowledge-base/tree")
    assert missing.status_code == 404 and missing.json() == {"detail": "Bank 'nope' not found"}
    assert api.get("/v1/default/banks/nope/knowledge-base/export").status_code == 404


def test_a_bad_patch_is_refused_whole_naming_the_field(api):
    folder = knowledge_folder_create(bank_id=BANK, name="Ops")
    page, _ = knowledge_page_create(bank_id=BANK, name="Runbook", source_query="How?")
    before = snapshot()
    node = f"{KB}/nodes/{folder.id}"
    cases = [
        (node, {"name": "Renamed", "tags": ["x"]}, 422, [["body", "tags"]]),
        (node, {"parent_id": 3}, 422, [["body", "parent_id"]]),
        (node, {"bogus": 1}, 422, [["body", "bogus"]]),
        (f"{KB}/nodes/{page.id}", {"max_tokens": 99999}, 422, [["body", "max_tokens"]]),
        (f"{KB}/nodes/{page.id}", {"trigger": {"mode": "sideways"}}, 422,
         [["body", "trigger", "mode"]]),
    ]
    for path, body, status, expected in cases:
        response = api.patch(path, body, format="json")
        assert response.status_code == status, (body, response.content)
        assert locs(response) == expected
    for body, message in [({}, "Provide name, parent_id"),
                          ({"parent_id": page.id}, "parent_id: Parent 'kp-"),
                          ({"parent_id": "kf-nope"}, "parent_id: Parent folder 'kf-nope' not found"),
                          ({"parent_id": folder.id}, "parent_id: A node cannot be its own parent")]:
        response = api.patch(node, body, format="json")
        assert response.status_code == 400 and message in response.json()["detail"], body
    assert api.patch(f"{KB}/nodes/kf-nope", {"name": "x"}, format="json").json() == {
        "detail": "Knowledge node 'kf-nope' not found"}
    assert snapshot() == before


def test_the_writes_answer_upstreams_status_codes_and_shapes(api):
    created = api.post(KB + "/folders", {"name": "Ops"}, format="json")
    assert created.status_code == 201
    folder = created.json()
    assert list(folder) == ["id", "kind", "name", "parent_id", "mental_model_id", "managed",
                            "description", "tags", "timestamp", "is_stale",
                            "last_refresh_failed_at", "trigger", "children"]
    page = api.post(KB + "/pages", {"name": "Runbook", "source_query": "How?",
                                    "parent_id": folder["id"], "tags": None,
                                    "max_tokens": None, "trigger": None}, format="json")
    assert page.status_code == 201 and list(page.json()) == ["page_id", "mental_model_id",
                                                             "operation_id"]
    duplicate = api.post(KB + "/pages", {"name": "RUNBOOK", "source_query": "Again?",
                                         "parent_id": folder["id"]}, format="json")
    assert duplicate.status_code == 409
    assert duplicate.json() == {"detail": "A page named 'RUNBOOK' already exists in this folder"}
    read = api.get(f"{KB}/pages/{page.json()['page_id']}").json()
    assert list(read) == ["id", "name", "type", "description", "tags", "timestamp", "body",
                          "markdown"]
    assert read["body"] == "" and read["markdown"].endswith("---\n\nNo content yet.\n")
    assert api.get(f"{KB}/pages/{folder['id']}").status_code == 404  # a folder is not a page
    deleted = api.delete(f"{KB}/nodes/{folder['id']}")
    assert deleted.status_code == 200 and deleted.json() == {"status": "deleted"}
    assert api.delete(f"{KB}/nodes/{folder['id']}").status_code == 404
    assert not MentalModel.objects.filter(bank_id=BANK).exists()


def test_a_page_type_tag_is_its_type_and_leaves_its_shown_tags(api):
    page, _ = knowledge_page_create(bank_id=BANK, name="true", source_query='Say "hi"?',
                                    tags=["type:runbook", "ops"])
    read = api.get(f"{KB}/pages/{page.id}").json()
    assert read["type"] == "runbook" and read["tags"] == ["ops"]
    assert 'title: "true"\ndescription: "Say \\"hi\\"?"\ntags:\n  - "ops"\n' in read["markdown"]
