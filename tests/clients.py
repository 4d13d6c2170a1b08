"""The shared fixtures of the tests: ``api`` and ``bank``.

- ``api``: Django REST framework's test client, for the tests of the HTTP API. A module that
  needs another client (``APIClient(raise_request_exception=False)``, one that seeds a bank
  first) defines its own ``api``, which wins over this one.
- ``bank``: the test's bank row, id ``bank_id`` and other fields ``bank_fields``; a package's
  conftest or a module overrides those two fixtures to choose its own (pytest's fixture
  override), and a module whose bank comes with more (another bank, patched publishing)
  overrides ``bank`` itself, asking for this one by the same name. The row is committed when
  the test is transactional — its module's ``django_db(transaction=True)`` mark, or a fixture
  such as ``worker_factory`` or ``live_server`` asks for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank
from tests.factories import make_bank

__all__ = ["api", "bank", "bank_fields", "bank_id"]


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def bank_id() -> str:
    return "bank"


@pytest.fixture
def bank_fields() -> dict[str, Any]:
    return {}


@pytest.fixture
def bank(db: None, bank_id: str, bank_fields: dict[str, Any]) -> Bank:
    return make_bank(bank_id, **bank_fields)
