"""A fork server for the session's Celery workers (``tests.workers``).

A worker's start was ~1.4 CPU-seconds on two cores, most of it importing Django, DRF, Celery,
kombu, redis, psycopg, numpy and the openai SDK; the suite starts dozens. This process imports
those libraries once (never the project, never Django's settings), then forks one child per
request; a child is ready in ~0.3–0.5 CPU-seconds. The child takes the request's environment, working
directory and log, becomes the leader of a session of its own, and runs Celery's command line
as ``python -m celery ARGS`` does: from there on it is the worker that command would have
started, its project modules and settings loaded from its own environment. (The openai SDK is
then already loaded, where the project itself imports it at its first LLM call.)

Safe only where the libraries imported here would have seen the same environment: a request
whose environment differs from this process's in anything but ``OWN_VARIABLES`` is refused,
and its worker is started as a plain subprocess instead (``Zygote.spawn`` returns None).
Killing, freezing or timing a forked worker is the same as a plain one's: it leads its own
process group, its pool processes are its children, and its end is reported with its status.

Protocol, one JSON object per line: a request ``{"argv", "env", "cwd", "log"}`` is answered
``{"pid": N}`` (or ``{"refused": why}``); a child's end is reported ``{"exited": N, "code": C}``
(``C`` as ``Popen.returncode``: the exit status, or minus the signal).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Imported once here; each must neither read Django's settings nor start a thread at import
# (one that reads the settings fails here, harmlessly: the child imports it).
PRELOAD = (
    "django.db.models", "django.contrib.admin", "django.contrib.postgres.fields",
    "django.core.handlers.wsgi", "django.test", "rest_framework.serializers",
    "celery", "celery.bin.celery", "celery.worker", "celery.apps.worker",
    "celery.concurrency.prefork", "celery.backends.redis", "kombu.transport.redis",
    "redis", "psycopg", "psycopg_pool", "jsonschema", "croniter", "yaml", "requests",
    "numpy", "pgvector.psycopg", "pgvector.django", "tokenizers", "prometheus_client",
    "cron_descriptor",
    # The project imports the SDK at its first LLM call; nearly every worker here makes one.
    "openai",
)
# Variables no module imported here reads at import: the project's (read after the fork),
# pytest's, and Django's async guard (read at each call): a request may differ in them.
OWN_VARIABLES = ("HINDSIGHT_", "DJANGO_SETTINGS_MODULE", "PYTEST_CURRENT_TEST",
                 "DJANGO_ALLOW_ASYNC_UNSAFE")


def _own(name: str) -> bool:
    return name.startswith(OWN_VARIABLES)


def _foreign_differences(env: Mapping[str, str]) -> list[str]:
    names = {n for n in set(env) | set(os.environ) if not _own(n)}
    return sorted(n for n in names if env.get(n) != os.environ.get(n))


def _child(request: dict[str, Any], channels: tuple[int, ...]) -> None:
    """In the forked child: become the requested command, never return."""
    code = 1
    try:
        for fd in channels:
            os.close(fd)
        # A new interpreter's handlers: Ctrl-C raises KeyboardInterrupt, the rest default.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        sys.argv = ["celery", *request["argv"]]
        from celery.__main__ import main  # noqa: PLC0415 - `python -m celery`'s entry point

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported in the worker's log, then the child ends
        import traceback  # noqa: PLC0415

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    requests = os.dup(0)
    replies = os.dup(1)
    os.dup2(2, 1)  # what the libraries print goes to stderr, never into the replies
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    threads = threading.active_count()
    # What is loaded now lives as long as every child: out of the collector's reach, a child's
    # collections neither scan it nor write to its pages (which the fork shares until written).
    gc.freeze()

    def reply(message: dict[str, Any]) -> None:
        os.write(replies, (json.dumps(message) + "\n").encode())

    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    pending = b""
    while True:
        for _key, _events in selector.select(timeout=0.05):
            chunk = os.read(requests, 65536)
            if not chunk:
                return  # the session ended: its children are its to stop
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                foreign = _foreign_differences(request["env"])
                if threads != 1 or foreign:
                    reply({"refused": f"threads={threads}, differing variables {foreign}"})
                    continue
                pid = os.fork()
                if pid == 0:
                    _child(request, (requests, replies))
                reply({"pid": pid})
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            reply({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


class ForkedProcess:
    """What ``subprocess.Popen`` offers the stack's ``Process`` (pid, poll, wait, signals), for
    a child of the zygote: its end is what the zygote reports."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._zygote.wait_for_exit(0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The session's fork server (one per xdist worker), started on first use."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = {k: v for k, v in env.items() if not _own(k)}
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._exited: dict[int, int] = {}
        self._changed = threading.Condition()
        self._answers: list[dict[str, Any]] = []

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote"], env=self._env,
                cwd=Path(__file__).resolve().parent.parent,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            threading.Thread(target=self._read, args=(self._process,), daemon=True,
                             name="zygote-reader").start()
        return self._process

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            message = json.loads(line)
            with self._changed:
                if "exited" in message:
                    self._exited[message["exited"]] = message["code"]
                else:
                    self._answers.append(message)
                self._changed.notify_all()
        with self._changed:  # the zygote is gone: nothing more will be answered
            self._answers.append({"refused": "the zygote ended"})
            self._changed.notify_all()

    def spawn(self, argv: list[str], *, env: Mapping[str, str], cwd: Path,
              log_path: Path) -> ForkedProcess | None:
        """``python -m celery ARGV`` forked from the zygote; None if it refused (start it as a
        plain subprocess)."""
        with self._lock:
            process = self._start()
            assert process.stdin is not None
            request = {"argv": argv, "env": dict(env), "cwd": str(cwd), "log": str(log_path)}
            try:
                process.stdin.write((json.dumps(request) + "\n").encode())
                process.stdin.flush()
            except OSError:
                return None
            with self._changed:
                self._changed.wait_for(lambda: self._answers, timeout=30)
                answer = self._answers.pop(0) if self._answers else {"refused": "no answer"}
        if "pid" not in answer:
            return None
        return ForkedProcess(self, answer["pid"], ["celery", *argv])

    def returncode(self, pid: int) -> int | None:
        with self._changed:
            return self._exited.get(pid)

    def wait_for_exit(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def close(self) -> None:
        if self._process is not None:
            with contextlib.suppress(Exception):
                assert self._process.stdin is not None
                self._process.stdin.close()
            with contextlib.suppress(Exception):
                self._process.wait(10)
            self._process = None


if __name__ == "__main__":
    serve()
