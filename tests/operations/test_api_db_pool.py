"""The API under gunicorn (``hindsight.project.gunicorn_conf``, as ``make run`` and the image start it):
its request threads share a small pool of database connections instead of connecting — a
PostgreSQL backend started and torn down — for every request."""

from __future__ import annotations

import urllib.request

import pytest
from django.db import connection

from hindsight.devstack.servers import free_port
from hindsight.devstack.stack import api_command, spawn
from tests.workers import wait_until

pytestmark = pytest.mark.integration


def _sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def _api_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = 'hindsight-api'")
        return int(cursor.fetchone()[0])


def test_the_api_processes_requests_on_a_few_pooled_connections(worker_factory, tmp_path):
    port = free_port()
    env = worker_factory.env({"HINDSIGHT_API_WEB_DB_POOL_SIZE": "2"})
    server = spawn("api", api_command(bind=f"127.0.0.1:{port}", workers=1, threads=4,
                                      access_log=None, control_socket=tmp_path / "gunicorn.ctl"),
                   env=env, log_path=tmp_path / "gunicorn.log")
    base = f"http://127.0.0.1:{port}/v1/default/banks/pool-bank"

    def call(method: str) -> int:
        request = urllib.request.Request(base, method=method, data=b'{"name": "pool"}'
                                         if method == "PUT" else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    try:
        def up() -> bool:
            try:
                return call("PUT") == 200
            except OSError:
                return False

        wait_until(up, 60, message="gunicorn serving")
        before = _sessions()
        for _ in range(12):
            assert call("GET") == 200  # each reads the bank
        opened = _sessions() - before
        # Connected per request, twelve backends would have started; pooled, none (or one the
        # pool replaced).
        assert opened <= 1, f"{opened} connections opened for 12 requests"
        assert 1 <= _api_connections() <= 2
    finally:
        server.stop(20)
