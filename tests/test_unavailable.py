"""Unavailable, never 500: while PostgreSQL refuses connections (or takes them and never
answers: within the connect timeout) every request that needs it answers 503 with
``Retry-After`` in the wire's error shape, and the same process serves again once it is back; while the broker is unreachable a submit is accepted durably (the operation row
commits first, its publish fails and is logged) and runs once the broker is back."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from fakes.consolidation_llm import ConsolidatingLLM
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.infra.edge.errors import UNAVAILABLE_RETRY_AFTER_SECONDS
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.test_health import _refusing_port, database_down
from tests.workers import use_broker, wait_until

BANK = "outage-bank"
API = f"/v1/default/banks/{BANK}"
RETAIN = {"items": [{"content": "Alice runs the team", "strategy": "verbatim"}]}


def outage_calls(api: APIClient) -> dict[str, Any]:
    """One of each kind of call: a sync and an async retain, a refresh submit, reads."""
    return {
        "retain": api.post(f"{API}/memories", RETAIN, format="json"),
        "retain async": api.post(f"{API}/memories", {**RETAIN, "async": True}, format="json"),
        "refresh": api.post(f"{API}/mental-models/team/refresh", format="json"),
        "list banks": api.get("/v1/default/banks"),
        "list memories": api.get(f"{API}/memories/list"),
        "operations": api.get(f"{API}/operations"),
    }


def test_while_postgresql_refuses_the_api_answers_503_with_retry_after_then_serves_again(
    transactional_db: None, admin_client: Client,
) -> None:
    Bank.objects.create(id=BANK)
    make_mental_model(BANK, "team", content="# Team")
    api = APIClient(raise_request_exception=False)
    admin_client.raise_request_exception = False
    with database_down():
        down = {**outage_calls(api), "admin": admin_client.get("/admin/banks/bank/")}
    for name, response in down.items():
        assert response.status_code == 503, (name, response.status_code, response.content)
        assert response["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS), name
        body = response.json()
        assert list(body) == ["detail"] and "database is unavailable" in body["detail"], name
    # Nothing was written while it was down.
    assert not MemoryUnit.objects.filter(bank_id=BANK).exists()
    assert not Operation.objects.filter(bank_id=BANK).exists()

    up = {**outage_calls(api), "admin": admin_client.get("/admin/banks/bank/")}
    assert {name: r.status_code for name, r in up.items()} == dict.fromkeys(up, 200), {
        name: r.content[:300] for name, r in up.items() if r.status_code != 200}
    assert MemoryUnit.objects.filter(bank_id=BANK).count() == 1  # the sync retain (the async one is queued)


def test_a_database_that_takes_connections_and_never_answers_is_a_503_within_the_timeout(
    transactional_db: None, settings: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import connection

    configured = settings.HINDSIGHT.database_connect_timeout_seconds
    assert settings.DATABASES["default"]["OPTIONS"]["connect_timeout"] == configured
    # The configured timeout reaches libpq through these options (above); the outage then waits
    # libpq's shortest timeout (2 s, the configuration's minimum too), not the default 5 s.
    timeout = 2
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "connect_timeout", timeout)
    with database_down(silent=True):
        started = time.monotonic()
        response = APIClient(raise_request_exception=False).get("/v1/default/banks")
        took = time.monotonic() - started
    # Without a connect timeout the request hung on the handshake for minutes (132 s measured).
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    assert timeout - 0.5 <= took < timeout + 5, took
    assert APIClient().get("/v1/default/banks").status_code == 200


@pytest.mark.integration
def test_while_the_broker_is_unreachable_submits_are_accepted_and_run_once_it_is_back(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any, settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    Bank.objects.create(id=BANK, config={"enable_auto_consolidation": False})
    ConsolidatingLLM(llm)  # answers the refresh's reflect loop
    make_memory(BANK, "Alice runs the team", embed=True)
    make_mental_model(BANK, "team", content="# Team")
    worker_factory(env=llm.env)
    api = APIClient(raise_request_exception=False)
    with socket.socket() as closed, use_broker(settings, f"redis://127.0.0.1:{_refusing_port(closed)}/0"):
        started = time.monotonic()
        retained = api.post(f"{API}/memories", {**RETAIN, "async": True}, format="json")
        refreshed = api.post(f"{API}/mental-models/team/refresh", format="json")
        took = time.monotonic() - started
        assert retained.status_code == 200, retained.content
        assert refreshed.status_code == 200, refreshed.content
        ids = [retained.json()["operation_id"], refreshed.json()["operation_id"]]
        ops = Operation.objects.filter(id__in=ids)
        # Accepted durably: the rows committed, their publish failed and left them to recovery.
        # (Not read from ``dispatched_at``: beat's recovery in this process may be re-sending
        # one right now, and a send stamps it before it publishes and clears it when that fails.)
        assert set(ops.values_list("status", flat=True)) == {"pending"}
        failed = {record.getMessage() for record in caplog.records
                  if record.name == "operations.dispatch"}
        assert all(f"publishing operation {op_id} failed; recovery will re-send it" in failed
                   for op_id in ids), failed
    assert took < 10, took
    # The broker is back: beat's recovery sends them, the worker runs them.
    wait_until(lambda: set(ops.values_list("status", flat=True)) == {"completed"}, 60,
               message="the operations accepted during the outage ran")
    assert MemoryUnit.objects.filter(bank_id=BANK, text="Alice runs the team").count() == 2


@pytest.mark.django_db
def test_every_connection_notices_a_dropped_network_within_seconds() -> None:
    """Unacknowledged bytes fail a query after TCP_USER_TIMEOUT_MS and idle connections are
    probed: libpq's parameters on the live connection (a socket option each: what a real cut
    does to them needs a network that drops packets, which no test here has)."""
    from django.db import connection

    from hindsight.project.settings import TCP_USER_TIMEOUT_MS

    connection.ensure_connection()
    parameters = connection.connection.info.get_parameters()
    assert parameters["tcp_user_timeout"] == str(TCP_USER_TIMEOUT_MS)
    assert (parameters["keepalives"], parameters["keepalives_idle"],
            parameters["keepalives_count"]) == ("1", "10", "3")
