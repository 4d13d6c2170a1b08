"""Scaling (on demand; not a test): refresh throughput per worker slots, and the queue's queries
as the operations table grows.

1. Refresh throughput with the scripted LLM answering every call in ``--llm-ms`` (200) ms, for
   1, 2, 4, 8 worker processes of one prefork child each and for one process with a threads
   pool of 8: ``--per-slot`` fresh models per worker slot are created over the HTTP API (each
   creation queues its first refresh), timed from the first POST to the last completion.
   Ideal = LLM calls made × the LLM's answer time / slots (the LLM is what a refresh waits on);
   the ratio is ideal / elapsed (1.0 = every slot always waiting on the LLM).
2. The same at scale: ``--big-models`` (1,000) models over ``--big-banks`` (10) banks, with
   ``--big-workers`` (4) processes.
3. Queue claim latency as ``operations_operation`` grows to each of ``--table-sizes`` rows
   (finished operations over 10 banks, inserted by SQL): submit → claim timed in-process
   (p50/max over ``--claims`` claims), and ``EXPLAIN ANALYZE`` of every statement of submit,
   claim, the key's next pending, the parked-release and the recovery sweep — index scans, not
   sequential scans.

    .venv/bin/python -m bench.scaling
    .venv/bin/python -m bench.scaling --workers 1,2,4 --per-slot 4 --big-models 200 --table-sizes 0,100000
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.chaos_stack import ChaosLLM, Stack
from bench.harness import argument_parser, call_json


def _send(stack: Stack, method: str, path: str, body: Any = None) -> Any:
    return call_json(stack.base_url, method, path, body, timeout=60)


def throughput(stack: Stack, llm: ChaosLLM, *, models: int, banks: int, slots: int,
               label: str, llm_seconds: float) -> dict[str, Any]:
    import psycopg

    tag = uuid.uuid4().hex[:6]
    bank_ids = [f"scale-{tag}-{b}" for b in range(banks)]
    for bank in bank_ids:
        _send(stack, "PUT", f"/v1/default/banks/{bank}", {"name": bank})
        _send(stack, "POST", f"/v1/default/banks/{bank}/memories", {"items": [
            {"content": f"The team of {bank} ships weekly.", "tags": ["team"],
             "strategy": "verbatim"}]})
    before = len(llm.server.requests)
    started = time.monotonic()
    op_ids = []
    for i in range(models):
        bank = bank_ids[i % banks]
        mm_id = f"m-{tag}-{i}"
        answer = _send(stack, "POST", f"/v1/default/banks/{bank}/mental-models",
                       {"id": mm_id, "name": mm_id, "tags": ["team"],
                        "source_query": f"How does the team work? [chaos:{mm_id}]"})
        op_ids.append(answer["operation_id"])
    with psycopg.connect(stack.database_url) as conn:
        while True:
            (left,) = conn.execute(
                "SELECT count(*) FROM operations_operation WHERE id = ANY(%s::uuid[]) "
                "AND status NOT IN ('completed', 'failed', 'cancelled')", [op_ids]).fetchone()
            if left == 0:
                break
            time.sleep(0.1)
        (failed,) = conn.execute("SELECT count(*) FROM operations_operation WHERE id = "
                                 "ANY(%s::uuid[]) AND status <> 'completed'", [op_ids]).fetchone()
    elapsed = time.monotonic() - started
    calls = len(llm.server.requests) - before
    ideal = calls * llm_seconds / slots
    return {"config": label, "slots": slots, "models": models, "banks": banks,
            "not_completed": failed, "llm_calls": calls,
            "calls_per_refresh": round(calls / models, 2), "elapsed_s": round(elapsed, 1),
            "refreshes_per_s": round(models / elapsed, 2), "ideal_s": round(ideal, 1),
            "ratio_to_ideal": round(ideal / elapsed, 2)}


def claim_latency(database_url: str, sizes: list[int], claims: int) -> list[dict[str, Any]]:
    os.environ["HINDSIGHT_API_DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from hindsight.banks.services import bank_ensure
    from operations.leases import next_pending_of_key, operation_claim
    from operations.queue import operation_submit, operations_release_due
    from operations.recovery import operations_recover

    for b in range(10):
        bank_ensure(bank_id=f"queue-{b}")
    out = []
    for size in sizes:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM operations_operation")
            (have,) = cursor.fetchone()
            started = time.monotonic()
            if size > have:
                cursor.execute(
                    "INSERT INTO operations_operation (id, bank_id, operation_type, dedupe_key, "
                    "status, automatic, payload, retry_count, result_metadata, fence, created_at, "
                    "updated_at, completed_at) SELECT gen_random_uuid(), 'queue-' || mod(g, 10), "
                    "'refresh_mental_model', 'mm:queue-' || mod(g, 10) || ':m' || mod(g, 5000), "
                    "(ARRAY['completed','completed','completed','failed','cancelled'])[1 + mod(g, 5)],"
                    " false, '{}', 0, '{}', 0, now() - (g || ' seconds')::interval, "
                    "now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval "
                    "FROM generate_series(%s, %s) g", [have + 1, size])
                cursor.execute("ANALYZE operations_operation")
            seeded = time.monotonic() - started
        timings = []
        plans: dict[str, list[str]] = {}
        for i in range(claims):
            key = f"mm:queue-{i % 10}:claim-{uuid.uuid4().hex[:8]}"
            with CaptureQueriesContext(connection) as submit_q:
                op = operation_submit(bank_id=f"queue-{i % 10}", operation_type="test.job",
                                      dedupe_key=key, payload={}).operation
            t0 = time.perf_counter()
            with CaptureQueriesContext(connection) as claim_q:
                claimed = operation_claim(operation_id=op.id, holder="bench:0")
            timings.append((time.perf_counter() - t0) * 1000)
            assert claimed is not None and not isinstance(claimed, str), claimed
            with CaptureQueriesContext(connection) as next_q:
                next_pending_of_key(key=key)
            if i == 0:
                with CaptureQueriesContext(connection) as sweep_q:
                    operations_release_due()
                    operations_recover()
                plans = _plans(connection, {"submit": submit_q, "claim": claim_q,
                                            "next pending of key": next_q,
                                            "release due + recovery sweep": sweep_q})
            with connection.cursor() as cursor:
                cursor.execute("UPDATE operations_operation SET status = 'completed', "
                               "completed_at = now() WHERE id = %s", [op.id])
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM operations_operation")
            (rows,) = cursor.fetchone()
        out.append({"rows": rows, "seed_s": round(seeded, 1),
                    "claim_ms_p50": round(statistics.median(timings), 2),
                    "claim_ms_max": round(max(timings), 2), "plans": plans})
    return out


def _plans(connection: Any, captured: dict[str, Any]) -> dict[str, list[str]]:
    """The scan nodes of each statement's plan (EXPLAIN ANALYZE inside a rolled-back savepoint)."""
    from django.db import transaction

    out: dict[str, list[str]] = {}
    for label, ctx in captured.items():
        lines = []
        for query in ctx.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "WITH",
                                                     "DELETE")):
                continue
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql)
                    plan = [row[0] for row in cursor.fetchall()]
                    raise _Rollback
            except _Rollback:
                pass
            except Exception as exc:  # a statement that cannot be re-run alone
                plan = [f"(not explained: {type(exc).__name__})"]
            scans = [p.strip() for p in plan if "Scan" in p or "not explained" in p]
            lines.append(f"{sql[:70]}… → " + "; ".join(scans or ["(no scan)"]))
        out[label] = lines
    return out


