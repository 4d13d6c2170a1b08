"""A partial index on a bank's documented memories, ``(bank_id, document_id)``: a document's
read, its deletion, its re-tag and a retain that replaces it find its memories without reading
the whole bank. Built ``CONCURRENTLY`` (outside a transaction, so the migration is not atomic):
retains keep writing during the build. A build that fails half-way leaves an INVALID index
behind: drop it (``DROP INDEX CONCURRENTLY memory_bank_document_idx``) before running the
migration again."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("banks", "0008_documents"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memoryunit",
            index=models.Index(condition=models.Q(("document_id__isnull", False)),
                               fields=["bank", "document_id"], name="memory_bank_document_idx"),
        ),
    ]
