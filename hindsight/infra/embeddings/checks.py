"""Start-up guard for the embedding profile: refuse a profile the stored vectors were not made
with, and record the profile of a fresh deployment.

``migrate`` is the first step of every start (``make run``, docker-compose's ``migrate``
service) and runs the database-tagged checks before migrating, so a changed
``HINDSIGHT_API_EMBEDDINGS_*`` stops start-up there with ``hindsight.E100`` until
``manage.py reembed`` has run. After migrating, the configured profile is recorded if none is.
The check never writes; plain ``manage.py check`` (no database) skips it.
"""

from __future__ import annotations

import logging
from typing import Any

from django.apps import AppConfig
from django.core.checks import Error, Tags, register
from django.db import connections
from django.db.models.signals import post_migrate
from django.db.utils import DatabaseError

from hindsight.infra.embeddings.models import EmbeddingProfile
from hindsight.infra.embeddings.profile import (
    ProfileMismatch,
    profile_ensure,
    profile_problem,
    profile_recorded,
)

logger = logging.getLogger("hindsight.infra.embeddings")

EMBEDDING_PROFILE_CHECK_ID = "hindsight.E100"


def _profile_table_exists(alias: str = "default") -> bool:
    return EmbeddingProfile._meta.db_table in connections[alias].introspection.table_names()


@register(Tags.database)  # type: ignore[type-var]  # database checks take `databases`
def embedding_profile_check(
    app_configs: Any = None, databases: list[str] | None = None, **kwargs: Any
) -> list[Error]:
    if not databases or "default" not in databases:
        return []
    try:
        if not _profile_table_exists():
            return []  # before the first migration there is nothing to compare with
        problem = profile_problem()
    except DatabaseError as exc:
        return [
            Error(
                f"could not read the embedding profile: {exc}",
                id="hindsight.E101",
                obj="HINDSIGHT_API_DATABASE_URL",
            )
        ]
    if problem is None:
        return []
    return [
        Error(
            f"Embedding profile mismatch: {problem}",
            hint="Run `python manage.py reembed` (re-embeds every memory and records the profile).",
            id=EMBEDDING_PROFILE_CHECK_ID,
            obj="HINDSIGHT_API_EMBEDDINGS_PROVIDER",
        )
    ]


def record_profile_after_migrate(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """Record the configured profile on a database that has none yet (a fresh deployment)."""
    if sender.label != "embeddings" or using != "default" or not _profile_table_exists(using):
        return
    if profile_recorded() is not None:
        return
    try:
        profile_ensure()
    except ProfileMismatch as exc:
        # Only reachable with checks skipped; the next start's check reports it.
        logger.warning("embedding profile not recorded: %s", exc)


post_migrate.connect(record_profile_after_migrate, dispatch_uid="hindsight.infra.embeddings.profile")