class _Rollback(Exception):
    pass


def main() -> int:
    parser = argument_parser("bench.scaling", __doc__)
    parser.add_argument("--llm-ms", type=float, default=200)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--threads", type=int, default=8, help="threads pool size (0: skip)")
    parser.add_argument("--per-slot", type=int, default=6)
    parser.add_argument("--big-models", type=int, default=1000)
    parser.add_argument("--big-banks", type=int, default=10)
    parser.add_argument("--big-workers", type=int, default=4)
    parser.add_argument("--table-sizes", default="0,100000,1000000")
    parser.add_argument("--claims", type=int, default=50)
    args = parser.parse_args()

    seconds = args.llm_ms / 1000
    scratch = Path(tempfile.mkdtemp(prefix="scaling-"))
    llm = ChaosLLM(delay=(seconds, seconds))
    stack = Stack(scratch, concurrency=1, llm=llm)
    os.environ["HINDSIGHT_API_EXTRA_HANDLER_MODULES"] = "operations.testing_handlers"
    stack.env["HINDSIGHT_API_EXTRA_HANDLER_MODULES"] = "operations.testing_handlers"
    rows = []
    print(f"# cores: {os.cpu_count()}  scripted LLM {args.llm_ms:.0f} ms per call")
    try:
        stack.start(workers=0)
        configs: list[tuple[str, int, int, str]] = [
            (f"{n} process(es) x prefork 1", n, 1, "prefork")
            for n in [int(w) for w in args.workers.split(",") if w.strip()]]
        if args.threads:
            configs.append((f"1 process x threads {args.threads}", 1, args.threads, "threads"))
        for label, processes, concurrency, pool in configs:
            stack.concurrency, stack.pool = concurrency, pool
            for _ in range(processes):
                stack.start_worker()
            stack.wait_workers_ready()
            slots = processes * concurrency
            throughput(stack, llm, models=slots, banks=1, slots=slots, label="warm-up",
                       llm_seconds=seconds)
            row = throughput(stack, llm, models=args.per_slot * slots, banks=1, slots=slots,
                             label=label, llm_seconds=seconds)
            rows.append(row)
            print(json.dumps(row), flush=True)
            stack.stop_workers()
        if args.big_models:
            stack.concurrency, stack.pool = 1, "prefork"
            for _ in range(args.big_workers):
                stack.start_worker()
            stack.wait_workers_ready()
            row = throughput(stack, llm, models=args.big_models, banks=args.big_banks,
                             slots=args.big_workers,
                             label=f"{args.big_models} models / {args.big_banks} banks, "
                                   f"{args.big_workers} x prefork 1", llm_seconds=seconds)
            rows.append(row)
            print(json.dumps(row), flush=True)
            stack.stop_workers()
        sizes = [int(s) for s in args.table_sizes.split(",") if s.strip()]
        print("\n## queue claim latency as operations_operation grows")
        for entry in claim_latency(stack.database_url, sizes, args.claims):
            print(f"rows {entry['rows']:>9,}: claim p50 {entry['claim_ms_p50']} ms  "
                  f"max {entry['claim_ms_max']} ms  (seeded in {entry['seed_s']} s)")
            for label, lines in entry["plans"].items():
                print(f"  {label}:")
                for line in lines:
                    print(f"    {line}")
        print("\n## refresh throughput")
        print(f"{'configuration':42s} {'slots':>5s} {'models':>6s} {'calls/refresh':>13s} "
              f"{'elapsed s':>9s} {'ideal s':>8s} {'ratio':>6s}")
        for row in rows:
            print(f"{row['config']:42s} {row['slots']:5d} {row['models']:6d} "
                  f"{row['calls_per_refresh']:13.2f} {row['elapsed_s']:9.1f} "
                  f"{row['ideal_s']:8.1f} {row['ratio_to_ideal']:6.2f}")
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        stack.stop()
        llm.server.stop()


if __name__ == "__main__":
    sys.exit(main())
