"""Isolation and access, over every route the URL conf has (so a new route cannot be forgotten).

1. Another bank's ids: every route that takes an id, called under bank B with bank A's model,
   operation, memory, history, knowledge-base node or page id, answers 404 (an operation read
   answers upstream's ``status: "not_found"``) and changes nothing of bank A; bank A's folder
   named as a parent under bank B is refused, and bank B's tree, search and export show
   nothing of bank A.
2. ``HINDSIGHT_API_TENANT_API_KEY``: every ``/v1`` route, with every method its view answers,
   refuses a missing and a wrong key with 401, and lets the right key through (every method,
   with a valid body, on real rows); ``/health``, ``/version`` and the API docs stay open.
3. The admin needs Django's login; the MCP HTTP transport, where the URL conf has one,
   honours the key.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from fakes.llm_server import Reply
from hindsight.banks.models import Document, MemoryUnit
from hindsight.webhooks.models import Webhook
from mentalmodels.directives.models import Directive
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.review.models import MentalModelProposal
from operations.models import Operation
from tests.factories import make_bank, make_memory, make_mental_model, make_operation
from tests.review.helpers import make_proposal
from tests.transfer.archives import upstream_archive

METHODS = ("get", "post", "put", "patch", "delete")
PARAM = re.compile(r"<(?:(?P<conv>[a-z]+):)?(?P<name>[a-z_]+)>")
KEY = "isolation-key-0123456789"

# A body per method that passes validation, so a 404 is the id's doing, not a 422's.
BODIES: dict[str, dict[str, Any]] = {
    "patch": {"name": "hijacked"},
    "put": {"name": "hijacked"},
    "post": {},
}


@dataclasses.dataclass(frozen=True)
class Route:
    path: str  # Django's route syntax, e.g. "v1/default/banks/<str:bank_id>/stats"
    methods: tuple[str, ...]

    @property
    def params(self) -> list[str]:
        return [m.group("name") for m in PARAM.finditer(self.path)]

    def url(self, values: dict[str, str]) -> str:
        return "/" + PARAM.sub(lambda m: values[m.group("name")], self.path)


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def _methods(callback: Any) -> tuple[str, ...]:
    view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view is None:  # a function view: ask it with every method
        return METHODS
    return tuple(m for m in METHODS if hasattr(view, m))


@dataclasses.dataclass(frozen=True)
class Upload:
    """A request body sent as a multipart file named ``file`` (an archive to import)."""

    content: bytes


def call(client: Client, method: str, url: str, body: Any = None, **headers: str) -> Any:
    data = json.dumps(body) if body is not None else ""
    return client.generic(method.upper(), url, data=data, content_type="application/json",
                          **headers)


def routes(prefix: str) -> list[Route]:
    return [Route(path, _methods(cb)) for path, cb in _walk(get_resolver().url_patterns)
            if path.startswith(prefix)]


V1 = routes("v1/")


def test_the_url_conf_is_enumerated() -> None:
    # The enumeration itself: if this found nothing the tests below would pass vacuously.
    paths = {r.path for r in V1}
    assert "v1/default/banks/<str:bank_id>/mental-models/<str:mental_model_id>" in paths
    assert "v1/default/banks/<str:bank_id>/operations/<str:operation_id>" in paths
    assert len(V1) >= 15


# --------------------------------------------------------------------------------------------
# 1. another bank's ids


@pytest.fixture
def two_banks(db: None, scripted_llm: Any) -> dict[str, str]:
    make_bank("bank-a")
    make_bank("bank-b")
    memory = make_memory("bank-a", "Alice runs the platform team.", tags=["team"],
                         document_id="doc-a")
    model = make_mental_model("bank-a", "team-a", content="# Team A\n\nsecret", tags=["team"])
    history = MentalModelHistory.objects.create(model=model, kind="version",
                                                previous_content="older secret")
    operation = make_operation(bank_id="bank-a", mental_model_id="team-a", status="failed",
                               dedupe_key="mm:bank-a:team-a")
    folder, page = _folder_and_page("bank-a", "a")
    directive = Directive.objects.create(bank_id="bank-a", name="Formal", content="secret rule")
    webhook = Webhook.objects.create(bank_id="bank-a", url="https://example.com/secret-hook")
    proposal = make_proposal(model, "# Team A\n\nsecret proposal")
    return {"mental_model_id": "team-a", "operation_id": str(operation.id),
            "memory_id": str(memory.id), "history_id": str(history.id),
            "document_id": "doc-a", "node_id": folder.id, "page_id": page.id,
            "directive_id": str(directive.id), "webhook_id": str(webhook.id),
            "proposal_id": str(proposal.id)}


def _folder_and_page(bank_id: str, suffix: str) -> tuple[KnowledgeNode, KnowledgeNode]:
    """A folder of the bank's knowledge base and a page in it (a page is a mental model)."""
    folder = KnowledgeNode.objects.create(id=f"kf-{uuid.uuid4().hex}", bank_id=bank_id,
                                          kind=NodeKind.FOLDER, name=f"Folder {suffix}")
    content = "# Page\n\nsecret page" if bank_id == "bank-a" else "# Page\n\nits own page"
    model = make_mental_model(bank_id, f"page-{suffix}", content=content)
    page = KnowledgeNode.objects.create(id=f"kp-{uuid.uuid4().hex}", bank_id=bank_id,
                                        parent=folder, kind=NodeKind.PAGE,
                                        name=f"Page {suffix}", mental_model=model)
    return folder, page


