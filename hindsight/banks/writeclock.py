"""The write clock (docs/behaviour.md#the-snapshot-cutoff): memory writes and refresh cutoffs,
ordered by a per-bank advisory lock.

``now()`` in PostgreSQL is the transaction's start, so a memory stamped before a refresh's cutoff
could commit after it and never be read. Every memory-writing transaction therefore holds the
bank's advisory lock in *shared* mode and stamps ``updated_at = clock_timestamp()``; a refresh
takes its cutoff holding the same lock *exclusively*, which waits for writers in flight and
holds new ones back for the instant it reads ``clock_timestamp()``. Writers never block each
other. A stamp taken after the cutoff is therefore later than it, and every stamp at or before
the cutoff belongs to a transaction that had already committed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

# First key of the two-int advisory lock: namespaces our locks away from anyone else's.
_LOCK_CLASS = 0x48534D  # "HSM"
# For a caller that takes the shared lock in a round trip of its own (retain: with the bank's
# creation and the stamp).
WRITE_LOCK_CLASS = _LOCK_CLASS


def hold_bank_write_lock(bank_id: str) -> datetime:
    """Take the bank's shared write lock for the rest of the current transaction.

    Returns the write stamp: ``clock_timestamp()`` read once the lock is granted, so every row
    of one write carries the same ``created_at``/``updated_at``.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("hold_bank_write_lock must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s))", [_LOCK_CLASS, bank_id]
        )
        cursor.execute("SELECT clock_timestamp()")
        (stamp,) = cursor.fetchone()
    return stamp


# The exclusive lock, then the clock read under it, in one statement: the materialized CTE is
# evaluated (the lock granted) before the outer row, and with it ``clock_timestamp()``, exists.
_CUTOFF_SQL = (
    "WITH held AS MATERIALIZED (SELECT pg_advisory_xact_lock(%s, hashtext(%s))) "
    "SELECT clock_timestamp() FROM held"
)


def take_cutoff(bank_id: str) -> datetime:
    """A cutoff no later write of ``bank_id`` can commit at or below.

    One statement: outside a transaction it is its own (autocommit), so the exclusive lock is
    held from before the clock is read until the statement ends — the same guarantee as a
    ``BEGIN`` / lock / clock / ``COMMIT`` of four round trips. Inside the caller's transaction
    the lock is held until that transaction ends, as before.
    """
    with connection.cursor() as cursor:
        cursor.execute(_CUTOFF_SQL, [_LOCK_CLASS, bank_id])
        (cutoff,) = cursor.fetchone()
    return cutoff


def quiet_cutoff_sql(bank_id: str) -> tuple[str, str, list[Any]]:
    """``take_cutoff`` without waiting, as parts of the caller's statement: a CTE ``quiet`` that
    tries the bank's exclusive lock (never waits for it), the column that reads the cutoff (the
    clock, read while the lock is held; null when a write of the bank was in flight) and the
    CTE's parameters: ``WITH {cte} SELECT …, {column} FROM quiet, …``. A statement started
    after that one sees every memory stamped at or before the cutoff (the writers that stamped
    them had committed). Outside a transaction the lock is held for that statement only
    (inside the caller's, until that transaction ends, as ``take_cutoff``'s): for a reader that
    must not wait for writers, and need not hold them back (the knowledge-base tree's cache,
    which keeps a tree only when it can name all it read)."""
    return ("quiet AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS ok)",
            "CASE WHEN quiet.ok THEN clock_timestamp() END", [_LOCK_CLASS, bank_id])
