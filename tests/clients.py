"""``api``: Django REST framework's test client, for the tests of the HTTP API.

A module that needs another client (``APIClient(raise_request_exception=False)``, one that
seeds a bank first) defines its own ``api``, which wins over this one.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

__all__ = ["api"]


@pytest.fixture
def api() -> APIClient:
    return APIClient()