def _bank_a_state() -> Any:
    def rows(qs: Any) -> list[dict[str, Any]]:
        return [{k: str(v) for k, v in row.items()} for row in qs.values()]

    return (rows(MentalModel.objects.filter(bank_id="bank-a")),
            rows(MentalModelHistory.objects.filter(model__bank_id="bank-a")),
            rows(Operation.objects.filter(bank_id="bank-a")),
            rows(MemoryUnit.objects.filter(bank_id="bank-a")),
            rows(KnowledgeNode.objects.filter(bank_id="bank-a")),
            rows(Directive.objects.filter(bank_id="bank-a")),
            rows(MentalModelProposal.objects.filter(model__bank_id="bank-a")))


# The routes that name a bank and one of its rows. A download key (``files/download/<key>``) is
# the tenant's, not a bank's: its scoping is the transfer tests' (another tenant's key).
ID_ROUTES = [r for r in V1 if "bank_id" in r.params and set(r.params) - {"bank_id"}]


@pytest.mark.parametrize("route", ID_ROUTES, ids=lambda r: r.path)
def test_another_banks_ids_are_unknown_and_untouched(route: Route,
                                                     two_banks: dict[str, str]) -> None:
    # A parameter this test has no bank-A id for (a route added later) still gets an id that
    # exists nowhere in bank B: the route must answer 404 for it too.
    values = {"bank_id": "bank-b"}
    for name in route.params:
        if name != "bank_id":
            values[name] = two_banks.get(name, str(uuid.uuid4()))
    url = route.url(values)
    before = _bank_a_state()
    client = Client()
    for method in route.methods:
        response = call(client, method, url, BODIES.get(method))
        text = response.content.decode(errors="replace")
        assert "secret" not in text, (method, url, text[:300])
        if method == "get" and route.params[-1] == "operation_id":
            # docs/behaviour.md#the-operations-api: upstream answers an unknown operation with 200 status "not_found".
            assert response.status_code in (200, 404), (method, url, text[:300])
            if response.status_code == 200:
                assert response.json()["status"] == "not_found", text[:300]
            continue
        assert response.status_code == 404, (method, url, response.status_code, text[:300])
    assert _bank_a_state() == before, (route.path, "bank A changed")


def test_the_id_routes_are_given_bank_as_real_ids() -> None:
    # A route whose id this test has no bank-A row for would only be asked a random id.
    assert {name for r in ID_ROUTES for name in r.params} - {"bank_id"} <= {
        "mental_model_id", "operation_id", "memory_id", "history_id", "node_id", "page_id",
        "directive_id", "webhook_id", "proposal_id", "document_id"}


KB = "/v1/default/banks/bank-b/knowledge-base"


def test_another_banks_knowledge_base_is_neither_shown_nor_reachable(
    two_banks: dict[str, str],
) -> None:
    folder_a, page_a = two_banks["node_id"], two_banks["page_id"]
    own_folder, own_page = _folder_and_page("bank-b", "b")
    before, nodes_of_b = _bank_a_state(), set(KnowledgeNode.objects.filter(bank_id="bank-b"))
    client = Client()
    # A page is a node too, and a folder is no page.
    for method, url, body in [("patch", f"{KB}/nodes/{page_a}", {"name": "hijacked"}),
                              ("delete", f"{KB}/nodes/{page_a}", None),
                              ("get", f"{KB}/pages/{folder_a}", None)]:
        response = call(client, method, url, body)
        assert response.status_code == 404, (method, url, response.content[:300])
    # Bank A's folder as the parent of a new or moved node of bank B: not a folder of bank B.
    for method, url, body in [
        ("post", f"{KB}/folders", {"name": "Inside A", "parent_id": folder_a}),
        ("post", f"{KB}/pages", {"name": "Inside A", "source_query": "What?",
                                 "parent_id": folder_a}),
        ("patch", f"{KB}/nodes/{own_folder.id}", {"parent_id": folder_a}),
    ]:
        response = call(client, method, url, body)
        assert response.status_code == 400, (method, url, response.content[:300])
        assert f"Parent folder '{folder_a}' not found" in response.content.decode()
    # Bank B's own views list bank B's nodes and nothing of bank A's.
    for url in (f"{KB}/tree", f"{KB}/search?q=page", f"{KB}/export"):
        response = Client().get(url)
        text = response.content.decode()
        assert response.status_code == 200, (url, text[:300])
        assert own_page.id in text, (url, text[:300])
        assert folder_a not in text and page_a not in text and "secret" not in text, url
    assert _bank_a_state() == before, "bank A changed"
    assert set(KnowledgeNode.objects.filter(bank_id="bank-b")) == nodes_of_b


