from __future__ import annotations

import socket

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


def test_health_answers_503_while_the_database_is_down(django_db_setup, django_db_blocker) -> None:
    # The database "goes down": the connection is pointed at a port nobody listens on (held
    # bound, so nothing else takes it), which refuses every connection attempt.
    with socket.socket() as closed, django_db_blocker.unblock():
        closed.bind(("127.0.0.1", 0))
        address = {"HOST": "127.0.0.1", "PORT": str(closed.getsockname()[1])}
        saved = {key: connection.settings_dict[key] for key in address}
        connection.close()
        connection.settings_dict.update(address)
        try:
            response = APIClient().get("/health")
        finally:
            connection.close()
            connection.settings_dict.update(saved)
        assert response.status_code == 503, response.content
        body = response.json()
        assert body["status"] == "unhealthy", body
        assert body["database"].startswith("error: "), body
        # Back up: healthy again, on the same process.
        assert APIClient().get("/health").json() == {"status": "healthy", "database": "connected"}
