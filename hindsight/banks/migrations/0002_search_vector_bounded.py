"""The full-text vector reads a bounded prefix of text and context (``SEARCH_TEXT_CHARS``,
``SEARCH_CONTEXT_CHARS``): a tsvector over PostgreSQL's 1 MB cap made the insert fail.

PostgreSQL cannot alter a generated column's expression, so the column (and its GIN index) is
dropped and added again; existing rows are recomputed by the database.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("banks", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="memoryunit", name="memory_fts_gin"),
        migrations.RemoveField(model_name="memoryunit", name="search_vector"),
        migrations.AddField(
            model_name="memoryunit",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.SearchVector(
                    django.db.models.functions.text.Left("text", 60000),
                    django.db.models.functions.text.Left("context", 20000),
                    config="english",
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="memoryunit",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_vector"], name="memory_fts_gin"
            ),
        ),
    ]
