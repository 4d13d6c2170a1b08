"""Fixtures for mental-model tests (rows come from tests/factories.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def bank_id() -> str:
    return "mm-bank"


@pytest.fixture
def bank_fields() -> dict[str, str]:
    return {"name": "Mental model bank"}
