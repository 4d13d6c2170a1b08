"""``python -m hindsight.devstack run``: the whole service on one machine (what `make run` does).

Without ``HINDSIGHT_API_DATABASE_URL`` / ``HINDSIGHT_API_REDIS_URL`` it starts the embedded
PostgreSQL and Valkey with data under ``.devdata/`` (reused across runs, on the ports of the
previous run when they are free), then migrates, collects the static files and runs the API
(gunicorn), the Celery workers and celery-beat (a thread of the first worker). Every process
gets the secret key kept under ``.devdata/`` unless ``HINDSIGHT_API_SECRET_KEY`` is set. What
it started is recorded in ``.devdata/servers.json`` (``hindsight.devstack.state``). Ctrl-C stops
all of it, servers last.
A configuration problem or a taken API port stops it before anything starts, in one line.

``env`` prints the variables another shell needs to act as one of its processes; ``reset``
(``make reset``) deletes all it stored.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import time
from pathlib import Path

from hindsight.devstack import state
from hindsight.devstack.servers import bind_problem, data_remove, free_port
from hindsight.devstack.stack import Stack, StartupFailed
from hindsight.infra.config import Config, read_config

PREFERRED_PG_PORT = 54329
PREFERRED_VALKEY_PORT = 63799
HOST_VARIABLE = "HINDSIGHT_API_HOST"
PORT_VARIABLE = "HINDSIGHT_API_PORT"


def _log(message: str) -> None:
    print(f"[hindsight] {message}", flush=True)


def _refusal(config: Config) -> list[str]:
    """Why this run must not start, checked before anything is started (no server to stop, no
    output to scroll through): the configuration's problems, or the API's port being taken."""
    if config.errors:
        return [f"{problem.variable} {problem.message} (hindsight.{problem.rule})"
                for problem in config.errors]
    problem = bind_problem(config.host, config.port)
    if problem is None:
        return []
    if problem == "in use":
        return [f"port {config.port} on {config.host} is in use: stop what holds it, or set "
                f"{PORT_VARIABLE} to a free port"]
    return [f"cannot serve on {config.host}:{config.port} ({problem}): set {HOST_VARIABLE} / "
            f"{PORT_VARIABLE}"]


def run(args: argparse.Namespace) -> int:
    config = read_config()
    refused = _refusal(config)
    if refused:
        for line in refused:
            _log(line)
        return 2
    stopping = False
    failed = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    data_dir = state.data_dir()
    stack = Stack(
        data_dir, env=_child_environment(data_dir), durable=True, logs=False, announce=_log,
        database_url=config.database_url or None, redis_url=config.redis_url or None,
        pg_port=None if config.database_url else free_port(
            state.previous_port(data_dir, "database_url"), PREFERRED_PG_PORT),
        valkey_port=None if config.redis_url else free_port(
            state.previous_port(data_dir, "redis_url"), PREFERRED_VALKEY_PORT),
        host=config.host, port=config.port)
    # make run's second worker, on the CPU queue (the caller's, else ``<task queue>.cpu``),
    # unless its slots are set to 0: then every job goes to the one worker.
    cpu_slots = config.worker_cpu_concurrency if args.cpu_worker_concurrency is None else (
        args.cpu_worker_concurrency)
    cpu_queue = ""
    if cpu_slots:
        cpu_queue = config.cpu_queue or f"{config.task_queue}.cpu"
        stack.env[state.CPU_QUEUE_VARIABLE] = cpu_queue
    else:
        stack.env.pop(state.CPU_QUEUE_VARIABLE, None)
    # glibc's malloc gives each thread that allocates an arena of its own, up to eight per core;
    # the API's request threads and the worker's slots then keep tens of MB of half-empty
    # arenas. Two per process cost no measurable throughput (docs/operating.md#memory).
    stack.env.setdefault("MALLOC_ARENA_MAX", "2")
    # Named even when it is the default, so that `env` hands a second shell this very queue.
    stack.env[state.QUEUE_VARIABLE] = config.task_queue
    try:
        stack.start_servers()
        # The API's and the workers' metric files (hindsight.infra.metrics). Ours start from 0 at each
        # run; a directory the caller chose is theirs to manage.
        if not stack.env.get(state.METRICS_VARIABLE):
            metrics_dir = data_dir / "metrics"
            shutil.rmtree(metrics_dir, ignore_errors=True)
            metrics_dir.mkdir(parents=True)
            stack.env[state.METRICS_VARIABLE] = str(metrics_dir)
        # Where other shells (manage.py, the CLI, tests) find the servers this run started, the
        # ports the next run asks for first, and what `env` exports besides the URLs and key.
        state.servers_write(data_dir, {
            "database_url": stack.database_url,
            "redis_url": stack.redis_url,
            "api_url": stack.base_url,
            "pid": os.getpid(),
            "env": {name: stack.env.get(name, "") for name in state.SHARED_VARIABLES},
        })
        stack.migrate(collectstatic=True)
        # One API process of 16 threads (hindsight.project.gunicorn_conf: they share a pool of
        # connections); the worker's pool and slots from settings (HINDSIGHT_API_WORKER_POOL /
        # _CONCURRENCY) unless --worker-concurrency says otherwise.
        stack.start_api(workers=args.web_workers)
        # Beat's clock as a thread of this worker (hindsight.project.beat_thread): one process
        # fewer, about 70 MB, where this worker is the only one that could run it.
        stack.start_worker(concurrency=args.worker_concurrency, name="worker", alone=False,
                           beat_thread=True)
        webhook_queue = config.webhook_queue or f"{config.task_queue}.webhooks"
        if cpu_queue:
            # Retains and consolidations (CPU in the worker: embedding, vector math) in a process
            # of their own, so they never hold the refresh slots' interpreter lock; webhook
            # deliveries there too, in slots of their own beside the CPU queue's (a slow
            # receiver holds one of those, never a refresh's), instead of a third interpreter
            # (docs/operating.md#memory).
            stack.start_worker(concurrency=cpu_slots + config.webhook_worker_concurrency,
                               queue=f"{cpu_queue},{webhook_queue}", name="worker-cpu",
                               alone=False, hostname="cpu")
        else:
            # One worker for every job: deliveries still get a process of their own.
            stack.start_worker(concurrency=config.webhook_worker_concurrency, pool="threads",
                               queue=webhook_queue, name="worker-webhooks", alone=False,
                               hostname="webhooks")
        # Said once gunicorn answers there: a port lost to someone else since the check above
        # ends the run instead of announcing an address that serves something else.
        stack.wait_answering()
        _log(config.llm_description)
        _log(f"serving on {stack.base_url} (Ctrl-C stops everything)")
        while not stopping:
            for child in stack.processes():
                if not child.alive():
                    _log(f"a process exited with code {child.process.returncode}; stopping")
                    stopping = True
            time.sleep(0.5)
        return 0
    except StartupFailed as exc:
        failed = True
        for line in str(exc).splitlines():
            _log(line)
        return 1
    finally:
        stack.stop(timeout=30)
        # Keep the URLs (the next run's ports) but say nothing runs there any more.
        recorded = state.servers_read(data_dir)
        if recorded.get("pid") == os.getpid():
            state.servers_write(data_dir, {**recorded, "pid": None})
        if not failed:
            _log("stopped")


def _child_environment(data_dir: Path) -> dict[str, str]:
    """What every process of the dev stack gets on top of the caller's environment."""
    extra = {state.MARKER_VARIABLE: "1"}
    if not os.environ.get(state.SECRET_VARIABLE, "").strip():
        # One key for every process and every run: sessions survive a restart and whichever
        # gunicorn worker answers (a random key per process logged admin users out).
        extra[state.SECRET_VARIABLE] = state.secret_key_ensure(data_dir)
    return extra


