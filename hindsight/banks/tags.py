"""The tag registry: a bank's tags with their counts, from every app that holds tagged rows."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import connection

from hindsight.banks.models import MemoryUnit
from hindsight.banks.selectors import bank_get
from hindsight.infra.errors import FieldError

TagSource = Callable[..., tuple[list[tuple[str, int]], int]]
_tag_sources: dict[str, TagSource] = {}


def tag_source_register(name: str, source: TagSource) -> None:
    """Another app lists its tags here (``source=mental_models`` is the mental-models app's).

    ``source(bank_id=, pattern=, limit=, offset=)`` returns ``([(tag, count)], total)``;
    ``pattern`` is a SQL ``ILIKE`` pattern (``None`` = all), built by ``tag_pattern``.
    """
    _tag_sources[name] = source


def tag_pattern(q: str | None) -> str | None:
    """``q`` with ``*`` wildcards → an ``ILIKE`` pattern; without ``*``, a substring match."""
    if not q:
        return None
    escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%") if "*" in q else f"%{escaped}%"


def tag_counts(
    *, table: str, bank_id: str, pattern: str | None, limit: int, offset: int
) -> tuple[list[tuple[str, int]], int]:
    """Tags of ``table``'s rows in a bank with their counts, most used first (any tag source).

    ``table`` is a model's ``_meta.db_table`` (never request input); ``pattern`` an ``ILIKE``
    pattern from ``tag_pattern``.
    """
    condition = "AND tag ILIKE %s" if pattern else ""
    params: list[Any] = [bank_id] + ([pattern] if pattern else [])
    source = f"{connection.ops.quote_name(table)} t0, unnest(t0.tags) AS tag"
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH t AS (SELECT tag, count(*) AS n FROM {source} "
            f"WHERE t0.bank_id = %s {condition} GROUP BY tag) "
            "SELECT tag, n, count(*) OVER () FROM t ORDER BY n DESC, tag LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = cursor.fetchall()
        if rows:
            total = rows[0][2]
        else:  # past the last page: the window count is not there to read
            cursor.execute(
                f"SELECT count(DISTINCT tag) FROM {source} WHERE t0.bank_id = %s {condition}",
                params,
            )
            total = cursor.fetchone()[0]
    return [(tag, n) for tag, n, _ in rows], int(total)


_tag_sources["memories"] = partial(tag_counts, table=MemoryUnit._meta.db_table)


def tags_list(
    *, bank_id: str, source: str = "memories", q: str | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[tuple[str, int]], int]:
    """A page of the bank's ``(tag, count)`` pairs from one source, and how many tags it has."""
    bank_get(bank_id=bank_id)
    lister = _tag_sources.get(source)
    if lister is None:
        raise FieldError(
            ("query", "source"),
            f"tag source {source!r} is not available (available: {', '.join(sorted(_tag_sources))})",
        )
    return lister(bank_id=bank_id, pattern=tag_pattern(q), limit=limit, offset=offset)
