"""Start the test session's own PostgreSQL (pgvector) and Valkey before Django is set up.

Registered with ``-p hindsight.devstack.pytest_plugin``. When ``HINDSIGHT_API_DATABASE_URL``
(or ``HINDSIGHT_API_REDIS_URL``) is already set the given server is used instead. The servers
run on free ports with throw-away data, so parallel sessions never share state.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path

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
    return (yield)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _started:
        _started.pop().stop()
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)
