from __future__ import annotations

import pytest
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
