"""``eval "$(python -m hindsight.devstack env)"`` (the README's line) leaves a shell in which every
``manage.py`` command runs: the URLs and the stack's secret key are exported.

The "running stack" here is a ``servers.json`` and a ``secret_key`` in a scratch data folder
pointing at this test session's own servers (starting a real ``make run`` is what
tests/test_devstack_run.py pays for once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from hindsight.devstack import state

ROOT = Path(__file__).resolve().parent.parent
README_EVAL = 'eval "$({python} -m hindsight.devstack env)"'


def _test_database_url() -> str:
    """The session's PostgreSQL URL, naming the test database pytest-django made."""
    parts = urlsplit(os.environ[state.DATABASE_VARIABLE])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def _bare_shell(data_dir: Path) -> dict[str, str]:
    """A shell that exports nothing of the stack (no URLs, no key), only where its data is."""
    env = {k: v for k, v in os.environ.items()
           if k not in (state.DATABASE_VARIABLE, state.REDIS_VARIABLE, state.SECRET_VARIABLE)}
    env[state.DATA_DIR_VARIABLE] = str(data_dir)
    return env


def _stack(data_dir: Path, secret: str) -> None:
    data_dir.mkdir()
    (data_dir / state.SERVERS_FILE).write_text(json.dumps({
        "database_url": _test_database_url(),
        "redis_url": os.environ[state.REDIS_VARIABLE],
        "pid": os.getpid(),
    }))
    (data_dir / state.SECRET_KEY_FILE).write_text(secret + "\n")


def test_env_prints_the_urls_the_secret_key_and_the_devstack_marker(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    data_dir.mkdir()
    (data_dir / state.SERVERS_FILE).write_text(json.dumps(
        {"database_url": "postgresql://postgres@127.0.0.1:5/x", "redis_url": "redis://h:6/0"}))
    (data_dir / state.SECRET_KEY_FILE).write_text("k'ey with space\n")
    printed = subprocess.run(
        [sys.executable, "-m", "hindsight.devstack", "env"], cwd=ROOT,
        env=_bare_shell(data_dir), capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    assert printed == [
        "export HINDSIGHT_API_DATABASE_URL=postgresql://postgres@127.0.0.1:5/x",
        "export HINDSIGHT_API_REDIS_URL=redis://h:6/0",
        "export HINDSIGHT_API_SECRET_KEY='k'\"'\"'ey with space'",
        "export HINDSIGHT_DEVSTACK=1",
    ]
    # A key the shell exports already is kept: the eval line does not replace it.
    own = subprocess.run(
        [sys.executable, "-m", "hindsight.devstack", "env"], cwd=ROOT,
        env={**_bare_shell(data_dir), state.SECRET_VARIABLE: "mine"},
        capture_output=True, text=True, check=True,
    ).stdout
    assert state.SECRET_VARIABLE not in own


def _env_lines(data_dir: Path, env: dict[str, str]) -> list[str]:
    return subprocess.run(
        [sys.executable, "-m", "hindsight.devstack", "env"], cwd=ROOT, env=env,
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()


def test_env_exports_the_queues_and_metrics_folder_every_process_of_the_run_shares(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    data_dir.mkdir()
    (data_dir / state.SERVERS_FILE).write_text(json.dumps({
        "database_url": "postgresql://postgres@127.0.0.1:5/x", "redis_url": "redis://h:6/0",
        "pid": None, "env": {state.QUEUE_VARIABLE: "hindsight",
                             state.CPU_QUEUE_VARIABLE: "hindsight.cpu",
                             state.METRICS_VARIABLE: "/data/metrics"}}))
    (data_dir / state.SECRET_KEY_FILE).write_text("key\n")
    # A shell with stale values of its own: the run's replace them (the key excepted).
    stale = {state.QUEUE_VARIABLE: "old", state.CPU_QUEUE_VARIABLE: "old.cpu",
             state.METRICS_VARIABLE: "/elsewhere", state.SECRET_VARIABLE: "mine"}
    assert _env_lines(data_dir, {**_bare_shell(data_dir), **stale}) == [
        "export HINDSIGHT_API_DATABASE_URL=postgresql://postgres@127.0.0.1:5/x",
        "export HINDSIGHT_API_REDIS_URL=redis://h:6/0",
        "export HINDSIGHT_API_TASK_QUEUE=hindsight",
        "export HINDSIGHT_API_WORKER_CPU_QUEUE=hindsight.cpu",
        "export PROMETHEUS_MULTIPROC_DIR=/data/metrics",
        "export HINDSIGHT_DEVSTACK=1",
    ]
    # A run without the CPU queue's worker (--cpu-worker-concurrency 0) sends every job to the
    # task queue: a CPU queue the shell still exports would strand retains, so it is unset.
    record = json.loads((data_dir / state.SERVERS_FILE).read_text())
    record["env"][state.CPU_QUEUE_VARIABLE] = ""
    (data_dir / state.SERVERS_FILE).write_text(json.dumps(record))
    lines = _env_lines(data_dir, {**_bare_shell(data_dir), **stale})
    assert "unset HINDSIGHT_API_WORKER_CPU_QUEUE" in lines
    script = (f'eval "$({sys.executable} -m hindsight.devstack env)" && '
              'echo "queue=${HINDSIGHT_API_WORKER_CPU_QUEUE-none}"')
    evaluated = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                               env={**_bare_shell(data_dir), **stale}, check=True).stdout
    assert evaluated.strip() == "queue=none"


@pytest.mark.django_db(transaction=True)
def test_createsuperuser_noinput_works_after_the_readme_eval_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    _stack(data_dir, "devstack-key-for-this-test-" + "x" * 40)
    script = (README_EVAL.format(python=sys.executable)
              + f" && {sys.executable} manage.py createsuperuser --noinput"
              " --username eval-admin --email eval-admin@example.com")
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT,
        env={**_bare_shell(data_dir), "DJANGO_SUPERUSER_PASSWORD": "pw-for-test-only"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    user = get_user_model().objects.get(username="eval-admin")
    assert user.is_superuser and user.check_password("pw-for-test-only")
