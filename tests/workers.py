"""Fixtures that run real Celery workers as subprocesses (owned by the operations tests).

``worker_factory`` (needs committed data, so it pulls in ``transactional_db``) gives a test real
``celery -A hindsight worker`` processes against the test database, the session's Redis (or a
broker the test owns), the test-only ``test.job`` handler and short timings (lock TTL 2 s,
heartbeat 0.5 s, recovery threshold 3 s, …). The test process's own ``settings.HINDSIGHT`` gets
the same timings and the workers' queue, so what it submits reaches those workers and the beat
functions it runs use the same thresholds.

Workers outlive a test. A worker's configuration is its whole environment (the timings, the LLM
it talks to, any ``HINDSIGHT_API_*`` a test adds) and its concurrency; the session keeps one set
of workers per configuration (``WorkerPool``), each on a queue of its own, and hands the n-th
``worker_factory(...)`` call of a test the n-th worker of that configuration, started on first
use. After the test the worker's queue is emptied and the worker must be idle (nothing active or
reserved) before the database is flushed; one that is not, or that died, is stopped and a later
test starts a fresh one. Only the tests named in ``PRIVATE_WORKER_TESTS`` (they kill, restart or
time a worker, or move it to another broker) get workers started for them and stopped after.
Workers are forked from the session's fork server (``tests.zygote``: the libraries already
loaded, ~0.4 instead of ~1.4 CPU-s a start), each then the worker ``celery -A hindsight worker``
starts; one whose environment the fork server refuses is a plain subprocess.

``beat`` runs the engine's beat work (``release_due`` + ``recover``) in a background thread of
the test process every few hundred milliseconds; ``run_beat_once()`` runs it once.

Teardown kills every process group it started; nothing is left behind.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import pytest

from hindsight.devstack.stack import (
    Process,
    beat_command,
    spawn,
    worker_command,
)
from hindsight.devstack.stack import stop_together as stack_stop_together
from hindsight.devstack.state import QUEUE_VARIABLE
from tests.zygote import Zygote

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
    "cpu_queue": "HINDSIGHT_API_WORKER_CPU_QUEUE",
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


# A worker (or beat) this session started: the stack's process handle.
WorkerProcess = Process


# The tests whose workers are their own: started for the test and stopped after it, never
# shared. A test file (every test in it) or one test, with the reason; keep this set small.
PRIVATE_WORKER_TESTS: dict[str, str] = {
    "tests/operations/test_worker_probe.py": "stops, freezes and kills its workers",
    "tests/operations/test_workers.py::"
    "test_killed_worker_job_is_recovered_and_its_effect_written_exactly_once":
        "SIGKILLs its worker mid-job and starts another",
    "tests/compat/test_client_worker_lost.py": "SIGKILLs the pool process running a refresh",
    "tests/operations/test_threads_pool.py::"
    "test_a_killed_threads_worker_is_recovered_by_its_peer_within_seconds":
        "SIGKILLs a whole threads-pool worker and times its peer's recovery",
    "tests/operations/test_threads_pool.py::"
    "test_a_killed_cpu_queue_worker_is_recovered_by_the_other_and_its_retry_routed_back":
        "SIGKILLs the CPU queue's worker; its peer consumes another queue",
    "tests/operations/test_broker_restart.py":
        "its worker talks to a broker the test kills and restarts",
    "tests/mentalmodels/test_awaiting_llm.py::"
    "test_a_refresh_without_an_llm_does_not_pause_and_runs_once_a_worker_has_one":
        "stops its worker and starts one with another configuration",
    "tests/webhooks/test_slow_receiver.py":
        "a webhook queue's worker of its own beside the refreshes' worker, both timed",
}


def has_private_workers(nodeid: str) -> bool:
    test = nodeid.split("[", 1)[0]
    return test in PRIVATE_WORKER_TESTS or test.split("::", 1)[0] in PRIVATE_WORKER_TESTS


# How many worker (and beat) processes this session started, by kind: the run's summary.
STARTS: dict[str, int] = {"shared": 0, "private": 0, "beat": 0, "configurations": 0,
                          "unsettled": 0, "forked": 0}

# Variables that change from test to test without changing what a worker does.
_NOT_CONFIGURATION = frozenset({"PYTEST_CURRENT_TEST", "HINDSIGHT_API_TASK_QUEUE"})
# kombu's Redis transport keeps a queue's messages of priority p > 0 in "<queue>\x06\x16<p>".
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def start_worker(
    *, name: str, queue: str, env: dict[str, str], concurrency: int, log_dir: Path,
    task_queue: str | None = None, zygote: Zygote | None = None,
) -> WorkerProcess:
    """A worker of the stack's (``hindsight.devstack.stack``) on ``queue``, the pool named in
    ``env`` (``-P prefork`` is "no choice" when it names one). Its settings' task queue is
    ``queue`` too unless ``task_queue`` is given (a CPU queue's worker keeps the task queue's
    peers). ``zygote``: forked from it, where it accepts (``tests.zygote``)."""
    command = worker_command(queue=queue, concurrency=concurrency, pool="prefork", name=name)
    env = {**env, QUEUE_VARIABLE: task_queue or queue}
    log_path = log_dir / f"{name}.log"
    if zygote is not None:
        assert command[1:3] == ["-m", "celery"], command
        forked = zygote.spawn(command[3:], env=env, cwd=REPO_ROOT, log_path=log_path)
        if forked is not None:
            STARTS["forked"] += 1
            return WorkerProcess(name, cast("subprocess.Popen[bytes]", forked), log_path)
    return spawn(name, command, env=env, log_path=log_path)


class SharedWorker:
    """A test's handle on a worker of the session: its log from the test's start on; it may not
    be killed or stopped (a test that does so belongs in ``PRIVATE_WORKER_TESTS``)."""

    def __init__(self, worker: WorkerProcess):
        self._worker = worker
        self._log_start = worker.log_path.stat().st_size if worker.log_path.exists() else 0
        self.name = worker.name
        self.process = worker.process
        self.log_path = worker.log_path

    @property
    def pid(self) -> int:
        return self._worker.pid

    def alive(self) -> bool:
        return self._worker.alive()

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        raise RuntimeError(f"{self.name} is shared: list the test in tests.workers.PRIVATE_WORKER_TESTS")

    stop = kill


@dataclass
class _Configuration:
    queue: str
    workers: list[WorkerProcess] = field(default_factory=list)


class WorkerPool:
    """The session's shared workers: a list per configuration, each on a queue of its own.

    At most ``max_configurations`` configurations keep their workers; starting another stops
    the workers of the one used longest ago."""

    def __init__(self, log_dir: Path, redis_url: str, max_configurations: int = 6):
        self.log_dir = log_dir
        self.redis_url = redis_url
        self._zygote: Zygote | None = None
        self.max_configurations = max_configurations
        self._configurations: dict[tuple[Any, ...], _Configuration] = {}
        self._queues = 0

    @staticmethod
    def key(env: dict[str, str], concurrency: int) -> tuple[Any, ...]:
        return (concurrency, *sorted((k, v) for k, v in env.items() if k not in _NOT_CONFIGURATION))

    def fork_server(self, env: dict[str, str]) -> Zygote:
        """The session's fork server, started with the first worker's environment."""
        if self._zygote is None:
            self._zygote = Zygote(env)
        return self._zygote

    def queue(self, key: tuple[Any, ...]) -> str:
        if key not in self._configurations:
            self._queues += 1
            STARTS["configurations"] += 1
            if os.environ.get("HINDSIGHT_TEST_WORKER_KEYS"):  # a debugging aid: what differed
                with open(os.environ["HINDSIGHT_TEST_WORKER_KEYS"], "a") as out:
                    out.write(repr((os.environ.get("PYTEST_CURRENT_TEST"), key)) + "\n")
            self._configurations[key] = _Configuration(f"{SESSION_QUEUE}-c{self._queues}")
            self._evict(keep=key)
        configuration = self._configurations.pop(key)  # most recently used last
        self._configurations[key] = configuration
        return configuration.queue

    def worker(self, key: tuple[Any, ...], index: int, env: dict[str, str]) -> WorkerProcess:
        configuration = self._configurations[key]
        while len(configuration.workers) <= index:
            name = f"{configuration.queue.rsplit('-', 1)[-1]}w{len(configuration.workers) + 1}"
            # Its webhook deliveries too (hindsight.webhooks.outbox.webhook_queue).
            worker = start_worker(name=name, queue=f"{configuration.queue},"
                                  f"{configuration.queue}.webhooks", env=env,
                                  concurrency=key[0], log_dir=self.log_dir,
                                  task_queue=configuration.queue, zygote=self.fork_server(env))
            configuration.workers.append(worker)
            STARTS["shared"] += 1
            worker.wait_ready()
        return configuration.workers[index]

    def settle(self, key: tuple[Any, ...], timeout: float = 15.0) -> None:
        """Empty the configuration's queue and wait until its workers are idle; stop the ones
        that are not (or died), so the next test starts from fresh workers."""
        configuration = self._configurations.get(key)
        if configuration is None:
            return
        if not (all(w.alive() for w in configuration.workers)
                and _drain(self.redis_url, configuration.queue, configuration.workers, timeout)):
            STARTS["unsettled"] += 1
            self._stop(configuration)

    def _evict(self, keep: tuple[Any, ...]) -> None:
        while len(self._configurations) > self.max_configurations:
            oldest = next(k for k in self._configurations if k != keep)
            self._stop(self._configurations.pop(oldest))

    @staticmethod
    def _stop(*configurations: _Configuration) -> None:
        workers = [w for c in configurations for w in c.workers]
        stop_together(workers)
        for configuration in configurations:
            configuration.workers.clear()

    def kill_all(self) -> None:
        """At the session's end: SIGKILL every shared worker's process group at once. They are
        idle with their queues empty (``settle``), so nothing is lost, and a warm shutdown of a
        dozen workers took 10–20 s of the session's end on two cores."""
        for configuration in self._configurations.values():
            for worker in configuration.workers:
                worker.signal_group(signal.SIGKILL)
        self._stop(*self._configurations.values())  # reaps them, closes their logs
        if self._zygote is not None:
            self._zygote.close()


