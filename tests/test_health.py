from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from django.db import connection
from rest_framework.test import APIClient


@pytest.mark.django_db
def test_health_reports_connected_database() -> None:
    response = APIClient().get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "healthy", "database": "connected"}


def test_unknown_route_is_a_json_404(client) -> None:
    response = client.get("/v1/default/nope/nothing")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}


def _refusing_port(sock: socket.socket) -> str:
    """A port on 127.0.0.1 that refuses every connection: bound by ``sock``, never listened on."""
    sock.bind(("127.0.0.1", 0))
    return str(sock.getsockname()[1])


@contextlib.contextmanager
def database_down(*, silent: bool = False) -> Iterator[None]:
    """The database "goes down": the connection is pointed at a port nobody listens on (held
    bound, so nothing else takes it), which refuses every connection attempt; back up after.
    ``silent``: a port that takes connections and never answers (a network cut holding the
    bytes): bound and listening, never accepting, so the kernel completes each handshake."""
    with socket.socket() as closed:
        if silent:
            closed.bind(("127.0.0.1", 0))
            closed.listen(64)
            port = str(closed.getsockname()[1])
        else:
            port = _refusing_port(closed)
        address = {"HOST": "127.0.0.1", "PORT": port}
        saved = {key: connection.settings_dict[key] for key in address}
        connection.close()
        connection.settings_dict.update(address)
        try:
            yield
        finally:
            connection.close()
            connection.settings_dict.update(saved)


def test_health_answers_503_while_the_database_is_down(django_db_setup, django_db_blocker) -> None:
    with django_db_blocker.unblock():
        with database_down():
            response = APIClient().get("/health")
        assert response.status_code == 503, response.content
        body = response.json()
        assert body["status"] == "unhealthy", body
        assert body["database"].startswith("error: "), body
        # Back up: healthy again, on the same process.
        assert APIClient().get("/health").json() == {"status": "healthy", "database": "connected"}




@pytest.mark.django_db
def test_the_probes_answer_live_and_ready_with_the_database_and_broker_up() -> None:
    live = APIClient().get("/health/live").json()
    assert list(live) == ["status", "version", "uptime_seconds"] and live["status"] == "alive"
    assert live["uptime_seconds"] >= 0
    response = APIClient().get("/health/ready")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "healthy", "database": "connected", "broker": "connected"}


def test_readiness_fails_while_postgresql_is_down_and_passes_once_it_is_back(
        django_db_setup, django_db_blocker) -> None:
    with django_db_blocker.unblock():
        with database_down():
            ready = APIClient().get("/health/ready")
            live = APIClient().get("/health/live")
        assert ready.status_code == 503, ready.content
        body = ready.json()
        assert body["status"] == "unhealthy" and body["database"].startswith("error: "), body
        assert body["broker"] == "connected", body
        # Liveness checks nothing but the process: an outage must not get it restarted.
        assert live.status_code == 200 and live.json()["status"] == "alive"
        assert APIClient().get("/health/ready").status_code == 200


@pytest.mark.django_db
def test_readiness_fails_while_the_broker_is_unreachable(settings) -> None:
    with socket.socket() as closed:
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_refusing_port(closed)}/0"
        response = APIClient().get("/health/ready")
    assert response.status_code == 503, response.content
    body = response.json()
    assert body["status"] == "unhealthy" and body["broker"].startswith("error: "), body
    assert body["database"] == "connected", body
