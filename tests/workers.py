"""Fixtures that run real Celery workers as subprocesses (owned by the operations tests).

``worker_factory`` (needs committed data, so it pulls in ``transactional_db``) starts
``celery -A hindsight worker`` processes against the test database, the session's Redis (or a
broker the test owns), a queue of this test session, the test-only ``test.job`` handler and
short timings (lock TTL 2 s, heartbeat 0.5 s, recovery threshold 3 s, …). The test process's
own ``settings.HINDSIGHT`` gets the same timings and queue, so what it submits reaches those
workers and the beat functions it runs use the same thresholds.

``beat`` runs the engine's beat work (``release_due`` + ``recover``) in a background thread of
the test process every few hundred milliseconds; ``run_beat_once()`` runs it once.

Teardown kills every process group it started; nothing is left behind.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SESSION_QUEUE = f"hindsight-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
TEST_HANDLER_MODULE = "operations.testing_handlers"

# Config attribute → environment variable, for the timings the workers must share.
_ENV_NAMES = {
    "lock_ttl_seconds": "HINDSIGHT_API_WORKER_LOCK_TTL_SECONDS",
    "heartbeat_seconds": "HINDSIGHT_API_WORKER_HEARTBEAT_SECONDS",
    "recovery_threshold_seconds": "HINDSIGHT_API_WORKER_RECOVERY_THRESHOLD_SECONDS",
    "redispatch_after_seconds": "HINDSIGHT_API_WORKER_REDISPATCH_AFTER_SECONDS",
    "recovery_interval_seconds": "HINDSIGHT_API_WORKER_RECOVERY_INTERVAL_SECONDS",
    "release_interval_seconds": "HINDSIGHT_API_WORKER_RELEASE_INTERVAL_SECONDS",
    "worker_max_retries": "HINDSIGHT_API_WORKER_MAX_RETRIES",
    "worker_retry_backoff_seconds": "HINDSIGHT_API_WORKER_TASK_RETRY_BACKOFF_SECONDS",
    "worker_retry_backoff_max_seconds": "HINDSIGHT_API_WORKER_TASK_RETRY_BACKOFF_MAX_SECONDS",
    "reflect_wall_timeout_seconds": "HINDSIGHT_API_REFLECT_WALL_TIMEOUT",
    "task_soft_time_limit_seconds": "HINDSIGHT_API_WORKER_TASK_SOFT_TIME_LIMIT",
    "task_time_limit_seconds": "HINDSIGHT_API_WORKER_TASK_TIME_LIMIT",
    "broker_visibility_timeout_seconds": "HINDSIGHT_API_BROKER_VISIBILITY_TIMEOUT",
    "publish_retries": "HINDSIGHT_API_WORKER_PUBLISH_RETRIES",
}

TEST_TIMINGS: dict[str, Any] = {
    "lock_ttl_seconds": 2.0,
    "heartbeat_seconds": 0.5,
    "recovery_threshold_seconds": 3.0,
    "redispatch_after_seconds": 2.0,
    "recovery_interval_seconds": 1.0,
    "release_interval_seconds": 0.5,
    "worker_max_retries": 3,
    "worker_retry_backoff_seconds": 0.2,
    "worker_retry_backoff_max_seconds": 2.0,
    "reflect_wall_timeout_seconds": 20.0,
    "task_soft_time_limit_seconds": 25.0,
    "task_time_limit_seconds": 30.0,
    "broker_visibility_timeout_seconds": 60.0,
    "publish_retries": 1,
}


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict  # NAME is the test database's once it is set up
    auth = quote(s["USER"] or "postgres")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    return f"postgresql://{auth}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: Any = field(repr=False, default=None)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited during start-up:\n{self.log()}")
            if " ready." in self.log():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker {self.name} not ready within {timeout}s:\n{self.log()}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)  # the main process and its pool children
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children): a crash."""
        self._signal_group(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> None:
        """Warm shutdown (SIGTERM); SIGKILL if it does not exit in time."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait(timeout=10)
        else:
            self._signal_group(signal.SIGKILL)  # orphaned pool children, if any
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


class WorkerFactory:
    def __init__(self, tmp_path: Path, settings: Any):
        self.tmp_path = tmp_path
        self.settings = settings
        self.workers: list[WorkerProcess] = []
        self.redis_url: str = settings.HINDSIGHT.redis_url or settings.REDIS_URL

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        cfg = self.settings.HINDSIGHT
        env = {**os.environ}
        env.update({
            "DJANGO_SETTINGS_MODULE": "hindsight.settings",
            "HINDSIGHT_API_DATABASE_URL": _database_url(),
            "HINDSIGHT_API_REDIS_URL": self.redis_url,
            "HINDSIGHT_API_TASK_QUEUE": cfg.task_queue,
            "HINDSIGHT_API_EXTRA_HANDLER_MODULES": ",".join(cfg.extra_handler_modules),
            "PYTHONUNBUFFERED": "1",
        })
        for attribute, name in _ENV_NAMES.items():
            env[name] = str(getattr(cfg, attribute))
        env.update(extra or {})
        return env

    def __call__(
        self,
        *,
        concurrency: int = 1,
        env: dict[str, str] | None = None,
        wait: bool = True,
        name: str | None = None,
        pool: str = "prefork",
    ) -> WorkerProcess:
        name = name or f"w{len(self.workers) + 1}-{uuid.uuid4().hex[:4]}"
        log_path = self.tmp_path / f"{name}.log"
        log_file = open(log_path, "ab")
        cmd = [
            sys.executable, "-m", "celery", "-A", "hindsight", "worker",
            "-Q", self.settings.HINDSIGHT.task_queue, "-c", str(concurrency), "-P", pool,
            "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-l", "INFO",
        ]
        # Celery reads an explicit "-P prefork" as "no choice" when settings name a pool
        # (CELERY_WORKER_POOL): the setting is what picks it.
        process = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=self.env({"HINDSIGHT_API_WORKER_POOL": pool, **(env or {})}),
            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
        worker = WorkerProcess(name, process, log_path, log_file)
        self.workers.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    def start_beat(self, env: dict[str, str] | None = None) -> WorkerProcess:
        """A real ``celery beat`` with django-celery-beat's database scheduler.

        The schedules it runs are the rows ``operations.schedules`` keeps; call
        ``ensure_beat_schedules()`` after changing the intervals in settings.
        """
        name = f"beat-{uuid.uuid4().hex[:4]}"
        log_path = self.tmp_path / f"{name}.log"
        log_file = open(log_path, "ab")
        cmd = [
            sys.executable, "-m", "celery", "-A", "hindsight", "beat", "-l", "INFO",
            "-S", "django_celery_beat.schedulers:DatabaseScheduler",
            "--max-interval", "1",
        ]
        process = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=self.env(env), stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        beat = WorkerProcess(name, process, log_path, log_file)
        self.workers.append(beat)
        return beat

    def stop_all(self) -> None:
        for worker in self.workers:
            try:
                worker.stop(timeout=5)
            except Exception:
                worker._signal_group(signal.SIGKILL)


def apply_test_settings(settings: Any, **overrides: Any) -> None:
    """Point the test process at the session queue, the test handler and short timings."""
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT,
        **{"task_queue": SESSION_QUEUE, "extra_handler_modules": (TEST_HANDLER_MODULE,),
           **TEST_TIMINGS, **overrides},
    )


@pytest.fixture
def worker_factory(transactional_db: None, settings: Any, tmp_path: Path) -> Iterator[WorkerFactory]:
    import operations.testing_handlers as testing_handlers  # registers test.job in process

    testing_handlers.ensure_tables()
    apply_test_settings(settings)
    factory = WorkerFactory(tmp_path, settings)
    _purge_queue(factory.redis_url, SESSION_QUEUE)
    try:
        yield factory
    finally:
        factory.stop_all()


def _purge_queue(redis_url: str, queue: str) -> None:
    import redis

    with suppress(redis.RedisError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).delete(queue)


def run_beat_once() -> tuple[list[Any], Any]:
    """What celery-beat would run: release due parked operations, then recover."""
    from operations.engine import recover, release_due

    return release_due(), recover()


class BeatThread(threading.Thread):
    def __init__(self, interval: float):
        super().__init__(name="test-beat", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.stopped.wait(self.interval):
                try:
                    run_beat_once()
                except Exception as exc:  # a broker outage, say: keep ticking, like beat
                    self.errors.append(exc)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)


@pytest.fixture
def beat(worker_factory: WorkerFactory) -> Iterator[BeatThread]:
    thread = BeatThread(interval=0.25)
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


@contextmanager
def use_broker(settings: Any, redis_url: str) -> Iterator[None]:
    """Send this process's messages (and take its locks) through another Redis."""
    from kombu import pools as kombu_pools

    from hindsight.celery import app

    previous_url = app.conf.broker_url
    previous_cfg = settings.HINDSIGHT

    def switch(url: str) -> None:
        app.conf.broker_url = url
        app.conf.broker_write_url = None
        app.conf.broker_read_url = None
        # Celery's pools live in kombu's global per-connection registries: closing only the
        # app's pool would leave a closed pool registered for the old URL, and the next publish
        # after switching back would fail with "Acquire on closed pool".
        kombu_pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    settings.HINDSIGHT = dataclasses.replace(previous_cfg, redis_url=redis_url)
    switch(redis_url)
    try:
        yield
    finally:
        switch(previous_url)
        settings.HINDSIGHT = previous_cfg


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.1,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
