"""Schemathesis against the in-process WSGI app: no /v1 operation answers a 5xx, and every
answer matches the status codes, content type and body schema the document gives it — over the
fuzzing phase (every operation, a bounded number of examples each) and the stateful phase
(sequences that follow the links schemathesis infers from the document: a create's
``mental_model_id`` / ``operation_id`` / node id into the routes that take it), with at least
``MIN_REQUESTS`` generated requests in all: each of the three runs as one xdist group (so the
three overlap on different xdist workers) and checks its own share, and the shares add up.

Requests are generated from our own OpenAPI document (valid and invalid ones: every generation
mode), a bounded number per operation with a fixed seed, so the run is repeatable and short.
Half of the generated path ids are swapped for the ids of a seeded bank that has a memory, a
mental model and an operation, so the routes with ids reach their services instead of stopping
at a 404. The LLM provider is ``none`` (the default): LLM routes answer 400, which is fine here.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections, connection, transaction
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.project.wsgi import application
from mentalmodels.models import MentalModel

BANK = "st-bank"
MIN_REQUESTS = 2000
#: Requests made by each of the three (``server_error``, ``shape``, ``stateful``), each checked
#: against its share by the last test of its group; the shares add up to ``MIN_REQUESTS``.
SENT: Counter[str] = Counter()
# Each a little under what its fixed seed sends today (1,025; 410; 824).
SHARES = {"server_error": 950, "shape": 380, "stateful": 720}
# The knowledge base's routes take node and page ids: ``_seed`` makes a folder and a page
# (``node_id`` is the folder, ``page_id`` the page), so the fuzzing phase reaches them as well as
# the stateful phase's links from the folder/page creates. Hook for ids of a new family: add its
# path parameters to ``_seed``'s answer (a key per parameter name).
MODEL = "st-model"
MAX_EXAMPLES = 25
_MARK = "known-"

CONFIG = SchemathesisConfig.from_dict({
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": True,
                   "allow-x00": True},
    # The coverage phase enumerates every boundary of every field (hundreds of cases on the
    # larger bodies); the fuzzing phase with both modes keeps the run bounded.
    "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
})


@pytest.fixture
def in_test_transaction() -> Any:
    """Keep Django's per-request connection closing off, as its own test client does.

    The WSGI handler closes the connection when a request finishes; inside the test's
    transaction that would end it (and every later example) with "connection is closed".
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


_seeded: dict[str, str] = {}


def _seed() -> dict[str, str]:
    """The bank, memory, mental model, operation, folder and page the path ids point at (re-made
    if deleted)."""
    from hindsight.infra.embeddings import get_embedder
    from mentalmodels.knowledge.models import KnowledgeNode
    from mentalmodels.knowledge.services import knowledge_folder_create, knowledge_page_create
    from mentalmodels.services import mental_model_create

    if not Bank.objects.filter(id=BANK).exists():
        Bank.objects.create(id=BANK, name="Schemathesis bank")
        _seeded.pop("operation_id", None)
    if not MemoryUnit.objects.filter(bank_id=BANK).exists():
        text = "Alice leads the platform team."
        [vector] = get_embedder().embed([text])
        MemoryUnit.objects.create(bank_id=BANK, text=text, fact_type="world", tags=["team"],
                                  embedding=vector)
    if not MentalModel.objects.filter(bank_id=BANK, mental_model_id=MODEL).exists():
        _, operation = mental_model_create(bank_id=BANK, name="Team", source_query="Who leads?",
                                           tags=["team"], mental_model_id=MODEL)
        _seeded["operation_id"] = str(operation.id)
    if not KnowledgeNode.objects.filter(bank_id=BANK, id=_seeded.get("node_id", "")).exists():
        # Fresh names: a fuzzed create may have taken any fixed one.
        folder = knowledge_folder_create(bank_id=BANK, name=f"Folder {uuid.uuid4().hex[:8]}")
        _seeded["node_id"] = folder.id
    if not KnowledgeNode.objects.filter(bank_id=BANK, id=_seeded.get("page_id", "")).exists():
        page, _ = knowledge_page_create(bank_id=BANK, name=f"Page {uuid.uuid4().hex[:8]}",
                                        source_query="Who leads?", tags=["team"])
        _seeded["page_id"] = page.id
    return {"bank_id": BANK, "mental_model_id": MODEL, "node_id": _seeded["node_id"],
            "page_id": _seeded["page_id"],
            "operation_id": _seeded.get("operation_id", "00000000-0000-0000-0000-000000000000")}


