"""tests/dbflush.py: after a transactional test, every table is as Django's flush leaves it —
by the targeted truncation (rows in tables the baseline has empty) or by Django's full flush (a
row the post-migrate hooks wrote was changed)."""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test import TransactionTestCase

from hindsight.banks.models import Bank, MemoryUnit
from tests import dbflush
from tests.factories import make_bank, make_memory


class _Case(TransactionTestCase):
    databases = {"default"}

    def runTest(self) -> None:  # noqa: N802 - unittest's name
        pass


def _as_flushed() -> None:
    assert not Bank.objects.exists() and not MemoryUnit.objects.exists()
    assert ContentType.objects.filter(app_label="banks", model="bank").exists()
    assert not ContentType.objects.filter(model="renamed").exists()
    baseline = dbflush._baselines[connection.alias]
    seeded = {t for t, checksum in baseline.items() if checksum is not None}
    assert seeded, "the post-migrate hooks' rows are in the baseline"
    assert dbflush._state(connection, dbflush._tables(connection), seeded) == baseline


def test_the_teardown_truncates_what_a_test_wrote_and_flushes_when_it_changed_the_hooks_rows(
    transactional_db,
) -> None:
    assert TransactionTestCase._fixture_teardown is dbflush._targeted_fixture_teardown
    dbflush._flush_and_record(connection.alias, connection)
    baseline = dbflush._baselines[connection.alias]

    make_memory(make_bank("flushed-bank"), "a fact")
    _Case()._fixture_teardown()
    _as_flushed()
    assert dbflush._baselines[connection.alias] is baseline  # truncated, no full flush

    make_bank("flushed-bank")
    ContentType.objects.filter(app_label="banks", model="bank").update(model="renamed")
    _Case()._fixture_teardown()
    _as_flushed()
    assert dbflush._baselines[connection.alias] is not baseline  # flushed, recorded again
