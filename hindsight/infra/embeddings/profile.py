"""The deployment's embedding profile: which provider/model/dimension made the stored vectors.

Vectors from different profiles cannot be compared, so the profile is recorded once (the single
``EmbeddingProfile`` row) and every start compares the configured one with it. A difference is
refused — by the system check in ``hindsight.infra.embeddings.checks`` and by ``profile_ensure()`` —
until ``manage.py reembed`` has rebuilt the vectors and recorded the new profile.

The ``embedding`` columns are ``vector(N)`` with N taken from the configuration when the
migrations ran, so the column's declared dimension is part of the comparison too.
"""

from __future__ import annotations

from django.db import connection, transaction

from hindsight.infra.embeddings.base import Profile
from hindsight.infra.embeddings.factory import configured_profile
from hindsight.infra.embeddings.models import EmbeddingProfile

PROFILE_ROW_ID = 1
MEMORY_TABLE_COLUMN = ("banks_memoryunit", "embedding")

VARIABLES = {
    "local": "HINDSIGHT_API_EMBEDDINGS_PROVIDER and HINDSIGHT_API_EMBEDDINGS_LOCAL_MODEL",
    "openai": (
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER, HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL and "
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS"
    ),
}


class ProfileMismatch(Exception):
    """The configured embedding profile is not the one the stored vectors were made with."""

    def __init__(self, message: str, *, recorded: Profile | None, configured: Profile):
        super().__init__(message)
        self.recorded = recorded
        self.configured = configured


def profile_recorded() -> Profile | None:
    """The recorded profile, or None before the first start (or before migrations)."""
    row = EmbeddingProfile.objects.filter(id=PROFILE_ROW_ID).first()
    if row is None:
        return None
    return Profile(row.provider, row.model, row.dimensions)


def column_dimensions(table: str, column: str) -> int | None:
    """The N of a ``vector(N)`` column as the database declares it (None if absent/undeclared)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.atttypmod FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attname = %s AND NOT a.attisdropped",
            [table, column],
        )
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])


def profile_problem(configured: Profile | None = None) -> str | None:
    """Why the configured profile cannot be used with this database, or None when it can."""
    configured = configured or configured_profile()
    recorded = profile_recorded()
    if recorded is not None and recorded != configured:
        return mismatch_message(recorded=recorded, configured=configured)
    declared = column_dimensions(*MEMORY_TABLE_COLUMN)
    if declared is not None and declared != configured.dimensions:
        return (
            f"the embedding column banks_memoryunit.embedding is vector({declared}) but the "
            f"configured embedding profile {configured.describe()} produces "
            f"{configured.dimensions} dimensions (set by "
            f"{VARIABLES.get(configured.provider, 'the embeddings variables')}). "
            "Run `manage.py reembed` to convert the column and rebuild the vectors, or restore "
            "the previous configuration."
        )
    return None


def mismatch_message(*, recorded: Profile, configured: Profile) -> str:
    return (
        f"the stored memory vectors were made with {recorded.describe()} but the configuration "
        f"now says {configured.describe()} "
        f"({VARIABLES.get(configured.provider, 'the embeddings variables')}). Vectors of "
        "different profiles cannot be compared: run `manage.py reembed` to rebuild them with the "
        "new profile, or restore the previous configuration."
    )


def profile_ensure() -> Profile:
    """Record the configured profile on first use; raise ``ProfileMismatch`` if it changed."""
    configured = configured_profile()
    problem = profile_problem(configured)
    if problem is not None:
        raise ProfileMismatch(problem, recorded=profile_recorded(), configured=configured)
    with transaction.atomic():
        row, created = EmbeddingProfile.objects.get_or_create(
            id=PROFILE_ROW_ID,
            defaults={
                "provider": configured.provider,
                "model": configured.model,
                "dimensions": configured.dimensions,
            },
        )
    recorded = Profile(row.provider, row.model, row.dimensions)
    if not created and recorded != configured:  # another process recorded a different one
        raise ProfileMismatch(
            mismatch_message(recorded=recorded, configured=configured),
            recorded=recorded,
            configured=configured,
        )
    return configured


def profile_record(*, profile: Profile) -> None:
    """Record ``profile`` as the one the stored vectors were made with (used by ``reembed``)."""
    EmbeddingProfile.objects.update_or_create(
        id=PROFILE_ROW_ID,
        defaults={
            "provider": profile.provider,
            "model": profile.model,
            "dimensions": profile.dimensions,
        },
    )
