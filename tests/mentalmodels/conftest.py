"""Fixtures for mental-model tests (rows come from tests/factories.py)."""

from __future__ import annotations

import pytest

from hindsight.banks.models import Bank
from tests.factories import make_bank


@pytest.fixture
def bank(db) -> Bank:
    return make_bank("mm-bank", name="Mental model bank")
