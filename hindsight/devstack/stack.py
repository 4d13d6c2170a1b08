"""The whole service on one machine, started one way for ``make run``, ``bench/`` and the tests.

``Stack`` owns the embedded PostgreSQL (pgvector) and Valkey (unless URLs are given), the
migrations, the API under gunicorn with ``hindsight.project.gunicorn_conf``, any number of Celery
workers (pool, slots, queue and environment each) and celery-beat (with
``hindsight.project.settings_beat``, as ``make run`` and the compose file run it). Every process runs in
a session of its own (a signal to the caller's terminal does not reach it) and is a ``Process``:
a handle to kill, stop or restart it, read its log and find its pool children, which the chaos
run needs. ``stop()`` (or leaving ``with Stack(...)``) stops the processes, then the servers.

The pieces are functions too (``spawn``, ``worker_command``, ``beat_command``,
``api_command``, ``stop_together``): the tests' shared Celery worker pool (``tests/workers.py``)
starts its workers with them against the session's servers.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from hindsight.devstack.servers import EmbeddedPostgres, EmbeddedValkey, free_port, reachable_base
from hindsight.devstack.state import (
    DATABASE_VARIABLE,
    PROJECT_DIR,
    REDIS_VARIABLE,
    SECRET_VARIABLE,
)

# A Unix socket path longer than this does not fit sockaddr_un (108 bytes with the NUL).
MAX_SOCKET_PATH = 100
# What a worker of a deployment does to know its peers; a worker on a queue of its own (a test's,
# a benchmark's) skips it: seconds of start-up, and no event traffic between unrelated workers.
ALONE = ("--without-gossip", "--without-mingle", "--without-heartbeat")
READY = " ready."  # the line a Celery worker logs (at INFO) once it consumes
POOL_VARIABLE = "HINDSIGHT_API_WORKER_POOL"


class StartupFailed(RuntimeError):
    """A step of the start-up refused to go on; the message is what to tell the user, without
    the traceback of the subprocess that said it."""


# A failed Django system check, as manage.py prints it: ``OBJ: (app.E001) message``.
_CHECK_LINE = re.compile(r"^\S.*\([\w.]+\.E\d+\) .*$", re.MULTILINE)


def failure_lines(stderr: str) -> list[str]:
    """What a failed ``manage.py`` command said, in as few lines as it takes: each failed system
    check's own line, else the last line (the exception's, after a traceback)."""
    checks = _CHECK_LINE.findall(stderr)
    if checks:
        return checks
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1:] or ["exited without a message"]


@dataclass
class Process:
    """One process of the stack, the leader of its own process group (its pool children, its
    gunicorn workers)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path | None = None
    _log_file: IO[bytes] | None = field(default=None, repr=False)
    # A worker whose log gets its INFO lines says "ready." there; another answers a ping.
    logs_ready: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60.0, marker: str = READY) -> None:
        """Until the log says ``marker`` (a worker's "ready." by default)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited during start-up:\n{self.log()[-3000:]}")
            if marker in self.log():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready within {timeout}s:\n{self.log()[-3000:]}")

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def terminate(self, *, group: bool = False) -> None:
        """SIGTERM: a warm shutdown when sent to the main process alone (to the whole group
        it also reaches a worker's pool children mid-job)."""
        if group:
            self.signal_group(signal.SIGTERM)
        else:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the whole group (main process and children): a crash."""
        self.signal_group(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0, *, signalled: bool = False, group: bool = False) -> None:
        """SIGTERM (unless ``signalled`` already), SIGKILL if it has not exited in ``timeout``;
        then SIGKILL whatever is left of its group (orphaned pool children)."""
        if self.alive():
            if not signalled:
                self.terminate(group=group)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                self.process.wait(timeout=10)
        self.signal_group(signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def children(self) -> list[int]:
        """The pids whose parent is this process (a prefork worker's pool processes)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                found.append(int(entry))
        return found


def spawn(name: str, command: Sequence[str], *, env: Mapping[str, str],
          log_path: Path | None = None, cwd: Path = PROJECT_DIR) -> Process:
    """Start ``command`` in a session of its own; its output appended to ``log_path``, or to
    the caller's when None."""
    log_file = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115 - kept
    process = subprocess.Popen(
        list(command), cwd=cwd, env=dict(env), stdout=log_file,
        stderr=subprocess.STDOUT if log_file is not None else None, start_new_session=True)
    return Process(name, process, log_path, log_file)


def stop_together(processes: Sequence[Process], timeout: float = 15.0, *,
                  group: bool = False) -> None:
    """SIGTERM to all at once, then wait for each within one shared ``timeout``; SIGKILL for
    the slow ones."""
    for process in processes:
        if process.alive():
            process.terminate(group=group)
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.stop(max(0.1, deadline - time.monotonic()), signalled=True)
        except Exception:
            process.signal_group(signal.SIGKILL)


def worker_command(*, queue: str | None = None, concurrency: int | None = None,
                   pool: str | None = None, name: str | None = None,
                   log_level: str = "INFO", alone: bool = True,
                   beat_thread: bool = False) -> list[str]:
    """``celery -A hindsight worker``; without ``concurrency`` / ``pool`` the settings decide
    (``HINDSIGHT_API_WORKER_CONCURRENCY`` / ``_POOL``). ``beat_thread``: celery-beat runs as a
    thread of this worker (``hindsight.project.beat_thread``)."""
    command = [sys.executable, "-m", "celery", "-A", "hindsight", "worker",
               "--loglevel", log_level]
    if queue:
        command += ["-Q", queue]
    if concurrency:
        command += ["--concurrency", str(concurrency)]
    if pool:
        command += ["-P", pool]
    if name:
        command += ["-n", f"{name}@%h"]
    if beat_thread:
        command.append("--beat-thread")
    return command + (list(ALONE) if alone else [])


def beat_command(*, log_level: str = "INFO", max_interval: float | None = None) -> list[str]:
    """``celery -A hindsight beat`` (django-celery-beat's database scheduler, from settings)."""
    command = [sys.executable, "-m", "celery", "-A", "hindsight", "beat", "--loglevel", log_level]
    if max_interval is not None:
        command += ["--max-interval", f"{max_interval:g}"]
    return command


def api_command(*, bind: str, workers: int = 1, threads: int = 16, timeout: int = 600,
                access_log: str | None = "-", access_format: str | None = None,
                log_level: str | None = None, control_socket: Path | None = None) -> list[str]:
    """gunicorn with ``hindsight.project.gunicorn_conf`` (its request threads share a pool of database
    connections). Its control socket goes where asked, not to the shared default
    ``~/.gunicorn/gunicorn.ctl`` two stacks would fight over (none when the path is too long)."""
    command = [sys.executable, "-m", "gunicorn", "hindsight.project.wsgi:application", "--bind", bind,
               "--config", "python:hindsight.project.gunicorn_conf",
               "--workers", str(workers), "--threads", str(threads), "--timeout", str(timeout)]
    if access_log:
        command += ["--access-logfile", access_log]
    if access_format:
        command += ["--access-logformat", access_format]
    if log_level:
        command += ["--log-level", log_level]
    if control_socket is None or len(str(control_socket)) > MAX_SOCKET_PATH:
        return [*command, "--no-control-socket"]
    return [*command, "--control-socket", str(control_socket)]


def openai_compatible_env(base_url: str, *, api_key: str, model: str = "scripted",
                          embeddings_model: str | None = "scripted-embed",
                          dimensions: int = 384) -> dict[str, str]:
    """The variables that point the LLM (and, with ``embeddings_model``, the embeddings) at an
    OpenAI-compatible server: the scripted one of the tests and benchmarks (``fakes.llm_server``)."""
    env = {"HINDSIGHT_API_LLM_PROVIDER": "openai", "HINDSIGHT_API_LLM_BASE_URL": base_url,
           "HINDSIGHT_API_LLM_API_KEY": api_key, "HINDSIGHT_API_LLM_MODEL": model}
    if embeddings_model:
        env |= {"HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
                "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": base_url,
                "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": api_key,
                "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": embeddings_model,
                "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": str(dimensions)}
    return env


class Stack:
    """PostgreSQL and Valkey (embedded unless URLs are given), migrate, API, workers, beat.

    ``data_dir`` holds the servers' data (under ``/var/tmp/hindsight-devstack`` as root, where
    PostgreSQL's ``nobody`` can reach it) and, with ``logs``, one log file per process; without
    it the processes write to the caller's output (``make run``). ``env`` is added to the
    caller's environment for every process; ``self.env`` is the result, with the servers' URLs
    and a secret key (a random one unless given).
    ``durable``: PostgreSQL and Valkey keep what they acknowledged (``make run``); throw-away
    stacks run them without fsync and snapshots. ``announce`` hears what is being started.
    """

    def __init__(self, data_dir: Path, *, env: Mapping[str, str] | None = None,
                 database_url: str | None = None, redis_url: str | None = None,
                 valkey: bool = True, durable: bool = False, durable_broker: bool | None = None,
                 pg_port: int | None = None, valkey_port: int | None = None,
                 host: str = "127.0.0.1", port: int | None = None, logs: bool = True,
                 announce: Callable[[str], None] | None = None):
        self.data_dir = data_dir
        self.base = reachable_base(data_dir)
        self.logs = logs
        self.announce = announce or (lambda message: None)
        self.pg = (None if database_url else
                   EmbeddedPostgres(self.base / "pg", pg_port or free_port(), durable=durable))
        self.valkey = (None if redis_url or not valkey else EmbeddedValkey(
            self.base / "valkey", valkey_port or free_port(),
            durable=durable if durable_broker is None else durable_broker))
        self.database_url = database_url or (self.pg.url if self.pg else "")
        self.redis_url = redis_url or (self.valkey.url if self.valkey else "")
        self.env: dict[str, str] = {**os.environ, **(env or {})}
        if self.database_url:
            self.env[DATABASE_VARIABLE] = self.database_url
        if self.redis_url:
            self.env[REDIS_VARIABLE] = self.redis_url
        # One key for every process of the stack (start-up refuses none outside `make run`,
        # which passes the one it keeps); a throw-away stack's is random.
        if not self.env.get(SECRET_VARIABLE, "").strip():
            self.env[SECRET_VARIABLE] = secrets.token_urlsafe(50)
        self.host = host
        self.port = port or free_port()
        self.api: Process | None = None
        self.beat: Process | None = None
        self.workers: list[Process] = []
        self.serial = 0
        self._servers: list[EmbeddedPostgres | EmbeddedValkey] = []

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # the servers -------------------------------------------------------------------------------

    def start_servers(self) -> None:
        if self.pg is not None:
            self.announce(f"starting embedded PostgreSQL (pgvector) on 127.0.0.1:{self.pg.port}, "
                          f"data {self.pg.data_dir}")
            self.pg.start()
            self._servers.append(self.pg)
        if self.valkey is not None:
            self.announce(f"starting embedded Valkey on 127.0.0.1:{self.valkey.port}")
            self.valkey.start()
            self._servers.append(self.valkey)

    def migrate(self, *, verbosity: int | None = None, collectstatic: bool = False,
                cwd: Path = PROJECT_DIR) -> None:
        """``manage.py migrate`` (and ``collectstatic``: a fresh clone has no collected files
        yet; WhiteNoise serves them from STATIC_ROOT) in a subprocess, with the stack's env."""
        quiet = [] if verbosity is None else ["-v", str(verbosity)]
        self._manage(["migrate", "--noinput", *quiet], cwd)
        if collectstatic:
            self._manage(["collectstatic", "--noinput", "-v", "0"], cwd)

    def _manage(self, args: list[str], cwd: Path) -> None:
        """``manage.py ARGS``, its output passed on; a failure is ``StartupFailed`` with what it
        said (a failed system check stops migrate: its own line, not our traceback)."""
        done = subprocess.run([sys.executable, "manage.py", *args], env=self.env, cwd=cwd,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode == 0:
            sys.stderr.write(done.stderr)
            return
        said = "\n".join(failure_lines(done.stderr))
        raise StartupFailed(f"manage.py {args[0]} failed: {said}" if "\n" not in said else said)

    def use_here(self) -> None:
        """Point this process's Django at the stack (its env) and set Django up."""
        os.environ.update(self.env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
        import django  # noqa: PLC0415 - after the environment names the servers

        django.setup()

    def start_measured(self) -> None:
        """What the benchmarks measure against: the servers started and migrated, this
        process's Django on them, and an API of two single-threaded processes, no access log."""
        self.start_servers()
        self.use_here()
        self.migrate(verbosity=0)
        self.start_api(workers=2, threads=1, log_level="warning", access_log=None)

    # the processes -----------------------------------------------------------------------------

    def _spawn(self, name: str, command: list[str], env: Mapping[str, str] | None = None,
               cwd: Path = PROJECT_DIR) -> Process:
        self.announce(f"starting {name}: {' '.join(command[1:4])} …")
        log_path = self.data_dir / f"{name}.log" if self.logs else None
        if log_path is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        return spawn(name, command, env={**self.env, **(env or {})}, log_path=log_path, cwd=cwd)

    def start_api(self, *, workers: int = 1, threads: int = 16, timeout: int = 600,
                  access_log: str | None = "-", access_format: str | None = None,
                  log_level: str | None = None, env: Mapping[str, str] | None = None) -> Process:
        self.api = self._spawn("api", api_command(
            bind=f"{self.host}:{self.port}", workers=workers, threads=threads, timeout=timeout,
            access_log=access_log, access_format=access_format, log_level=log_level,
            control_socket=self.base / "gunicorn.ctl"), env)
        return self.api

    def start_worker(self, *, concurrency: int | None = None, pool: str | None = None,
                     queue: str | None = None, name: str | None = None,
                     env: Mapping[str, str] | None = None, log_level: str = "INFO",
                     alone: bool = True, cwd: Path = PROJECT_DIR,
                     hostname: str | None = None, beat_thread: bool = False) -> Process:
        """A Celery worker. ``pool`` also goes into its environment: Celery reads an explicit
        ``-P prefork`` as "no choice" when settings name a pool. ``alone``: on a queue of its
        own (its name ``<name>@host``, ``worker<n>`` by default), without gossip, mingle and
        heartbeats; otherwise as a deployment's worker (``make run``), named ``hostname@host``
        when given (two such workers of one host need names of their own)."""
        self.serial += 1
        name = name or f"worker{self.serial}"
        extra = {**(env or {}), **({POOL_VARIABLE: pool} if pool else {})}
        worker = self._spawn(name, worker_command(
            queue=queue, concurrency=concurrency, pool=pool, name=name if alone else hostname,
            log_level=log_level, alone=alone, beat_thread=beat_thread), extra, cwd)
        worker.logs_ready = worker.log_path is not None and log_level in ("INFO", "DEBUG")
        self.workers.append(worker)
        return worker

    def start_beat(self, *, max_interval: float | None = None,
                   settings: str = "hindsight.project.settings_beat",
                   env: Mapping[str, str] | None = None) -> Process:
        """celery-beat: it only publishes its schedule, so its settings load
        django-celery-beat alone (``hindsight.project.settings_beat``), not the service."""
        self.beat = self._spawn("beat", beat_command(max_interval=max_interval),
                                {**(env or {}), "DJANGO_SETTINGS_MODULE": settings})
        return self.beat

    def processes(self) -> list[Process]:
        return [p for p in (self.api, *self.workers, self.beat) if p is not None]

    def live_workers(self) -> list[Process]:
        return [w for w in self.workers if w.alive()]

    def wait_healthy(self, timeout: float = 90.0) -> None:
        """Until ``/health`` answers (an API that exited says so at once)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2):
                    return
            except OSError:
                if self.api is not None and not self.api.alive():
                    raise RuntimeError(f"the API exited:\n{self.api.log()[-3000:]}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def wait_answering(self, timeout: float = 120.0) -> None:
        """Until the API answers at its address, whatever the status (a 503 while the database
        is away still proves the bind): only then is the service there to be used."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                if self.api is not None and not self.api.alive():
                    raise StartupFailed(
                        f"the API exited with code {self.api.process.returncode} before "
                        f"answering at {self.base_url}") from None
                if time.monotonic() > deadline:
                    raise StartupFailed(
                        f"the API did not answer at {self.base_url} within {timeout:.0f}s"
                    ) from None
                time.sleep(0.2)

    def wait_workers_ready(self, timeout: float = 90.0) -> None:
        """Until every live worker consumes: its log's "ready." line, or, for a worker that
        logs no INFO line (or to the caller's output), its answer to a ping."""
        deadline = time.monotonic() + timeout
        silent = []
        for worker in self.live_workers():
            if worker.logs_ready:
                worker.wait_ready(max(0.1, deadline - time.monotonic()))
            else:
                silent.append(worker)
        if silent:
            self._wait_pinged(silent, deadline)

    def _wait_pinged(self, workers: list[Process], deadline: float) -> None:
        from celery import Celery  # noqa: PLC0415 - only for workers that log nothing

        probe = Celery(broker=self.redis_url, set_as_current=False)
        while time.monotonic() < deadline:
            replies = probe.control.ping(timeout=1.0) or []
            if len(replies) >= len(workers):
                return
            for worker in workers:
                if not worker.alive():
                    raise RuntimeError(f"{worker.name} exited:\n{worker.log()[-2000:]}")
        raise RuntimeError(f"{len(workers)} worker(s) not answering a ping")

    def stop_workers(self, timeout: float = 20.0) -> None:
        """Warm shutdown of every worker (SIGTERM to each main process), SIGKILL after
        ``timeout``."""
        stop_together(self.workers, timeout)
        self.workers = []

    def stop(self, timeout: float = 30.0) -> None:
        """The processes (warm shutdown within ``timeout``), then the servers, last started
        first."""
        stop_together(self.processes(), timeout)
        while self._servers:
            self._servers.pop().stop()

    def remove_data(self) -> None:
        """Delete a throw-away stack's data and logs (after ``stop``)."""
        for folder in {self.data_dir, self.base}:
            shutil.rmtree(folder, ignore_errors=True)