def stop_together(processes: list[WorkerProcess], timeout: float = 5.0) -> None:
    """Warm shutdown of all at once (SIGTERM to each whole group), SIGKILL for the slow ones."""
    stack_stop_together(processes, timeout, group=True)


def _drain(redis_url: str, queue: str, workers: list[WorkerProcess], timeout: float) -> bool:
    """True once ``queue`` is empty and no worker has a task active or reserved, twice in a row
    (a finishing job may publish its key's next operation)."""
    from hindsight.project.celery import app

    nodes = [f"{w.name}@{socket.gethostname()}" for w in workers]
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        _purge_queue(redis_url, queue)
        _purge_queue(redis_url, queue + ".webhooks")
        inspect = app.control.inspect(destination=nodes, timeout=2.0, limit=len(nodes))
        active, reserved = inspect.active(), inspect.reserved()
        replied = active is not None and reserved is not None and set(active) == set(nodes)
        if replied and not any(active.values()) and not any(reserved.values()):
            quiet += 1
            if quiet == 2:
                return True
        else:
            quiet = 0
        time.sleep(0.1)
    return False


class WorkerFactory:
    def __init__(self, tmp_path: Path, settings: Any, pool: WorkerPool | None = None,
                 fork_server: Callable[[dict[str, str]], Zygote] | None = None):
        """``pool``: the session's shared workers; None gives the test workers of its own.
        ``fork_server``: the session's fork server for a worker's environment (None: plain
        subprocesses)."""
        self.tmp_path = tmp_path
        self.settings = settings
        self.pool = pool
        self.fork_server = fork_server
        self.workers: list[WorkerProcess | SharedWorker] = []
        self.redis_url: str = settings.HINDSIGHT.redis_url or settings.REDIS_URL
        self._key: tuple[Any, ...] | None = None
        self._private: list[WorkerProcess] = []

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        cfg = self.settings.HINDSIGHT
        env = {**os.environ}
        env.update({
            "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
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
        queue: str | None = None,
    ) -> WorkerProcess | SharedWorker:
        """A worker of this configuration (the current settings, ``env``, ``concurrency``).

        Shared: the n-th call of a test gets the n-th worker of that configuration, ready
        (``wait`` and ``name`` apply to private workers only). ``pool``: the Celery pool, named
        in the environment — Celery reads an explicit ``-P prefork`` as "no choice" when
        settings name a pool (``CELERY_WORKER_POOL``). ``queue``: a private worker consumes this
        queue instead of the task queue (a CPU queue's worker)."""
        full_env = self.env({"HINDSIGHT_API_WORKER_POOL": pool, **(env or {})})
        if self.pool is None:
            return self._start_private(full_env, concurrency, wait, name, queue)
        if queue is not None:
            raise RuntimeError("a worker on a queue of its choosing is private: list the test in "
                               "tests.workers.PRIVATE_WORKER_TESTS")
        if self.redis_url != self.pool.redis_url:
            raise RuntimeError("a worker on another broker is private: list the test in "
                               "tests.workers.PRIVATE_WORKER_TESTS")
        key = WorkerPool.key(full_env, concurrency)
        if self._key is None:
            self._key = key
            queue = self.pool.queue(key)
            _move_messages(self.redis_url, self.settings.HINDSIGHT.task_queue, queue)
            self.settings.HINDSIGHT = dataclasses.replace(self.settings.HINDSIGHT, task_queue=queue)
        elif key != self._key:
            raise RuntimeError("workers of two configurations in one test are private: list the "
                               "test in tests.workers.PRIVATE_WORKER_TESTS")
        index = sum(1 for w in self.workers if isinstance(w, SharedWorker))
        worker = SharedWorker(self.pool.worker(key, index, full_env))
        self.workers.append(worker)
        return worker

    def _start_private(
        self, env: dict[str, str], concurrency: int, wait: bool, name: str | None,
        queue: str | None = None,
    ) -> WorkerProcess:
        name = name or f"w{len(self.workers) + 1}-{uuid.uuid4().hex[:4]}"
        worker = start_worker(name=name, queue=queue or self.settings.HINDSIGHT.task_queue,
                              task_queue=self.settings.HINDSIGHT.task_queue, env=env,
                              concurrency=concurrency, log_dir=self.tmp_path,
                              zygote=self.fork_server(env) if self.fork_server else None)
        self.workers.append(worker)
        self._private.append(worker)
        STARTS["private"] += 1
        if wait:
            worker.wait_ready()
        return worker

    def start_beat(self, env: dict[str, str] | None = None) -> WorkerProcess:
        """A real ``celery beat`` of this test, with django-celery-beat's database scheduler,
        publishing to the queue of the test's workers (start it after them).

        The schedules it runs are the rows ``operations.schedules`` keeps; call
        ``ensure_beat_schedules()`` after changing the intervals in settings.
        """
        name = f"beat-{uuid.uuid4().hex[:4]}"
        beat = spawn(name, beat_command(max_interval=1), env=self.env(env),
                     log_path=self.tmp_path / f"{name}.log")
        self._private.append(beat)
        STARTS["beat"] += 1
        return beat

    def stop_all(self) -> None:
        """Stop this test's own processes; leave the shared workers idle for the next test.

        The test is over and nothing of its workers is checked any more, so they are SIGKILLed
        (a warm shutdown took 1.5–3 s each): a message one held goes back to the queue after the
        visibility timeout, as a warm shutdown would put it back at once, and the next test
        empties the queue when it starts (``worker_factory``); its operation is gone with the
        flushed database."""
        for process in self._private:
            process.signal_group(signal.SIGKILL)
        stop_together(self._private)  # reaps them and closes their logs
        if self.pool is not None and self._key is not None:
            self.pool.settle(self._key)


def apply_test_settings(settings: Any, **overrides: Any) -> None:
    """Point the test process at the session queue, the test handler and short timings (a
    queue of the session's workers, once a test has them, stays)."""
    queue = settings.HINDSIGHT.task_queue
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT,
        **{"task_queue": queue if queue.startswith(SESSION_QUEUE) else SESSION_QUEUE,
           "extra_handler_modules": (TEST_HANDLER_MODULE,), **TEST_TIMINGS, **overrides},
    )


