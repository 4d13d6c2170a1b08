"""tests/dbflush.py: after a transactional test, every table is as Django's flush leaves it.

The tests run in this order on one xdist worker: each writer is followed by a reader that finds
every table as the flush left it — by the targeted truncation (rows in tables the baseline has
empty) or by Django's full flush (a row the post-migrate hooks wrote was changed).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from hindsight.banks.models import Bank, MemoryUnit
from tests import dbflush
from tests.factories import make_bank, make_memory

pytestmark = pytest.mark.xdist_group("dbflush")

seen: dict[str, Any] = {}


def _as_flushed() -> None:
    assert not Bank.objects.exists() and not MemoryUnit.objects.exists()
    assert ContentType.objects.filter(app_label="banks", model="bank").exists()
    assert not ContentType.objects.filter(model="renamed").exists()
    baseline = dbflush._baselines[connection.alias]
    seeded = {t for t, checksum in baseline.items() if checksum is not None}
    assert seeded, "the post-migrate hooks' rows are in the baseline"
    assert dbflush._state(connection, dbflush._tables(connection), seeded) == baseline


def test_a_first_transactional_test_leaves_the_baseline(transactional_db) -> None:
    pass


def test_a_test_writes_tables_the_baseline_has_empty(transactional_db) -> None:
    seen["baseline"] = dbflush._baselines[connection.alias]
    make_memory(make_bank("flushed-bank"), "a fact")


def test_the_next_finds_them_truncated_without_a_full_flush(transactional_db) -> None:
    _as_flushed()
    assert dbflush._baselines[connection.alias] is seen["baseline"]  # not recorded again


def test_a_test_changes_a_row_the_post_migrate_hooks_wrote(transactional_db) -> None:
    make_bank("flushed-bank")
    ContentType.objects.filter(app_label="banks", model="bank").update(model="renamed")


def test_the_next_finds_the_hooks_rows_back_after_a_full_flush(transactional_db) -> None:
    _as_flushed()
    assert dbflush._baselines[connection.alias] is not seen["baseline"]  # flushed, recorded
