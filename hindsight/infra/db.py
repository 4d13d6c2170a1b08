"""Shared database functions: the one clock every write and every cutoff is stamped with, the
one writer of pgvector's text literal, rows read with psycopg's own timestamp loader, and
handing a pooled connection back between uses."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection, connections, models
from django.db.models import Func, QuerySet
from psycopg.types.datetime import TimestamptzLoader


def values_rows(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """A ``values_list`` queryset's rows, its timestamps read by psycopg's own timestamptz
    loader (C, with psycopg-binary) instead of Django's subclass of the Python one, which
    parses every value in Python to set the tzinfo the session's ``TimeZone`` (UTC, as Django
    sets it) gives already: ~4 µs a timestamp, 5 ms of a 1,000-page knowledge tree's read.
    For a queryset whose columns need no Django converter (plain columns, text casts)."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        cursor.execute(sql, params)
        return cursor.fetchall()


def execute_without_flush_wait(sql: str, params: Sequence[Any]) -> None:
    """Run ``sql`` as its own implicit transaction whose commit does not wait for its WAL to
    reach the disk (``SET LOCAL synchronous_commit = off`` after it, in the same round trip;
    the setting is read at commit). For a write a PostgreSQL crash may lose (within the WAL
    writer's delay, 200 ms) but never corrupt; every later durable commit flushes it first.
    Outside a transaction only: inside one, it would make the caller's commit asynchronous."""
    if connection.in_atomic_block:
        raise RuntimeError("execute_without_flush_wait inside a transaction")
    with connection.cursor() as cursor:
        cursor.execute(sql + "; SET LOCAL synchronous_commit = off", params)


class ClockTimestamp(Func):
    """``clock_timestamp()``: the wall clock now, not the transaction's start like ``now()``."""

    function = "clock_timestamp"
    template = "clock_timestamp()"
    output_field = models.DateTimeField()


def vector_literal(values: Sequence[float]) -> str:
    """``values`` as the ``vector`` literal PostgreSQL parses (``'[x,y,…]'``), the float32 each
    component is stored as, written in one formatting call: nine significant digits give back
    the same float32 (``FLT_DECIMAL_DIG``), in fewer bytes and far less Python than pgvector's
    ``str(float)`` per component."""
    components = np.asarray(values, dtype=np.float32).tolist()
    return _vector_format(len(components)) % tuple(components)


@functools.cache
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


def connections_pool_use(*, max_size: int, application_name: str) -> None:
    """From now on the process's database connections come from a bounded psycopg pool of
    ``max_size`` (Django's ``OPTIONS["pool"]``; call before the first query): a thread takes
    one for a query or a request and hands it back after — a threads-pool worker's slots, the
    API's request threads — instead of opening its own (a backend started and torn down per API
    request, or one held per thread). ``application_name`` names them in
    ``pg_stat_activity``."""
    for alias in connections:
        settings_dict = connections[alias].settings_dict
        settings_dict["CONN_MAX_AGE"] = 0  # a pool hands connections out; none persists per thread
        options = settings_dict.setdefault("OPTIONS", {})
        options["pool"] = {"min_size": 1, "max_size": max_size, "timeout": 60}
        options.setdefault("application_name", application_name)


def connection_is_pooled() -> bool:
    """The calling thread's connection comes from a pool (``OPTIONS["pool"]``: a threads-pool
    worker, ``hindsight.project.celery``; the API under gunicorn, ``hindsight.project.gunicorn_conf``)."""
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def connection_release_to_pool() -> None:
    """Hand the calling thread's connection back to its pool before a long wait (an LLM call,
    a heartbeat's sleep), so a slot that waits holds none; the next query takes one again.
    Never inside a transaction, and a no-op without a pool (closing would mean reconnecting).
    """
    if connection.connection is not None and connection_is_pooled() and not (
        connection.in_atomic_block
    ):
        connection.close()
