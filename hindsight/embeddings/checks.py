"""System check: refuse to start on an embedding profile the stored vectors were not made with.

Tagged ``database`` so it runs where Django passes databases (``migrate``, ``check --database
default``, and the service's start-up), never on a plain import-time ``check``.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Tags, register
from django.db import connections
from django.db.utils import DatabaseError

EMBEDDING_PROFILE_CHECK_ID = "hindsight.E100"


@register(Tags.database)
def embedding_profile_check(
    app_configs: Any = None, databases: list[str] | None = None, **kwargs: Any
) -> list[Error]:
    if not databases or "default" not in databases:
        return []
    from hindsight.embeddings.profile import profile_problem

    try:
        if "banks_embeddingprofile" not in connections["default"].introspection.table_names():
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
