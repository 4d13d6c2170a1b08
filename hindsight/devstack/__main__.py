"""``python -m hindsight.devstack run``: the whole service on one machine (what `make run` does).

Without ``HINDSIGHT_API_DATABASE_URL`` / ``HINDSIGHT_API_REDIS_URL`` it starts the embedded
PostgreSQL and Valkey with data under ``.devdata/`` (reused across runs), then migrates and runs
the API (gunicorn), a Celery worker and celery-beat. Ctrl-C stops all of it, servers last.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from hindsight.config import read_config
from hindsight.devstack.servers import EmbeddedPostgres, EmbeddedValkey, free_port, reachable_base

PROJECT_DIR = Path(__file__).resolve().parents[2]
PREFERRED_PG_PORT = 54329
PREFERRED_VALKEY_PORT = 63799


def _log(message: str) -> None:
    print(f"[hindsight] {message}", flush=True)


def run(args: argparse.Namespace) -> int:
    config = read_config()
    servers: list[EmbeddedPostgres | EmbeddedValkey] = []
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    env = dict(os.environ)
    data_dir = Path(os.environ.get("HINDSIGHT_DEVSTACK_DATA_DIR") or PROJECT_DIR / ".devdata")
    base = reachable_base(data_dir)
    try:
        if not config.database_url:
            pg = EmbeddedPostgres(base / "pg", free_port(PREFERRED_PG_PORT))
            _log(f"starting embedded PostgreSQL (pgvector) on 127.0.0.1:{pg.port}, data {pg.data_dir}")
            pg.start()
            servers.append(pg)
            env["HINDSIGHT_API_DATABASE_URL"] = pg.url
        if not config.redis_url:
            valkey = EmbeddedValkey(base / "valkey", free_port(PREFERRED_VALKEY_PORT))
            _log(f"starting embedded Valkey on 127.0.0.1:{valkey.port}")
            valkey.start()
            servers.append(valkey)
            env["HINDSIGHT_API_REDIS_URL"] = valkey.url
        # Where other shells (manage.py, the CLI, tests) find the servers this run started.
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "servers.json").write_text(json.dumps({
            "database_url": env.get("HINDSIGHT_API_DATABASE_URL", ""),
            "redis_url": env.get("HINDSIGHT_API_REDIS_URL", ""),
            "api_url": f"http://{config.host}:{config.port}",
        }, indent=2))
        # The API's and the workers' metric files (hindsight.metrics). Ours start from 0 at each
        # run; a directory the caller chose is theirs to manage.
        if not env.get("PROMETHEUS_MULTIPROC_DIR"):
            metrics_dir = data_dir / "metrics"
            shutil.rmtree(metrics_dir, ignore_errors=True)
            metrics_dir.mkdir(parents=True)
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        python = sys.executable
        subprocess.run([python, "manage.py", "migrate", "--noinput"], check=True, env=env,
                       cwd=PROJECT_DIR)
        bind = f"{config.host}:{config.port}"
        commands = {
            "api": [python, "-m", "gunicorn", "hindsight.wsgi:application", "--bind", bind,
                    "--workers", str(args.web_workers), "--threads", "8",
                    "--timeout", "600", "--access-logfile", "-"],
            "worker": [python, "-m", "celery", "-A", "hindsight", "worker", "--loglevel", "INFO",
                       "--concurrency", str(args.worker_concurrency)],
            "beat": [python, "-m", "celery", "-A", "hindsight", "beat", "--loglevel", "INFO"],
        }
        for name, command in commands.items():
            _log(f"starting {name}: {' '.join(command[1:4])} …")
            children.append(subprocess.Popen(command, env=env, cwd=PROJECT_DIR,
                                             start_new_session=True))
        _log(f"serving on http://{bind} (Ctrl-C stops everything)")
        while not stopping:
            for child in children:
                if child.poll() is not None:
                    _log(f"a process exited with code {child.returncode}; stopping")
                    stopping = True
            time.sleep(0.5)
        return 0
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        for server in reversed(servers):
            server.stop()
        _log("stopped")


def exports(data_dir: Path) -> str:
    """Shell ``export`` lines for the servers a running ``make run`` started (servers.json)."""
    path = data_dir / "servers.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: start the service with `make run` first")
    servers = json.loads(path.read_text())
    lines = []
    for variable, key in (("HINDSIGHT_API_DATABASE_URL", "database_url"),
                          ("HINDSIGHT_API_REDIS_URL", "redis_url")):
        if servers.get(key):
            lines.append(f"export {variable}={shlex.quote(servers[key])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hindsight.devstack")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="run API, worker and beat (embedded servers if unset)")
    run_parser.add_argument("--web-workers", type=int, default=2)
    run_parser.add_argument("--worker-concurrency", type=int, default=4)
    sub.add_parser("env", help="print export lines for the servers `run` started")
    args = parser.parse_args(argv)
    if args.command == "env":
        data_dir = Path(os.environ.get("HINDSIGHT_DEVSTACK_DATA_DIR") or PROJECT_DIR / ".devdata")
        print(exports(data_dir))
        return 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
