"""Mental-models benchmark (run on demand; not a test).

Measures, over HTTP against a real API process and a real Celery worker:

1. list latency at each detail level (``metadata``, ``content``, ``full``) for pages of 100 and
   1,000 models, p50 / p95 / max, with the SQL query count of one such request (counted
   in-process with Django's ``CaptureQueriesContext`` on the same database: the count does not
   depend on the process that runs the view);
2. refresh request → operation ``completed`` latency (client clock, ``POST …/refresh`` to the
   poll that sees ``completed``), with the scripted OpenAI-compatible LLM answering at once and
   after ``--llm-delay`` ms per call (default 0 and 200).

Workload: ``--memories`` memories (default 100,000) seeded by ``COPY`` with synthetic unit
vectors (``bench.bench_memory``'s seeder) and ``--models`` mental models (default 1,000)
inserted in one batch with random tags, tag modes and watermarks (a third never refreshed), so
``is_stale`` has real scope queries to answer.

By default it starts its own embedded PostgreSQL and Valkey on free ports (throw-away data),
migrates, starts the scripted LLM server in this process, the API under gunicorn and one
Celery worker (``-c 1``) pointed at that LLM. ``--database-url`` / ``--redis-url`` reuse
existing servers (migrated; the benchmark writes a ``bench-mm-*`` bank).

    .venv/bin/python -m bench.bench_mental_models
    .venv/bin/python -m bench.bench_mental_models --memories 10000 --models 200 --refreshes 10
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
import urllib.request
import uuid
from typing import Any

import psycopg

from bench.bench_memory import seed as seed_memories
from bench.harness import (
    FINAL,
    MODES,
    TAGS,
    argument_parser,
    bench_stack,
    call_json,
    spread_ms,
    start_api_and_worker,
)
from fakes.llm_server import Reply, ScriptedLLMServer, reflect_reply


def seed_models(database_url: str, bank_id: str, count: int, rng: random.Random) -> None:
    """``count`` models with random scopes; watermarks null, old, or past every memory."""
    from mentalmodels.triggers import trigger_normalize

    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        cur.execute("SELECT min(updated_at), max(updated_at) FROM banks_memoryunit WHERE bank_id=%s",
                    [bank_id])
        low, high = cur.fetchone()
        rows = []
        for i in range(count):
            kind = i % 3
            watermark = None if kind == 0 else (low + (high - low) / 2 if kind == 1 else high)
            trigger = trigger_normalize({"tags_match": rng.choice(MODES)})
            content = f"## Model {i}\n\n" + " ".join(rng.sample(TAGS, 3)) * 20
            rows.append((bank_id, f"bench-{i:05d}", f"Model {i}", f"What about topic {i}?",
                         content, rng.sample(TAGS, rng.randint(0, 2)), 2048,
                         json.dumps(trigger), watermark, watermark,
                         json.dumps({"text": content, "outcome": "content_written",
                                     "based_on": {"world": [{"id": str(uuid.uuid4()),
                                                             "text": "x" * 200}] * 20},
                                     "mental_models": []})))
        with cur.copy(
            "COPY mentalmodels_mentalmodel (bank_id, mental_model_id, name, source_query, content, "
            "tags, max_tokens, trigger, last_refreshed_at, last_memory_seen_at, reflect_response, "
            "embedding_model, embedding_content_hash, last_refresh_failure_transient, "
            "refresh_failure_streak) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row([*row, "", "", False, 0])
        conn.commit()


def count_list_queries(bank_id: str, detail: str, limit: int) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/v1/default/banks/{bank_id}/mental-models?detail={detail}&limit={limit}")
    assert response.status_code == 200, response.content[:300]
    return len(captured.captured_queries)


def bench_list(base: str, bank_id: str, runs: int) -> None:
    print("\n## list latency (HTTP) and SQL queries per request")
    for limit in (100, 1000):
        for detail in ("metadata", "content", "full"):
            path = f"/v1/default/banks/{bank_id}/mental-models?detail={detail}&limit={limit}"
            call_json(base, "GET", path)  # warm
            times = []
            size = 0
            for _ in range(runs):
                started = time.perf_counter()
                request = urllib.request.Request(base + path)
                with urllib.request.urlopen(request, timeout=600) as response:
                    body = response.read()
                times.append((time.perf_counter() - started) * 1000)
                size = len(body)
            queries = count_list_queries(bank_id, detail, limit)
            print(f"limit {limit:4d} detail {detail:8s}: {spread_ms(times)}  "
                  f"{queries} SQL queries  {size / 1024:8.0f} KiB")


def bench_refresh(base: str, bank_id: str, server: Any, delay_ms: int, n: int) -> None:
    def respond(body: dict) -> Any:
        reply = reflect_reply(body, f"## Doc\n\n{uuid.uuid4().hex}", first=3)
        return Reply.delay(delay_ms / 1000, reply) if delay_ms else reply

    server.reset()
    server.respond_with(respond)
    times, calls = [], []
    for i in range(n):
        mm_id = f"refresh-{delay_ms}-{i}"
        created = call_json(base, "POST", f"/v1/default/banks/{bank_id}/mental-models",
                        {"id": mm_id, "name": mm_id, "source_query": "How does the team work?",
                         "tags": ["team"]})
        _wait(base, bank_id, created["operation_id"])
        before = len(server.requests)
        started = time.perf_counter()
        op = call_json(base, "POST", f"/v1/default/banks/{bank_id}/mental-models/{mm_id}/refresh")
        status = _wait(base, bank_id, op["operation_id"])
        times.append((time.perf_counter() - started) * 1000)
        calls.append(len(server.requests) - before)
        assert status["status"] == "completed", status
    print(f"refresh → completed, LLM {delay_ms:3d} ms/call: {spread_ms(times)}  "
          f"({statistics.fmean(calls):.1f} LLM calls per refresh, n={n})")


def _wait(base: str, bank_id: str, op_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op = call_json(base, "GET", f"/v1/default/banks/{bank_id}/operations/{op_id}")
        if op["status"] in FINAL:
            return op
        time.sleep(0.01)
    raise RuntimeError(f"operation {op_id} not finished in {timeout}s")


def main() -> None:
    parser = argument_parser("bench.bench_mental_models", __doc__)
    parser.add_argument("--database-url")
    parser.add_argument("--redis-url")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=1_000)
    parser.add_argument("--list-runs", type=int, default=20)
    parser.add_argument("--refreshes", type=int, default=20)
    parser.add_argument("--llm-delay", default="0,200", help="ms per LLM call, comma separated")
    parser.add_argument("--random-seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.random_seed)

    llm = ScriptedLLMServer().start()
    stack = bench_stack("bench-mm", llm=llm, database_url=args.database_url,
                        redis_url=args.redis_url)
    try:
        start_api_and_worker(stack, concurrency=1, name="bench-mm")
        args.database_url = stack.database_url
        base = stack.base_url

        bank_id = f"bench-mm-{uuid.uuid4().hex[:6]}"
        call_json(base, "PUT", f"/v1/default/banks/{bank_id}", {"name": "mental-model benchmark"})
        print(f"# cores: {os.cpu_count()}  bank {bank_id}  memories {args.memories:,}  "
              f"models {args.models:,}")
        own_database = stack.pg is not None
        if own_database:
            # A throw-away database: build the HNSW index once after the COPY instead of
            # maintaining it row by row (minutes instead of tens of minutes on 2 cores).
            with psycopg.connect(args.database_url) as conn:
                conn.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        seconds = seed_memories(args.database_url, bank_id, args.memories, 384, rng)
        print(f"seeded {args.memories:,} memories by COPY in {seconds:.1f} s")
        if own_database:
            started = time.monotonic()
            with psycopg.connect(args.database_url) as conn:
                conn.execute(
                    "CREATE INDEX memory_embedding_hnsw ON banks_memoryunit USING hnsw "
                    "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
                )
            print(f"built the HNSW index in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        seed_models(args.database_url, bank_id, args.models, rng)
        print(f"seeded {args.models:,} models in {time.monotonic() - started:.1f} s")
        with psycopg.connect(args.database_url) as conn:
            conn.execute("ANALYZE")

        bench_list(base, bank_id, args.list_runs)
        print("\n## refresh request → completed (1 worker)")
        for delay in [int(d) for d in args.llm_delay.split(",") if d.strip()]:
            bench_refresh(base, bank_id, llm, delay, args.refreshes)
    finally:
        llm.stop()
        from django.db import connections

        connections.close_all()
        stack.stop()


if __name__ == "__main__":
    main()