# --------------------------------------------------------------------------------------------
# 2. the tenant API key


def _sample_values(route: Route) -> dict[str, str]:
    return {name: ("bank-key" if name == "bank_id" else str(uuid.uuid4())) for name in route.params}


@pytest.fixture
def with_key(settings: Any) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key=KEY)


@pytest.mark.parametrize("route", V1, ids=lambda r: r.path)
@pytest.mark.django_db
def test_every_v1_route_refuses_a_missing_or_wrong_key(route: Route, with_key: None) -> None:
    url = route.url(_sample_values(route))
    client = Client()
    for method in route.methods:
        for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong-key"},
                        {"HTTP_AUTHORIZATION": KEY}, {"HTTP_AUTHORIZATION": f"Basic {KEY}"}):
            response = call(client, method, url, {}, **headers)
            assert response.status_code == 401, (method, url, headers, response.status_code)
            assert response.json() == {
                "detail": "missing or invalid API key (Authorization: Bearer <key>)"}
    assert not MentalModel.objects.exists() and not Operation.objects.exists()


@pytest.mark.parametrize("route", [r for r in V1 if "get" in r.methods], ids=lambda r: r.path)
@pytest.mark.django_db
def test_the_right_key_gets_through(route: Route, with_key: None) -> None:
    url = route.url(_sample_values(route))
    response = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {KEY}")
    assert response.status_code != 401, (url, response.content[:300])


_BANK = "v1/default/banks/<str:bank_id>"
_MODEL = _BANK + "/mental-models/<str:mental_model_id>"
_OPERATION = _BANK + "/operations/<str:operation_id>"
# Every route without a GET: the requests the right key sends it, each with a valid body, and
# the answer each must get (the work done, on the rows of ``key_bank``).
WRITE_ONLY: dict[str, list[tuple[str, Any, int]]] = {
    _BANK + "/memories": [("post", {"items": [{"content": "Bob likes coffee."}],
                                    "async": True}, 200), ("delete", None, 200)],
    _BANK + "/memories/recall": [("post", {"query": "What does Alice like?"}, 200)],
    _BANK + "/consolidate": [("post", {}, 200)],
    _BANK + "/reflect": [("post", {"query": "What does Alice like?"}, 200)],
    _OPERATION + "/retry": [("post", {}, 200)],
    _OPERATION + "/delete": [("delete", None, 200)],
    _MODEL + "/refresh": [("post", {}, 200)],
    _MODEL + "/clear": [("post", {}, 200)],
    _MODEL + "/dry-run-refresh": [("post", {}, 200)],
    _BANK + "/knowledge-base/folders": [("post", {"name": "Ops"}, 201)],
    _BANK + "/knowledge-base/pages": [("post", {"name": "Runbook", "source_query": "How?"}, 201)],
    _BANK + "/knowledge-base/nodes/<str:node_id>": [("patch", {"name": "Renamed"}, 200),
                                                    ("delete", None, 200)],
    _BANK + "/transfer/export": [("post", None, 202)],
    _BANK + "/clone": [("post", None, 202)],
    _BANK + "/transfer/import": [("post", Upload(upstream_archive()), 202)],
    _BANK + "/webhooks/<str:webhook_id>": [("patch", {"enabled": False}, 200),
                                           ("delete", None, 200)],
    _BANK + "/memories/<str:memory_id>/observations": [("delete", None, 200)],
    _BANK + "/observations": [("delete", None, 200)],
    _BANK + "/documents/<path:document_id>/reprocess": [("post", None, 200)],
    _BANK + "/import": [("post", {"version": "1", "directives": [
        {"name": "Formal", "content": "Answer formally."}]}, 200)],
    # A body naming a row of ``key_bank`` is a function of its ids.
    _MODEL + "/restore": [("post", lambda ids: {"version_id": int(ids["version_id"])}, 200)],
    _MODEL + "/proposals/<str:proposal_id>/approve": [("post", None, 200)],
    _MODEL + "/proposals/<str:proposal_id>/reject": [("post", {"reason": "not now"}, 200)],
}
# The query a write-only route's request carries with its body.
WRITE_ONLY_QUERY = {
    _BANK + "/clone": "?target_bank_id=bank-key-clone",
    _BANK + "/transfer/import": "?target_bank_id=bank-key-restored",
}
WRITE_ONLY_ROUTES = [r for r in V1 if "get" not in r.methods]


