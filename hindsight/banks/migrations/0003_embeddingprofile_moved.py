# EmbeddingProfile now belongs to the embeddings app (state only: the table is kept).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("banks", "0002_search_vector_bounded"),
        ("embeddings", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EmbeddingProfile")],
            database_operations=[],
        ),
    ]
