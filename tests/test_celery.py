"""``hindsight.project.celery``: a pool process keeps its database connection from one task to the next,
drops it when broken, and replaces one the server closed while it sat idle."""

from __future__ import annotations

import pytest
from django.db import connection

from hindsight.project.celery import worker_db_connections_keep, worker_db_connections_tidy
from operations.models import COMPLETED
from tests.operations.helpers import job_log, statuses, submit_job
from tests.workers import wait_until


def _other_backends() -> set[int]:
    """The test database's client backends but this test's own: the worker's, here."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return {row[0] for row in cursor.fetchall()}


def _done(op_id):
    return lambda: statuses([op_id]).get(str(op_id)) == COMPLETED


@pytest.mark.integration
def test_a_pool_process_reuses_its_connection_and_replaces_one_the_server_closed(
    worker_factory,
) -> None:
    worker_factory()
    first = submit_job(key="conn-1")
    wait_until(_done(first.id), timeout=20, message="first job")
    pool_pids = {row["pid"] for row in job_log([first.id])}
    backends = _other_backends()
    assert backends, "the pool process closed its connection after the task"

    second = submit_job(key="conn-2")
    wait_until(_done(second.id), timeout=20, message="second job")
    assert {row["pid"] for row in job_log([second.id])} == pool_pids
    assert _other_backends() == backends  # the same connection, not a new one

    # The server ends the idle connection (a restart, an idle timeout): the next task's health
    # check finds it dead and connects again, instead of failing the job on a closed socket.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                       [sorted(backends)])
    wait_until(lambda: not (_other_backends() & backends), timeout=10,
               message="the backend to end")
    third = submit_job(key="conn-3")
    wait_until(_done(third.id), timeout=20, message="the job after the connection was ended")
    assert [row["outcome"] for row in job_log([third.id])] == ["completed"]


def test_tidy_keeps_a_healthy_connection_and_drops_a_broken_one(transactional_db) -> None:
    settings_dict = connection.settings_dict
    saved = {key: settings_dict[key] for key in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    connection.close()
    try:
        worker_db_connections_keep(max_age=60)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        worker_db_connections_tidy()
        assert connection.connection is not None  # kept across the task boundary
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone() == (pid,)

        connection.errors_occurred = True
        connection.connection.close()  # broken under Django's feet
        worker_db_connections_tidy()
        assert connection.connection is None  # dropped; the next query connects afresh
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    finally:
        connection.close()
        settings_dict.update(saved)
