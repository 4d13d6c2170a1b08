"""Start the test session's own PostgreSQL (pgvector) and Valkey before Django is set up.

Registered with ``-p hindsight.devstack.pytest_plugin``. When ``HINDSIGHT_API_DATABASE_URL``
(or ``HINDSIGHT_API_REDIS_URL``) is already set the given server is used instead. The servers
run on free ports with throw-away data, so parallel sessions never share state.

Under pytest-xdist the controller starts the servers and its workers inherit them; each xdist
worker then gets a state of its own: its test database (pytest-django names it ``…_gwN``), a
Redis database number (so queues and lock keys never meet) and a metrics folder.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Generator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from hindsight.devstack.stack import Stack

_stacks: list[Stack] = []


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    # A wrapper runs before pytest-django's own hook, which sets Django up from the environment.
    # Metrics in multiprocess mode, as in production: the live server (this process) and the
    # worker subprocesses (which inherit the environment) write into one directory.
    # The servers of the stack `make run` starts, throw-away (no fsync, no snapshots).
    stack = Stack(Path(tempfile.mkdtemp(prefix="hindsight-test-")),
                  database_url=os.environ.get("HINDSIGHT_API_DATABASE_URL") or None,
                  redis_url=os.environ.get("HINDSIGHT_API_REDIS_URL") or None)
    _stacks.append(stack)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(stack.data_dir / "metrics")
    stack.start_servers()
    os.environ["HINDSIGHT_API_DATABASE_URL"] = stack.database_url
    os.environ["HINDSIGHT_API_REDIS_URL"] = stack.redis_url
    # A throw-away key shared by the session and the worker processes it starts, as `make run`
    # shares its own (the hindsight.E200 check requires one).
    os.environ.setdefault("HINDSIGHT_API_SECRET_KEY", "test-" + secrets.token_urlsafe(32))
    xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", … in an xdist worker
    if xdist_worker:
        _own_state_per_xdist_worker(int(xdist_worker.removeprefix("gw")))
    return (yield)


# Valkey's default number of databases; 0 is the controller's (a run without xdist).
_REDIS_DATABASES = 16


def _own_state_per_xdist_worker(index: int) -> None:
    if index + 1 >= _REDIS_DATABASES:
        raise pytest.UsageError(f"at most {_REDIS_DATABASES - 1} xdist workers (one Redis database each)")
    redis_url = urlsplit(os.environ["HINDSIGHT_API_REDIS_URL"])
    os.environ["HINDSIGHT_API_REDIS_URL"] = urlunsplit(redis_url._replace(path=f"/{index + 1}"))
    metrics = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / f"gw{index}"
    metrics.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _stacks:
        stack = _stacks.pop()
        stack.stop()
        stack.remove_data()