def _known_ids_half_the_time(context: Any, path_parameters: dict[str, Any]) -> Any:
    if not path_parameters:
        return st.just(path_parameters)
    # Markers resolved per example in the test body (the rows are made there). Path values
    # arrive percent-encoded, so the marker uses only characters that encode to themselves.
    known = {key: f"{_MARK}{key}" for key in path_parameters}
    return st.sampled_from([path_parameters, known])


def _resolve_known_ids(case: Any, *, seed_always: bool = False) -> None:
    """Swap the markers for the seeded rows' ids. ``seed_always``: make the rows for a case that
    points at none of them too (the stateful phase: the links a sequence can follow depend on
    them); the fuzzing phase makes them only for a case that points at them."""
    marked = {key: value[len(_MARK):] for key, value in (case.path_parameters or {}).items()
              if isinstance(value, str) and value.startswith(_MARK)}
    if not (marked or seed_always):
        return
    ids = _seed()
    for key, name in marked.items():
        if name in ids:
            case.path_parameters[key] = ids[name]


# Loaded at import (one pytest item per operation): the document is generated in-process and
# touches no database.
schema = schemathesis.openapi.from_wsgi("/openapi.json", application, config=CONFIG).include(
    path_regex=r"^/v1/"
)
schema.hook("flatmap_path_parameters")(_known_ids_half_the_time)


@pytest.mark.xdist_group("schemathesis-server-error")
@schema.parametrize()
@hsettings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
           suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_no_v1_operation_answers_a_server_error(case: Any, in_test_transaction: None) -> None:
    _resolve_known_ids(case)
    response = case.call()
    SENT["server_error"] += 1
    # A failed statement would poison the rest of the test's transaction and turn every later
    # example into a misleading error: fail on the first one.
    assert not connection.needs_rollback, (case.method, case.formatted_path)
    case.validate_response(response, checks=[not_a_server_error])


def _enough(part: str) -> None:
    """The last test of a part's group: the part ran in this process and sent its share."""
    if not SENT[part]:
        pytest.skip(f"run with the module's {part} tests")
    print(f"schemathesis {part} requests: {SENT[part]}")
    assert SENT[part] >= SHARES[part], dict(SENT)


@pytest.mark.xdist_group("schemathesis-server-error")
def test_enough_server_error_requests_were_generated() -> None:
    _enough("server_error")


