"""The Celery application; tasks live in each app's ``tasks`` module."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from celery import Celery
from celery.exceptions import SecurityWarning
from celery.signals import task_postrun, worker_init, worker_process_init, worker_shutdown
from django.conf import settings
from django.db import connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
# Celery's Django fixup runs every Django system check when a worker or beat starts, and then
# drops the result: the URL checks alone import every view (DRF, the OpenAPI generator, the MCP
# server — about 0.9 CPU-seconds and 37 MB per process) for a process that serves no URL. The
# worker runs the project's configuration check instead, and stops on its errors
# (``_stop_on_invalid_configuration``).
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")


def _quiet_root_warning_in_the_dev_stack() -> None:
    """``make run`` on a machine where the only user is root (a container, a CI box) starts its
    worker as root; Celery then warns on every start, and ``C_FORCE_ROOT`` does not stop it (that
    only lifts the refusal to run pickle as root — we accept JSON only). Dropping to another
    user (``--uid``) is no option there: the checkout and its virtualenv are often unreadable to
    anyone else. So in the dev stack alone (``HINDSIGHT_DEVSTACK=1``, set by ``make run`` for the
    processes it starts) that one warning is ignored; a deployment still sees it."""
    if os.environ.get("HINDSIGHT_DEVSTACK") == "1":
        warnings.filterwarnings(
            "ignore", message=r"You're running the worker with superuser privileges",
            category=SecurityWarning,
        )


_quiet_root_warning_in_the_dev_stack()

app = Celery("hindsight")
app.config_from_object("django.conf:settings", namespace="CELERY")
# A worker whose broker is gone retries for as long as it takes, with Celery's backoff (2 s more
# each time, at most 30 s apart). Celery's default gives up after 100 retries (about 45 minutes):
# the worker then exits with an "Unrecoverable error" (an OperationalError, or an AttributeError
# from a step restarted on the closed connection), and a deployment whose broker was away that
# long has no worker left when it returns.
app.conf.broker_connection_max_retries = None
# And a broker lost while a message is unacknowledged (a task running, or prefetched) does not end
# the worker either (``hindsight.project.consumer``).
app.conf.worker_consumer = "hindsight.project.consumer:Consumer"
app.autodiscover_tasks()

# Import after the app exists: the step module needs nothing of Django.
from hindsight.project import beat_thread  # noqa: E402
from operations.workersteps import ProbeHeartbeat, ReapDeadPoolProcesses  # noqa: E402

app.steps["worker"].add(ReapDeadPoolProcesses)
app.steps["worker"].add(ProbeHeartbeat)  # the worker probe (docs/operating.md, Probes)
beat_thread.install(app)

# A pool process keeps its database connection from one task to the next: opening one (TCP,
# authentication, session setup) took longer than all the SQL of a refresh. Celery's Django
# fixup would close it around every task; it closes it only every ``CELERY_DB_REUSE_MAX`` tasks
# (settings), and in between a connection is dropped after a task when it is broken or older
# than this, and health-checked (``SELECT 1``) before the next task's first query, so one the
# server closed while idle is replaced instead of failing that task.
WORKER_DB_CONN_MAX_AGE_SECONDS = 300.0


def worker_db_connections_keep(*, max_age: float = WORKER_DB_CONN_MAX_AGE_SECONDS) -> None:
    """In a pool process (``worker_process_init``): connections opened from now on persist."""
    for alias in connections:
        settings_dict = connections[alias].settings_dict
        settings_dict["CONN_MAX_AGE"] = max_age
        settings_dict["CONN_HEALTH_CHECKS"] = True


def worker_db_connections_tidy() -> None:
    """After a task: drop a broken or too old connection; the next task health-checks the rest."""
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


def worker_db_idle_transactions_bound(*, seconds: float) -> None:
    """Sessions opened from now on are ended by PostgreSQL once idle inside a transaction for
    ``seconds`` (``idle_in_transaction_session_timeout``), and the rows they locked freed.

    A worker never waits on the network inside a transaction (docs/internals.md), so a session
    that does is one whose worker was cut off mid-transaction: a partition, a frozen host. Left
    alone it holds its locks until TCP notices, which can take hours, and a lock on a key's
    lease keeps the sweep from taking the job over and every edit of the model waiting. The
    bound is the sweep's silence threshold: by then the job is taken over anyway."""
    flag = f"-c idle_in_transaction_session_timeout={max(1, round(seconds * 1000))}"
    for alias in connections:
        options = connections[alias].settings_dict.setdefault("OPTIONS", {})
        options["options"] = f"{options.get('options', '')} {flag}".strip()


@worker_init.connect(weak=False)
def _bound_idle_transactions(**_: Any) -> None:
    # In the main process, before the pool forks: its children and its threads inherit it.
    worker_db_idle_transactions_bound(seconds=settings.HINDSIGHT.recovery_threshold_seconds)


@worker_process_init.connect(weak=False)
def _keep_db_connections(**_: Any) -> None:
    worker_db_connections_keep()


@task_postrun.connect(weak=False)
def _tidy_db_connections(**_: Any) -> None:
    worker_db_connections_tidy()


# ----------------------------------------------------------------------------------------
# A threads-pool worker (HINDSIGHT_API_WORKER_POOL=threads, the default): many jobs in flight in
# one process, most of them waiting on the LLM.


def threads_pool_prepare(*, hostname: str | None) -> None:
    """In a threads-pool worker, before its first task: connections from a bounded pool (the LLM
    gateway hands the thread's back before every wait); the process's liveness beacon
    (``operations.liveness``)."""
    # Imported here: this module loads before Django's apps are ready (models).
    from hindsight.infra.db import connections_pool_use  # noqa: PLC0415
    from operations import engine, liveness  # noqa: PLC0415

    # pg_stat_activity names the worker each connection belongs to.
    connections_pool_use(max_size=settings.HINDSIGHT.worker_db_pool_size,
                         application_name=f"hindsight-worker {hostname or ''}".strip())
    global _beacon
    _beacon = liveness.Beacon(
        liveness.beacon_name(hostname=hostname, pid=os.getpid()),
        lambda operation_id, holder, cause: engine.operation_worker_lost(
            operation_id=operation_id, holder=holder, cause=cause),
    )
    _beacon.start()


_beacon: Any = None


def _pool_name(worker: Any) -> str:
    pool = getattr(worker, "pool_cls", "")
    return pool if isinstance(pool, str) else getattr(pool, "__module__", "")


@worker_init.connect(weak=False)
def _stop_on_invalid_configuration(**_: Any) -> None:
    """The configuration check (``hindsight.infra.checks``) at the worker's start, one line an error."""
    from hindsight.infra.checks import configuration_check  # noqa: PLC0415  # needs the settings

    errors = [f"{error.id}: {error.msg}. {error.hint}" for error in configuration_check()]
    if errors:
        # SystemExit, not an exception: Celery logs and swallows what a signal handler raises.
        raise SystemExit("invalid configuration:\n" + "\n".join(errors))
    logging.getLogger("hindsight").info("%s", settings.HINDSIGHT.llm_description)


@worker_init.connect(weak=False)
def _prepare_threads_pool(sender: Any = None, **_: Any) -> None:
    name = _pool_name(sender)
    if "thread" in name:
        threads_pool_prepare(hostname=getattr(sender, "hostname", None))


@worker_shutdown.connect(weak=False)
def _stop_beacon(**_: Any) -> None:
    if _beacon is not None:
        _beacon.stop()