@pytest.fixture(scope="session")
def worker_pool(tmp_path_factory: pytest.TempPathFactory, django_db_blocker: Any) -> Iterator[WorkerPool]:
    from django.conf import settings

    pool = WorkerPool(tmp_path_factory.mktemp("workers"),
                      settings.HINDSIGHT.redis_url or settings.REDIS_URL)
    try:
        yield pool
    finally:
        pool.kill_all()
        with django_db_blocker.unblock():
            _end_the_other_database_sessions()


def _end_the_other_database_sessions() -> None:
    """At the session's end every other session of the test database is a leftover — a killed
    worker's (the server ends it a moment later) or a finished thread's of this process (its
    connection closes only when collected) — and pytest-django's DROP DATABASE waited 5 s and
    then failed on them: end them now."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                       " AND backend_type = 'client backend'")


@pytest.fixture
def worker_factory(
    transactional_db: None, settings: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[WorkerFactory]:
    import operations.testing_handlers as testing_handlers  # registers test.job in process

    testing_handlers.ensure_tables()
    apply_test_settings(settings)
    private = has_private_workers(request.node.nodeid)
    pool: WorkerPool = request.getfixturevalue("worker_pool")
    factory = WorkerFactory(tmp_path, settings, None if private else pool, pool.fork_server)
    _purge_queue(factory.redis_url, SESSION_QUEUE)
    try:
        yield factory
    finally:
        factory.stop_all()


def _purge_queue(redis_url: str, queue: str) -> None:
    import redis

    with suppress(redis.RedisError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).delete(
            *(queue + suffix for suffix in _PRIORITY_SUFFIXES))


def _move_messages(redis_url: str, source: str, target: str) -> None:
    """Hand what a test sent before it had workers to the queue of the workers it got."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_connect_timeout=2)
    for suffix in _PRIORITY_SUFFIXES:
        while client.rpoplpush(source + suffix, target + suffix) is not None:
            pass


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist: add up the worker starts of each xdist worker."""
    for kind, count in getattr(node, "workeroutput", {}).get("celery_worker_starts", {}).items():
        STARTS[kind] += count


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["celery_worker_starts"] = dict(STARTS)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if any(STARTS.values()):
        terminalreporter.write_line(
            f"celery processes started: {STARTS['shared']} shared workers "
            f"({STARTS['configurations']} configurations; {STARTS['unsettled']} stopped after a "
            f"test left them busy), {STARTS['private']} private workers, {STARTS['beat']} beat; "
            f"{STARTS['forked']} of the workers forked from the fork server")


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
        self.ticks = 0  # beat runs completed, failed ones included

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.stopped.wait(self.interval):
                try:
                    run_beat_once()
                except Exception as exc:  # a broker outage, say: keep ticking, like beat
                    self.errors.append(exc)
                self.ticks += 1
        finally:
            connection.close()

    def wait_ticks(self, n: int, timeout: float = 30.0) -> None:
        """Until ``n`` more beat runs have completed from now (the first may have begun before:
        ``n`` is at least 2 for one whole run after this call)."""
        target = self.ticks + n
        wait_until(lambda: self.ticks >= target, timeout, interval=0.05,
                   message=f"{n} beat ticks")

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

    from hindsight.project.celery import app

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