@pytest.mark.xdist_group("schemathesis-shape")
@schema.parametrize()
@hsettings(max_examples=10, deadline=None, derandomize=True,
           suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_every_answer_matches_its_documented_status_and_shape(case: Any,
                                                              in_test_transaction: None) -> None:
    # The document is what clients are generated from: an undocumented status code or a body
    # that does not match its schema (error bodies included) is a bug in one of the two.
    _resolve_known_ids(case)
    response = case.call()
    SENT["shape"] += 1
    assert not connection.needs_rollback, (case.method, case.formatted_path)
    case.validate_response(response, checks=[status_code_conformance, content_type_conformance,
                                             response_schema_conformance])


@pytest.mark.xdist_group("schemathesis-shape")
def test_enough_shape_requests_were_generated() -> None:
    _enough("shape")


@pytest.mark.parametrize(("path", "id_key"), [
    ("/v1/default/banks/{bank_id}/mental-models/{mental_model_id}", "mental_model_id"),
    ("/v1/default/banks/{bank_id}/knowledge-base/pages/{page_id}", "page_id"),
])
@pytest.mark.django_db
def test_generated_cases_reach_the_seeded_rows(path: str, id_key: str,
                                               in_test_transaction: None) -> None:
    # Without the id swap every route with an id would stop at a 404 and prove little.
    from hypothesis import find

    operation = schema[path]["GET"]
    case = find(operation.as_strategy(),
                lambda c: (c.path_parameters or {}).get("bank_id") == _MARK + "bank_id",
                # No shrinking: any example with the marker proves the point, and shrinking a
                # schemathesis case ran past the test's timeout under xdist (a CI hang).
                settings=hsettings(max_examples=200, database=None, derandomize=True,
                                   phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    ids = _seed()
    case.path_parameters = {key: ids[key] for key in case.path_parameters}
    case.query = {}
    response = case.call()
    assert response.status_code == 200
    assert response.json()["id"] in (MODEL, ids[id_key])


def test_every_v1_route_of_the_url_conf_is_in_the_document() -> None:
    # Fuzzing covers what the document lists: a route (or a method of one) the document lacks
    # would never be generated. Enumerated from the URL conf, so a new route cannot hide.
    import re

    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns: list[Any], prefix: str = "") -> Any:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                yield from walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                yield prefix + str(entry.pattern), entry.callback

    documented = {path: {m.lower() for m in item} for path, item in schema.raw_schema["paths"].items()}
    missing = []
    for route, callback in walk(get_resolver().url_patterns):
        if not route.startswith("v1/"):
            continue
        path = "/" + re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", route)
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        methods = {m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)}
        if not methods <= documented.get(path, set()):
            missing.append((path, sorted(methods - documented.get(path, set()))))
    assert not missing, missing


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
STATEFUL_EXAMPLES = 100
STATEFUL_STEPS = 8


# The same document with the stateful phase on, so schemathesis infers the links between
# operations (a create's answer feeding the routes that take its id).
stateful_schema = schemathesis.openapi.from_wsgi(
    "/openapi.json", application,
    config=SchemathesisConfig.from_dict({
        "generation": {"mode": "all", "deterministic": True, "allow-x00": True},
        "phases": {"coverage": {"enabled": False}},
    }),
).include(path_regex=r"^/v1/")
stateful_schema.hook("flatmap_path_parameters")(_known_ids_half_the_time)


class _Workflow(stateful_schema.as_state_machine()):  # type: ignore[misc]
    """The stateful phase: each step one call chosen along the inferred links.

    Every sequence starts from the same rows: it runs inside a savepoint that its teardown rolls
    back. Otherwise a sequence would meet what the ones before it left, and hypothesis, replaying
    one to confirm a failure, would find other links open (FlakyStrategyDefinition) instead of
    the failure."""

    def __init__(self) -> None:
        super().__init__()
        self._savepoint = transaction.savepoint()

    def teardown(self) -> None:
        transaction.savepoint_rollback(self._savepoint)
        super().teardown()

    def before_call(self, case: Any) -> None:
        _resolve_known_ids(case, seed_always=True)

    def after_call(self, response: Any, case: Any) -> None:
        SENT["stateful"] += 1
        assert not connection.needs_rollback, (case.method, case.formatted_path)

    def validate_response(self, response: Any, case: Any, additional_checks: Any = None,
                          **kwargs: Any) -> None:
        case.validate_response(response, checks=CHECKS)


@pytest.mark.django_db
def test_stateful_sequences_answer_no_server_error_and_match_the_document(
        in_test_transaction: None) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    before = SENT["stateful"]
    run_state_machine_as_test(_Workflow, settings=hsettings(
        max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS, deadline=None,
        derandomize=True, database=None, suppress_health_check=list(HealthCheck)))
    assert SENT["stateful"] - before >= STATEFUL_EXAMPLES
    _enough("stateful")


def test_the_shares_add_up_to_the_minimum() -> None:
    assert sum(SHARES.values()) >= MIN_REQUESTS, SHARES