def test_every_route_without_a_get_has_its_right_key_requests() -> None:
    assert {r.path for r in WRITE_ONLY_ROUTES} == set(WRITE_ONLY)
    for route in WRITE_ONLY_ROUTES:
        assert {method for method, _, _ in WRITE_ONLY[route.path]} == set(route.methods), route


@pytest.fixture
def key_bank(with_key: None, llm: Any, sent: list[str]) -> dict[str, str]:
    """The rows the right-key requests name, and an LLM that answers every question."""
    make_bank("bank-key")
    memory = make_memory("bank-key", "Alice likes tea.", embed=True, document_id="doc-key")
    Document.objects.create(bank_id="bank-key", document_id="doc-key", chunks=["Alice likes tea."],
                            created_at=memory.created_at, updated_at=memory.updated_at)
    model = make_mental_model("bank-key", "mm", content="# Team\n\nAlice likes tea.")
    version = MentalModelHistory.objects.create(model=model, kind="version",
                                                previous_content="# Team")
    proposal = make_proposal(model)
    operation = make_operation(bank_id="bank-key", mental_model_id="mm", status="failed",
                               dedupe_key="mm:bank-key:mm")
    folder, _page = _folder_and_page("bank-key", "key")
    webhook = Webhook.objects.create(bank_id="bank-key", url="https://example.com/hook")
    llm.respond_with(lambda body: Reply.tool_calls([("done", {"answer": "Alice likes tea."})])
                     if body.get("tools") else Reply.text("Alice likes tea."))
    return {"webhook_id": str(webhook.id),
            "bank_id": "bank-key", "mental_model_id": "mm", "operation_id": str(operation.id),
            "node_id": folder.id, "memory_id": str(memory.id),
            "version_id": str(version.id), "proposal_id": str(proposal.id),
            "document_id": "doc-key"}


@pytest.mark.parametrize("route", WRITE_ONLY_ROUTES, ids=lambda r: r.path)
@pytest.mark.django_db
def test_the_right_key_gets_a_write_through(route: Route, key_bank: dict[str, str]) -> None:
    url = route.url(key_bank) + WRITE_ONLY_QUERY.get(route.path, "")
    for method, body, status in WRITE_ONLY[route.path]:
        if isinstance(body, Upload):
            response = Client().post(url, {"file": SimpleUploadedFile("bank.zip", body.content)},
                                     HTTP_AUTHORIZATION=f"Bearer {KEY}")
        else:
            body = body(key_bank) if callable(body) else body
            response = call(Client(), method, url, body, HTTP_AUTHORIZATION=f"Bearer {KEY}")
        assert response.status_code == status, (method, url, response.content[:300])


@pytest.mark.parametrize("path", ["/health", "/version", "/openapi.json", "/docs"])
@pytest.mark.django_db
def test_health_version_and_docs_stay_open(path: str, with_key: None) -> None:
    assert Client().get(path).status_code == 200


# --------------------------------------------------------------------------------------------
# 3. the admin and the MCP transport


ADMIN_PATHS = ["/admin/", "/admin/mentalmodels/mentalmodel/", "/admin/operations/operation/",
               "/admin/banks/bank/", "/admin/banks/memoryunit/"]


@pytest.mark.parametrize("path", ADMIN_PATHS)
@pytest.mark.django_db
def test_the_admin_needs_its_login(path: str, with_key: None) -> None:
    # The API key is not the admin's credential: a bearer gets the login page, not the data.
    response = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {KEY}")
    assert response.status_code == 302, (path, response.status_code)
    assert "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_the_admin_lets_a_staff_login_in(with_key: None, django_user_model: Any) -> None:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    for path in ADMIN_PATHS:
        assert client.get(path).status_code == 200, path


MCP = routes("mcp")


@pytest.mark.skipif(not MCP, reason="no MCP HTTP transport in the URL conf of this build")
@pytest.mark.parametrize("route", MCP, ids=lambda r: r.path)
@pytest.mark.django_db
def test_the_mcp_transport_honours_the_key(route: Route, with_key: None) -> None:
    url = route.url(_sample_values(route))
    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "isolation", "version": "0"}}})
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong-key"}):
        response = Client().post(url, data=initialize, content_type="application/json",
                                 HTTP_ACCEPT="application/json, text/event-stream", **headers)
        assert response.status_code == 401, (url, headers, response.status_code)
