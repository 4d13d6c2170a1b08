"""The deployment's embedding profile row (kept in its original table, ``banks_embeddingprofile``)."""

from __future__ import annotations

from django.db import models

from hindsight.infra.db import ClockTimestamp


class EmbeddingProfile(models.Model):
    """The deployment's embedding profile (one row): vectors are only comparable within it."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=255)
    dimensions = models.PositiveIntegerField()
    recorded_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        db_table = "banks_embeddingprofile"

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimensions} dims)"
