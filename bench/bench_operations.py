"""Benchmark of the operations engine (run on demand; not a test).

Measures, with real Celery worker processes:

1. submit → completed latency of a no-op job (p50 / p95 / max), one job at a time, from the
   database's own timestamps (``completed_at - created_at``);
2. throughput with 1, 2 and 4 worker processes (``-c 1`` each) on jobs that wait 200 ms (an
   LLM-like wait), as jobs/s and as a ratio to the ideal (``jobs × wait / workers``).

By default it starts its own embedded PostgreSQL and Valkey on free ports (throw-away data) and
runs the migrations; ``--database-url`` / ``--redis-url`` use existing servers instead (the
database must be migrated, and the benchmark writes a ``bench-ops`` bank into it).

    .venv/bin/python bench/bench_operations.py
    .venv/bin/python bench/bench_operations.py --workers 1,2,4 --throughput-jobs 48 --latency-jobs 100
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class Workers:
    """N ``celery worker -c 1`` processes on the benchmark's queue."""

    def __init__(self, count: int, env: dict[str, str], logdir: Path):
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        for i in range(count):
            log = logdir / f"worker-{count}-{i}.log"
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "hindsight", "worker", "-Q",
                 env["HINDSIGHT_API_TASK_QUEUE"], "-c", "1", "-P", "prefork",
                 "-n", f"bench{count}-{i}@%h", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "-l", "WARNING"],
                cwd=REPO, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                start_new_session=True,
            ))
        deadline = time.monotonic() + 120
        # -l WARNING hides the "ready" line: wait until each worker answers a ping instead.
        from hindsight.celery import app

        while time.monotonic() < deadline:
            replies = app.control.ping(timeout=1.0) or []
            if len(replies) >= count:
                return
            for proc, log in zip(self.procs, self.logs):
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited: {log.read_text()[-2000:]}")
        raise RuntimeError("workers not ready in 120 s")

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_completed(op_ids: list[uuid.UUID], timeout: float) -> None:
    from operations.models import COMPLETED, Operation

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = Operation.objects.filter(id__in=op_ids, status=COMPLETED).count()
        if done == len(op_ids):
            return
        bad = Operation.objects.filter(id__in=op_ids, status__in=["failed", "cancelled"])
        if bad.exists():
            raise RuntimeError(f"jobs failed: {list(bad.values('id', 'error_message'))}")
        time.sleep(0.005 if len(op_ids) == 1 else 0.05)
    raise RuntimeError(f"jobs not completed within {timeout}s")


def bench_latency(n: int) -> dict[str, float]:
    from operations.models import Operation
    from operations.queue import operation_submit

    latencies = []
    for i in range(n):
        op = operation_submit(bank_id="bench-ops", operation_type="test.job",
                              dedupe_key=f"lat:{i}", payload={}).operation
        _wait_completed([op.id], timeout=30)
        row = Operation.objects.values("created_at", "completed_at").get(id=op.id)
        latencies.append((row["completed_at"] - row["created_at"]).total_seconds() * 1000)
    return {
        "p50_ms": _percentile(latencies, 0.50),
        "p95_ms": _percentile(latencies, 0.95),
        "max_ms": max(latencies),
        "mean_ms": statistics.fmean(latencies),
    }


def bench_throughput(jobs: int, wait: float, workers: int) -> dict[str, float]:
    from django.db.models import Max, Min

    from operations.models import Operation
    from operations.queue import operation_submit

    tag = uuid.uuid4().hex[:6]
    ids = [
        operation_submit(bank_id="bench-ops", operation_type="test.job",
                         dedupe_key=f"tp:{tag}:{i}", payload={"sleep": wait}).operation.id
        for i in range(jobs)
    ]
    _wait_completed(ids, timeout=jobs * wait * 4 + 60)
    span = Operation.objects.filter(id__in=ids).aggregate(
        start=Min("created_at"), end=Max("completed_at"))
    elapsed = (span["end"] - span["start"]).total_seconds()
    ideal = jobs * wait / workers
    return {"elapsed_s": elapsed, "jobs_per_s": jobs / elapsed, "ideal_s": ideal,
            "ratio_to_ideal": ideal / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url")
    parser.add_argument("--redis-url")
    parser.add_argument("--latency-jobs", type=int, default=100)
    parser.add_argument("--throughput-jobs", type=int, default=48)
    parser.add_argument("--wait", type=float, default=0.2)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-ops-"))
    servers = []
    base: Path | None = None
    if not args.database_url or not args.redis_url:
        from hindsight.devstack.servers import (
            EmbeddedPostgres,
            EmbeddedValkey,
            free_port,
            reachable_base,
        )

        base = reachable_base(scratch)
        if not args.database_url:
            pg = EmbeddedPostgres(base / "pg", free_port(), durable=False)
            pg.start()
            servers.append(pg)
            args.database_url = pg.url
        if not args.redis_url:
            valkey = EmbeddedValkey(base / "valkey", free_port(), durable=False)
            valkey.start()
            servers.append(valkey)
            args.redis_url = valkey.url

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hindsight.settings",
        "HINDSIGHT_API_DATABASE_URL": args.database_url,
        "HINDSIGHT_API_REDIS_URL": args.redis_url,
        "HINDSIGHT_API_TASK_QUEUE": f"bench-ops-{uuid.uuid4().hex[:6]}",
        "HINDSIGHT_API_EXTRA_HANDLER_MODULES": "operations.testing_handlers",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from hindsight.banks.services import bank_ensure
    from operations.testing_handlers import ensure_tables

    workers: Workers | None = None
    try:
        if servers and servers[0].__class__.__name__ == "EmbeddedPostgres":
            call_command("migrate", verbosity=0)
        ensure_tables()
        bank_ensure(bank_id="bench-ops")
        print(f"# cores: {os.cpu_count()}  database: {args.database_url}  broker: {args.redis_url}")

        workers = Workers(1, env, scratch)
        bench_latency(5)  # warm-up: imports, connections
        lat = bench_latency(args.latency_jobs)
        print(f"latency no-op job, 1 worker, n={args.latency_jobs}: "
              f"p50 {lat['p50_ms']:.1f} ms  p95 {lat['p95_ms']:.1f} ms  "
              f"max {lat['max_ms']:.1f} ms  mean {lat['mean_ms']:.1f} ms")
        workers.stop()
        workers = None

        for count in [int(c) for c in args.workers.split(",") if c.strip()]:
            workers = Workers(count, env, scratch)
            bench_throughput(count * 2, 0.0, count)  # warm-up
            tp = bench_throughput(args.throughput_jobs, args.wait, count)
            print(f"throughput {args.throughput_jobs} jobs x {args.wait * 1000:.0f} ms, "
                  f"{count} worker process(es): {tp['jobs_per_s']:.2f} jobs/s  "
                  f"elapsed {tp['elapsed_s']:.2f} s  ideal {tp['ideal_s']:.2f} s  "
                  f"ratio to ideal {tp['ratio_to_ideal']:.2f}")
            workers.stop()
            workers = None
    finally:
        if workers is not None:
            workers.stop()
        from django.db import connections

        connections.close_all()
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
