"""An offset past PostgreSQL's bigint is a 422 naming it, not a database error.

Found by tests/test_schemathesis.py (``GET /banks?offset=411927680231677762732032`` was a 500).
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

HUGE = "411927680231677762732032"  # > 2**63 - 1


@pytest.mark.parametrize("path", [
    "/v1/default/banks",
    "/v1/default/banks/ob/memories/list",
    "/v1/default/banks/ob/tags",
])
def test_offset_past_bigint_is_a_422_naming_the_offset(path: str) -> None:
    api = APIClient(raise_request_exception=False)
    api.put("/v1/default/banks/ob", {}, format="json")
    response = api.get(path, {"offset": HUGE})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "offset"]
    assert error["msg"] == "Input should be less than or equal to 2147483647"


def test_largest_accepted_offset_is_an_empty_page() -> None:
    api = APIClient(raise_request_exception=False)
    api.put("/v1/default/banks/ob", {}, format="json")
    response = api.get("/v1/default/banks", {"offset": 2**31 - 1})
    assert response.status_code == 200
    assert response.json()["banks"] == []
