"""The session's ``synchronous_commit``, for tests of statements that commit asynchronously."""

from __future__ import annotations

from django.db import connection


def synchronous_commit(value: str | None = None) -> str:
    """The session's ``synchronous_commit`` (set first to ``value``, within the transaction
    when there is one: the test server itself runs without durable commits)."""
    with connection.cursor() as cursor:
        if value is not None:
            scope = "LOCAL " if connection.in_atomic_block else ""
            cursor.execute(f"SET {scope}synchronous_commit = {value}")
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])
