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
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from hindsight.devstack.servers import (
    SHARED_ROOT,
    EmbeddedPostgres,
    EmbeddedValkey,
    free_port,
    running_as_root,
)

_started: list[EmbeddedPostgres | EmbeddedValkey] = []
_scratch: list[Path] = []


def _scratch_dir() -> Path:
    if running_as_root():
        SHARED_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(SHARED_ROOT, 0o755)
        path = Path(tempfile.mkdtemp(prefix="test-", dir=SHARED_ROOT))
        os.chmod(path, 0o755)
    else:
        path = Path(tempfile.mkdtemp(prefix="hindsight-test-"))
    _scratch.append(path)
    return path


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    # A wrapper runs before pytest-django's own hook, which sets Django up from the environment.
    # Metrics in multiprocess mode, as in production: the live server (this process) and the
    # worker subprocesses (which inherit the environment) write into one directory.
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_scratch_dir() / "metrics")
    if not os.environ.get("HINDSIGHT_API_DATABASE_URL"):
        pg = EmbeddedPostgres(_scratch_dir() / "pg", free_port(), durable=False)
        pg.start()
        _started.append(pg)
        os.environ["HINDSIGHT_API_DATABASE_URL"] = pg.url
    if not os.environ.get("HINDSIGHT_API_REDIS_URL"):
        valkey = EmbeddedValkey(_scratch_dir() / "valkey", free_port(), durable=False)
        valkey.start()
        _started.append(valkey)
        os.environ["HINDSIGHT_API_REDIS_URL"] = valkey.url
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
    while _started:
        _started.pop().stop()
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)
