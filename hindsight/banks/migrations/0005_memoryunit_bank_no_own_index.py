"""``MemoryUnit.bank`` loses the foreign key's own indexes (``db_index=False``).

Every read by bank uses an index that starts with ``bank_id`` (``memory_bank_updated_idx``,
``memory_bank_type_upd_idx``). With the foreign key's plain index beside them, the planner took
"the newest matches of a bank" (recall's keyword arm) by fetching the whole bank through it and
sorting — 11–18 ms on a bank of 10,000 — instead of walking ``memory_bank_updated_idx``
backwards until it had enough (~4 ms); and each insert kept two more B-trees up to date.

Only the indexes are dropped (the constraint stays: Django's AlterField would drop and re-add
it, re-checking every row). A large production table would rather run
``DROP INDEX CONCURRENTLY`` by hand first (the ``IF EXISTS`` here then does nothing).
"""

import django.db.models.deletion
from django.db import migrations, models

FK_INDEXES = ("banks_memoryunit_bank_id_4688fbfc", "banks_memoryunit_bank_id_4688fbfc_like")


class Migration(migrations.Migration):

    dependencies = [
        ("banks", "0004_memoryunit_text_tokens"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="memoryunit",
                    name="bank",
                    field=models.ForeignKey(
                        db_index=False, on_delete=django.db.models.deletion.CASCADE,
                        related_name="memories", to="banks.bank",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    [f'DROP INDEX IF EXISTS "{name}"' for name in FK_INDEXES],
                    [
                        f'CREATE INDEX "{FK_INDEXES[0]}" ON "banks_memoryunit" ("bank_id")',
                        f'CREATE INDEX "{FK_INDEXES[1]}" ON "banks_memoryunit" '
                        '("bank_id" varchar_pattern_ops)',
                    ],
                ),
            ],
        ),
    ]
