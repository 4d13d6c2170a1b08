# The EmbeddingProfile row moved here from the banks app; its table stays where it is.

from django.db import migrations, models

import hindsight.infra.db


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("banks", "0002_search_vector_bounded"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EmbeddingProfile",
                    fields=[
                        ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                        ("provider", models.CharField(max_length=32)),
                        ("model", models.CharField(max_length=255)),
                        ("dimensions", models.PositiveIntegerField()),
                        ("recorded_at", models.DateTimeField(db_default=hindsight.infra.db.ClockTimestamp())),
                    ],
                    options={"db_table": "banks_embeddingprofile"},
                ),
            ],
            database_operations=[],
        ),
    ]
