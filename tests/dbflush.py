"""After a transactional test, empty only the tables the test wrote (owned by the test harness).

Django's ``TransactionTestCase`` ends every test with ``flush``: one ``TRUNCATE`` of every table
of every app, then the post-migrate hooks again (content types, permissions, the beat schedule
rows, the embeddings profile). Most transactional tests write a handful of tables, so this
plugin replaces that teardown with one that ends in the same state:

- the first transactional test of a session is flushed by Django's own ``flush``; the rows left
  then (what the post-migrate hooks write) are that database's *baseline*, as checksums;
- after each later test, one query finds the tables that differ from the baseline (rows in a
  table the baseline has empty, other rows in one it seeds); only those are truncated, with
  ``CASCADE`` (the tables whose foreign keys point at them, empty or written too);
- when a test changed a table the hooks fill, or the cascade reached one, Django's full
  ``flush`` runs instead.

Tests asking for ``available_apps``, ``serialized_rollback`` or ``reset_sequences`` keep
Django's own teardown.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

_django_fixture_teardown = TransactionTestCase._fixture_teardown
# Per database alias: table → checksum of its rows after a full flush (None: empty).
_baselines: dict[str, dict[str, str | None]] = {}


def _tables(connection: Any) -> list[str]:
    return sorted(connection.introspection.django_table_names(only_existing=True,
                                                              include_views=False))


def _state(connection: Any, tables: list[str], seeded: set[str]) -> dict[str, str | None]:
    """Each table's checksum (tables the baseline seeds) or whether it has a row (the rest)."""
    qn = connection.ops.quote_name
    parts = [
        f"SELECT %s, (SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {qn(t)} t)"
        if t in seeded else
        f"SELECT %s, (SELECT 'rows' FROM {qn(t)} LIMIT 1)"
        for t in tables
    ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), tables)
        return dict(cursor.fetchall())


def _targeted_fixture_teardown(self: TransactionTestCase) -> None:
    if self.available_apps is not None or self.serialized_rollback or self.reset_sequences:
        _django_fixture_teardown(self)
        return
    for db_name in self._databases_names(include_mirrors=False):
        connection = connections[db_name]
        tables = _tables(connection)
        baseline = _baselines.get(db_name)
        if baseline is None or set(baseline) != set(tables):
            _flush_and_record(db_name, connection)
            continue
        seeded = {t for t, checksum in baseline.items() if checksum is not None}
        dirty = [t for t, value in _state(connection, tables, seeded).items() if value != baseline[t]]
        if not dirty:
            continue
        if seeded & set(dirty) or not _truncate(connection, dirty, baseline):
            _flush_and_record(db_name, connection)


class _SeededRowsTouched(Exception):
    pass


def _truncate(connection: Any, tables: list[str], baseline: dict[str, str | None]) -> bool:
    """``TRUNCATE … CASCADE`` (the empty tables that reference these go too); False, and
    nothing done, when that reached a table the post-migrate hooks fill."""
    qn = connection.ops.quote_name
    seeded = {t: checksum for t, checksum in baseline.items() if checksum is not None}
    try:
        with transaction.atomic(using=connection.alias):
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE " + ", ".join(qn(t) for t in tables) + " CASCADE")
            if _state(connection, sorted(seeded), set(seeded)) != seeded:
                raise _SeededRowsTouched
    except (DatabaseError, _SeededRowsTouched):
        return False
    return True


def _flush_and_record(db_name: str, connection: Any) -> None:
    """Django's own teardown for one database (``flush``, the post-migrate hooks), then the
    baseline: what it left."""
    call_command("flush", verbosity=0, interactive=False, database=db_name,
                 reset_sequences=False, allow_cascade=False, inhibit_post_migrate=False)
    tables = _tables(connection)
    nonempty = {t for t, value in _state(connection, tables, set()).items() if value is not None}
    _baselines[db_name] = _state(connection, tables, nonempty)


TransactionTestCase._fixture_teardown = _targeted_fixture_teardown  # type: ignore[method-assign]
