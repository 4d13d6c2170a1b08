"""Benchmark of the operations engine (run on demand; not a test).

Measures, with real Celery worker processes:

1. submit → completed latency of a no-op job (p50 / p95 / max), one job at a time, from the
   database's own timestamps (``completed_at - created_at``);
2. throughput with 1, 2 and 4 worker processes (``-c 1`` each) on jobs that wait 200 ms (an
   LLM-like wait), as jobs/s and as a ratio to the ideal (``jobs × wait / workers``).

By default it starts its own embedded PostgreSQL and Valkey on free ports (throw-away data) and
runs the migrations; ``--database-url`` / ``--redis-url`` use existing servers instead (the
database must be migrated, and the benchmark writes a ``bench-ops`` bank into it).

    .venv/bin/python -m bench.bench_operations
    .venv/bin/python -m bench.bench_operations --workers 1,2,4 --throughput-jobs 48 --latency-jobs 100
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from typing import Any

from bench.harness import argument_parser, bench_stack, percentile, start_worker


def start_workers(stack: Any, count: int) -> None:
    """``count`` ``celery worker -c 1`` processes on the benchmark's queue, answering a ping (at
    WARNING they log no "ready" line)."""
    for i in range(count):
        start_worker(stack, concurrency=1, name=f"bench{count}-{i}")
    stack.wait_workers_ready(120)


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
        "p50_ms": percentile(latencies, 0.50),
        "p95_ms": percentile(latencies, 0.95),
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
    parser = argument_parser("bench.bench_operations", __doc__)
    parser.add_argument("--database-url")
    parser.add_argument("--redis-url")
    parser.add_argument("--latency-jobs", type=int, default=100)
    parser.add_argument("--throughput-jobs", type=int, default=48)
    parser.add_argument("--wait", type=float, default=0.2)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()

    stack = bench_stack("bench-ops", database_url=args.database_url, redis_url=args.redis_url,
                        env={"HINDSIGHT_API_EXTRA_HANDLER_MODULES": "operations.testing_handlers"})
    try:
        stack.start_servers()
        args.database_url, args.redis_url = stack.database_url, stack.redis_url
        stack.use_here()
        from hindsight.banks.services import bank_ensure
        from operations.testing_handlers import ensure_tables

        if stack.pg is not None:
            stack.migrate(verbosity=0)
        ensure_tables()
        bank_ensure(bank_id="bench-ops")
        print(f"# cores: {os.cpu_count()}  database: {args.database_url}  broker: {args.redis_url}")

        start_workers(stack, 1)
        bench_latency(5)  # warm-up: imports, connections
        lat = bench_latency(args.latency_jobs)
        print(f"latency no-op job, 1 worker, n={args.latency_jobs}: "
              f"p50 {lat['p50_ms']:.1f} ms  p95 {lat['p95_ms']:.1f} ms  "
              f"max {lat['max_ms']:.1f} ms  mean {lat['mean_ms']:.1f} ms")
        stack.stop_workers()

        for count in [int(c) for c in args.workers.split(",") if c.strip()]:
            start_workers(stack, count)
            bench_throughput(count * 2, 0.0, count)  # warm-up
            tp = bench_throughput(args.throughput_jobs, args.wait, count)
            print(f"throughput {args.throughput_jobs} jobs x {args.wait * 1000:.0f} ms, "
                  f"{count} worker process(es): {tp['jobs_per_s']:.2f} jobs/s  "
                  f"elapsed {tp['elapsed_s']:.2f} s  ideal {tp['ideal_s']:.2f} s  "
                  f"ratio to ideal {tp['ratio_to_ideal']:.2f}")
            stack.stop_workers()
    finally:
        from django.db import connections

        connections.close_all()
        stack.stop()
        stack.remove_data()


if __name__ == "__main__":
    main()
