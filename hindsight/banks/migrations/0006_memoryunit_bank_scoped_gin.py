"""The tags and full-text GIN indexes start with ``bank_id`` (``btree_gin``).

Many banks share ``banks_memoryunit``: a GIN index over ``tags`` or ``search_vector`` alone
answers "rows with tag T" or "rows with word W" for every bank, and a bank's query then sorts
out its own rows from a bitmap of all of them (a 100k bank in a 1.1M-row table: 650k rows for
an any-word query). With ``bank_id`` as the first GIN column the index intersects the bank's
posting list with the tag's or word's, so the bitmap holds the bank's rows only. A query on
the second column alone (the admin's tag search) can still use the index.

``btree_gin`` is a contrib extension marked trusted: the database owner (or any role with
CREATE on the database) can create it without being superuser. Production: install the
PostgreSQL contrib package where the server runs (``postgresql-contrib`` on Debian/Ubuntu; in
the official images and most managed services it is there), or run
``CREATE EXTENSION IF NOT EXISTS btree_gin`` beforehand as a privileged role.

The indexes are built and the old ones dropped ``CONCURRENTLY`` (outside a transaction, so
the migration is not atomic): retains keep writing during the build. A build that fails
half-way leaves an INVALID index behind that ``IF NOT EXISTS`` would take for done: drop it
(``DROP INDEX CONCURRENTLY memory_bank_…_gin``) before running the migration again.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import BtreeGinExtension
from django.db import migrations

TABLE = "banks_memoryunit"
NEW = {
    "memory_bank_tags_gin": '("bank_id", "tags")',
    "memory_bank_fts_gin": '("bank_id", "search_vector")',
}
OLD = {"memory_tags_gin": '("tags")', "memory_fts_gin": '("search_vector")'}


def _create(indexes: dict[str, str]) -> list[str]:
    return [f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON "{TABLE}" USING gin {columns}'
            for name, columns in indexes.items()]


def _drop(indexes: dict[str, str]) -> list[str]:
    return [f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"' for name in indexes]


class Migration(migrations.Migration):

    atomic = False  # CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("banks", "0005_memoryunit_bank_no_own_index"),
    ]

    operations = [
        BtreeGinExtension(),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="memoryunit", name="memory_tags_gin"),
                migrations.RemoveIndex(model_name="memoryunit", name="memory_fts_gin"),
                migrations.AddIndex(
                    model_name="memoryunit",
                    index=GinIndex(fields=["bank", "tags"], name="memory_bank_tags_gin"),
                ),
                migrations.AddIndex(
                    model_name="memoryunit",
                    index=GinIndex(fields=["bank", "search_vector"], name="memory_bank_fts_gin"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(_create(NEW) + _drop(OLD), _create(OLD) + _drop(NEW)),
            ],
        ),
    ]
