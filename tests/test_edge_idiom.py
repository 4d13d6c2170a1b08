"""The one edge idiom (``hindsight.infra.edge.serializers``), seen from the wire: every endpoint answers
the same kind of mistake with the same message (the table of ``hindsight.infra.edge.problems``), and
no JSON value in any body field is a server error — a 422 names the field it is about.

The body fields are read from the request serializers the views parse with (the same
declarations that document them), so a new field is covered without being listed here; a new
body endpoint must be added to ``BODIES`` (a test compares it with the OpenAPI document).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from rest_framework.test import APIClient

from hindsight.banks import serializers as banks
from hindsight.banks.models import Document
from hindsight.infra.edge.problems import problem_message, problem_type
from hindsight.webhooks.api import serializers as webhooks
from hindsight.webhooks.models import Webhook
from mentalmodels.api import serializers as mm
from mentalmodels.bank_templates import serializers as templates
from mentalmodels.directives.api import serializers as directives
from mentalmodels.directives.models import Directive
from mentalmodels.knowledge.api import serializers as kb
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.reflect.serializers import ReflectRequestSerializer
from mentalmodels.review.api import serializers as review
from tests.factories import make_bank, make_memory, make_mental_model, make_operation
from tests.review.helpers import make_proposal
from tests.strategies import any_json

pytestmark = pytest.mark.django_db

B = "/v1/default/banks/edge"
OP = "11111111-1111-1111-1111-111111111111"
PAGE = "kp-" + "0" * 32
DIRECTIVE = "22222222-2222-2222-2222-222222222222"
PROPOSAL = "33333333-3333-3333-3333-333333333333"
MEMORY = "44444444-4444-4444-4444-444444444444"
WEBHOOK = "55555555-5555-5555-5555-555555555555"
DOCUMENT = "doc-1"

# Every list endpoint with a page: its path (limit and offset are in the query string).
LISTS = [
    "/v1/default/banks",
    f"{B}/memories/list",
    f"{B}/tags",
    f"{B}/llm-requests",
    f"{B}/operations",
    f"{B}/mental-models",
    f"{B}/knowledge-base/search?q=x",
    f"{B}/directives",
]

# Every endpoint with a JSON body: (method, path, a valid body, the serializer that parses it).
BODIES: list[tuple[str, str, dict[str, Any], Any]] = [
    ("put", B, {}, banks.BankWriteSerializer),
    ("patch", B, {}, banks.BankWriteSerializer),
    ("put", f"{B}/profile", {"disposition": {"skepticism": 3, "literalism": 3, "empathy": 3}},
     banks.DispositionUpdateSerializer),
    ("patch", f"{B}/config", {"updates": {}}, banks.BankConfigUpdateSerializer),
    ("post", f"{B}/memories", {"items": [{"content": "x"}], "async": True},
     banks.RetainRequestSerializer),
    ("post", f"{B}/memories/recall", {"query": "q"}, banks.RecallRequestSerializer),
    ("post", f"{B}/consolidate", {}, banks.ConsolidationRequestSerializer),
    ("post", f"{B}/reflect", {"query": "q"}, ReflectRequestSerializer),
    ("post", f"{B}/mental-models", {"name": "n", "source_query": "q"},
     mm.CreateMentalModelRequestSerializer),
    ("patch", f"{B}/mental-models/m1", {}, mm.UpdateMentalModelRequestSerializer),
    ("post", f"{B}/mental-models/m1/refresh", {}, mm.RefreshMentalModelRequestSerializer),
    ("post", f"{B}/mental-models/m1/clear", {}, mm.ClearMentalModelRequestSerializer),
    ("post", f"{B}/mental-models/m1/dry-run-refresh", {}, mm.DryRunRefreshRequestSerializer),
    ("post", f"{B}/knowledge-base/folders", {"name": "f"}, kb.CreateFolderRequestSerializer),
    ("post", f"{B}/knowledge-base/pages", {"name": "p", "source_query": "q"},
     kb.CreatePageRequestSerializer),
    # A page node (the fixture's), so the page-only fields apply too.
    ("patch", f"{B}/knowledge-base/nodes/{PAGE}", {}, kb.UpdateNodeRequestSerializer),
    ("post", f"{B}/directives", {"name": "n", "content": "c"},
     directives.CreateDirectiveRequestSerializer),
    ("patch", f"{B}/directives/{DIRECTIVE}", {}, directives.UpdateDirectiveRequestSerializer),
    ("post", f"{B}/import", {"version": "1"}, templates.BankTemplateManifestSerializer),
    # Two fields each: "at least one" holds when the fuzzed one is sent as null (absent).
    ("patch", f"{B}/memories/{MEMORY}", {"tags": ["t"], "metadata": {"k": "v"}},
     banks.UpdateMemoryRequestSerializer),
    ("patch", f"{B}/documents/{DOCUMENT}", {"tags": ["t"], "observation_scopes": "per_tag"},
     banks.UpdateDocumentRequestSerializer),
    ("post", f"{B}/webhooks", {"url": "https://example.com/hook"},
     webhooks.CreateWebhookRequestSerializer),
    ("patch", f"{B}/webhooks/{WEBHOOK}", {"enabled": False},
     webhooks.UpdateWebhookRequestSerializer),
    ("post", f"{B}/mental-models/m1/restore", {"version_id": 1},
     review.RestoreMentalModelRequestSerializer),
    ("post", f"{B}/mental-models/m1/proposals/{PROPOSAL}/reject", {"reason": "r"},
     review.RejectProposalRequestSerializer),
]

# A string field, an integer field with a lower bound, per body endpoint that has them.
STRING_FIELDS = [
    ("put", B, {}, "name"),
    ("post", f"{B}/memories/recall", {}, "query"),
    ("post", f"{B}/reflect", {}, "query"),
    ("post", f"{B}/mental-models", {"source_query": "q"}, "name"),
    ("patch", f"{B}/mental-models/m1", {}, "source_query"),
    ("post", f"{B}/knowledge-base/folders", {}, "name"),
    ("post", f"{B}/directives", {"content": "c"}, "name"),
]
INT_FIELDS = [
    ("put", B, {}, "retain_chunk_size", 1),
    ("post", f"{B}/memories/recall", {"query": "q"}, "max_tokens", 1),
    ("post", f"{B}/reflect", {"query": "q"}, "max_tokens", 1),
    ("post", f"{B}/mental-models", {"name": "n", "source_query": "q"}, "max_tokens", 256),
    ("post", f"{B}/knowledge-base/pages", {"name": "n", "source_query": "q"}, "max_tokens", 256),
]


@pytest.fixture
def api() -> APIClient:
    make_bank("edge", name="Edge")
    model = make_mental_model("edge", "m1", name="One", source_query="q")
    KnowledgeNode.objects.create(id=PAGE, bank_id="edge", kind=NodeKind.PAGE, name="One",
                                 mental_model=model)
    make_operation(bank_id="edge", id=OP, status="completed")
    Directive.objects.create(id=DIRECTIVE, bank_id="edge", name="n", content="c")
    make_proposal(model, id=PROPOSAL)
    make_memory("edge", "A fact.", id=MEMORY, document_id=DOCUMENT)
    Document.objects.create(bank_id="edge", document_id=DOCUMENT, chunks=["A fact."],
                            created_at=timezone.now(), updated_at=timezone.now())
    Webhook.objects.create(id=WEBHOOK, bank_id="edge", url="https://example.com/hook")
    return APIClient(raise_request_exception=False)


def _send(api: APIClient, method: str, path: str, body: Any) -> Any:
    return getattr(api, method)(path, data=body, format="json")


def _one(response: Any, loc: list[Any]) -> dict[str, Any]:
    assert response.status_code == 422, response.content
    matching = [e for e in response.json()["detail"] if e["loc"] == loc]
    assert matching, response.json()
    return matching[0]


def _shape(error: dict[str, Any]) -> tuple[str, str]:
    """The message with its numbers blanked (a bound differs per field), and the type."""
    return re.sub(r"-?\d+", "N", error["msg"]), error["type"]


def test_every_documented_body_is_in_the_table(api):
    # The property test below covers BODIES: an endpoint of the document with a request body
    # that BODIES lacks would never be fuzzed field by field (the node PATCH once was).
    ids = {"bank_id": "edge", "mental_model_id": "m1", "node_id": PAGE,
           "directive_id": DIRECTIVE, "proposal_id": PROPOSAL, "memory_id": MEMORY,
           "document_id": DOCUMENT, "webhook_id": WEBHOOK}
    document = api.get("/openapi.json").json()
    documented = {(method, re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path))
                  for path, item in document["paths"].items() for method, op in item.items()
                  if isinstance(op, dict) and "application/json" in op.get("requestBody", {})
                  .get("content", {})}  # a multipart archive upload is a file, not fields
    assert documented <= {(method, path) for method, path, _, _ in BODIES}, documented


# --- one message per kind of mistake -------------------------------------------------------------


def test_every_endpoint_answers_the_same_message_for_the_same_kind_of_mistake(api):
    kinds: dict[str, set[tuple[str, str]]] = {}

    def seen(kind: str, error: dict[str, Any]) -> None:
        kinds.setdefault(kind, set()).add(_shape(error))

    for path in LISTS:
        join = "&" if "?" in path else "?"
        seen("non-integer limit", _one(api.get(f"{path}{join}limit=abc"), ["query", "limit"]))
        seen("limit out of range",
             _one(api.get(f"{path}{join}limit=99999999"), ["query", "limit"]))
        seen("offset out of range",
             _one(api.get(f"{path}{join}offset=-1"), ["query", "offset"])
             if "knowledge-base" not in path else
             _one(api.get(f"{path}{join}limit=-1"), ["query", "limit"]))
    for method, path, body, _ in BODIES:
        seen("unknown field", _one(_send(api, method, path, {**body, "bogus": 1}),
                                   ["body", "bogus"]))
        seen("not an object", _one(_send(api, method, path, [1]), ["body"]))
    for method, path, body, field in STRING_FIELDS:
        seen("wrong type (string)", _one(_send(api, method, path, {**body, field: 5}),
                                         ["body", field]))
    for method, path, body, field, low in INT_FIELDS:
        seen("wrong type (integer)", _one(_send(api, method, path, {**body, field: "x"}),
                                          ["body", field]))
        seen("below the range", _one(_send(api, method, path, {**body, field: low - 1}),
                                     ["body", field]))

    table = {
        "non-integer limit": "int_parsing",
        "limit out of range": "less_than_equal",
        "offset out of range": "greater_than_equal",
        "unknown field": "extra_forbidden",
        "not an object": "dict_type",
        "wrong type (string)": "string_type",
        "wrong type (integer)": "int_type",
        "below the range": "greater_than_equal",
    }
    for kind, wire_type in table.items():
        expected = _shape({"msg": problem_message(wire_type, limit=0),
                           "type": problem_type(wire_type)})
        assert kinds[kind] == {expected}, (kind, kinds[kind])


def test_a_refresh_mode_of_any_json_type_is_a_422_naming_the_mode(api):
    # The crash this idiom was built to end: {"mode": {}} and {"mode": []} were a 500.
    for mode in ({}, [], 5, True, "bogus", 1.5):
        error = _one(_send(api, "post", f"{B}/mental-models/m1/refresh", {"mode": mode}),
                     ["body", "mode"])
        assert error["type"] == "literal_error"
        assert error["msg"] == "Input should be 'full'"


# --- any JSON value in any body field ------------------------------------------------------------

JSON = any_json(max_leaves=12)


def _fields(serializer_class: Any) -> list[str]:
    return list(serializer_class().fields)


FIELD_CASES = [(method, path, body, field)
               for method, path, body, serializer in BODIES for field in _fields(serializer)]


@pytest.mark.parametrize(("method", "path", "body", "field"), FIELD_CASES,
                         ids=[f"{m}:{p.removeprefix(B) or '/'}:{f}" for m, p, _, f in FIELD_CASES])
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(value=JSON)
def test_any_json_value_in_any_body_field_is_never_a_server_error(method, path, body, field,
                                                                  value, api):
    response = _send(api, method, path, {**body, field: value})
    assert response.status_code < 500, (field, value, response.content)
    if response.status_code == 422:
        locs = [e["loc"] for e in response.json()["detail"]]
        # The problem is this field's (a body whose other fields are valid).
        assert all(loc[:2] == ["body", field] for loc in locs), (field, value, locs)


@pytest.mark.parametrize(("method", "path", "body", "_serializer"), BODIES,
                         ids=[f"{m}:{p.removeprefix(B) or '/'}" for m, p, _, _ in BODIES])
def test_a_lone_surrogate_in_any_body_is_a_422_naming_the_body(method, path, body, _serializer,
                                                               api):
    """JSON may escape half of a UTF-16 pair alone; no database or answer can hold it as text."""
    for broken in ({**body, "x": "\ud800"}, {**body, "\udfff": 1}, [{"deep": ["a\udbff"]}]):
        raw = json.dumps(broken).encode()  # ensure_ascii: the surrogate as its \\u escape
        response = api.generic(method.upper(), path, raw, content_type="application/json")
        error = _one(response, ["body"])
        assert "lone surrogate" in error["msg"], error
    # A pair of escapes is one character, and no problem.
    paired = json.dumps({**body, "name": "\U0001f600"}).encode()
    response = api.generic(method.upper(), path, paired, content_type="application/json")
    assert response.status_code < 500 and b"surrogate" not in response.content