def exports(data_dir: Path) -> str:
    """Shell lines for what a running ``make run`` started (servers.json) and the secret key it
    signs with, so that after ``eval "$(python -m hindsight.devstack env)"`` every ``manage.py``
    command, worker or beat of that shell runs as the stack's own processes do (with the URLs
    set, ``manage.py`` no longer looks the stack up, so the key has to come from here too): the
    URLs, the key, the run's shared variables (``state.SHARED_VARIABLES``; one the run left
    unset is unset here too) and the dev-stack marker."""
    path = data_dir / "servers.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: start the service with `make run` first")
    servers = json.loads(path.read_text())
    values: dict[str, str] = {
        variable: str(servers[key]) for variable, key in (
            (state.DATABASE_VARIABLE, "database_url"), (state.REDIS_VARIABLE, "redis_url"))
        if servers.get(key)
    }
    key_path = data_dir / state.SECRET_KEY_FILE
    # A key this shell already exports wins (a run started with it keeps using it too).
    key = key_path.read_text().strip() if key_path.exists() else ""
    if key and not os.environ.get(state.SECRET_VARIABLE, "").strip():
        values[state.SECRET_VARIABLE] = key
    shared = servers.get("env")
    if isinstance(shared, dict):
        values |= {name: str(shared.get(name) or "") for name in state.SHARED_VARIABLES}
    # A worker or beat started by hand from that shell is one of the stack's processes too.
    values[state.MARKER_VARIABLE] = "1"
    return "\n".join(f"export {variable}={shlex.quote(value)}" if value else f"unset {variable}"
                     for variable, value in values.items())


def reset(data_dir: Path) -> int:
    """``make reset``: everything ``make run`` stored for this checkout, gone; refused while it
    runs (its servers would keep writing into folders being deleted)."""
    pid = state.run_pid(data_dir)
    if pid is not None:
        _log(f"`make run` is running for this checkout (pid {pid}): stop it (Ctrl-C) first; "
             "nothing was removed")
        return 2
    removed = data_remove(data_dir)
    for folder in removed:
        _log(f"removed {folder}")
    if not removed:
        _log(f"nothing to remove: no data stored for this checkout ({data_dir})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hindsight.devstack")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="run API, worker and beat (embedded servers if unset)")
    # One API process of 16 threads (the same requests in flight as two of 8, at half the
    # memory: each process holds Django, the openai SDK and the local embedder).
    run_parser.add_argument("--web-workers", type=int, default=1)
    run_parser.add_argument("--worker-concurrency", type=int, default=None)
    # The CPU queue's worker (HINDSIGHT_API_WORKER_CPU_CONCURRENCY, 8); 0: none, every job on
    # the one worker.
    run_parser.add_argument("--cpu-worker-concurrency", type=int, default=None)
    sub.add_parser("env", help="print export lines for the servers `run` started")
    sub.add_parser("reset", help="delete every piece of data `run` stored for this checkout")
    args = parser.parse_args(argv)
    if args.command == "env":
        print(exports(state.data_dir()))
        return 0
    if args.command == "reset":
        return reset(state.data_dir())
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
