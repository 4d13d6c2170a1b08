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
vectors (``bench/bench_memory.py``'s seeder) and ``--models`` mental models (default 1,000)
inserted in one batch with random tags, tag modes and watermarks (a third never refreshed), so
``is_stale`` has real scope queries to answer.

By default it starts its own embedded PostgreSQL and Valkey on free ports (throw-away data),
migrates, starts the scripted LLM server in this process, the API under gunicorn and one
Celery worker (``-c 1``) pointed at that LLM. ``--database-url`` / ``--redis-url`` reuse
existing servers (migrated; the benchmark writes a ``bench-mm-*`` bank).

    .venv/bin/python bench/bench_mental_models.py
    .venv/bin/python bench/bench_mental_models.py --memories 10000 --models 200 --refreshes 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TAGS = ["team", "ops", "eng", "sales", "hr", "user:alice", "user:bob", "project:x", "project:y"]
MODES = ["any", "all", "any_strict", "all_strict", "exact", None]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _summary(values: list[float]) -> str:
    return (f"p50 {_percentile(values, 0.5):8.1f} ms  p95 {_percentile(values, 0.95):8.1f} ms  "
            f"max {max(values):8.1f} ms")


def _call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read() or b"null")


def _load_seeder():
    spec = importlib.util.spec_from_file_location("bench_memory", REPO / "bench" / "bench_memory.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module.seed


def seed_models(database_url: str, bank_id: str, count: int, rng: random.Random) -> None:
    """``count`` models with random scopes; watermarks null, old, or past every memory."""
    import psycopg

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
            _call(base, "GET", path)  # warm
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
            print(f"limit {limit:4d} detail {detail:8s}: {_summary(times)}  "
                  f"{queries} SQL queries  {size / 1024:8.0f} KiB")


def bench_refresh(base: str, bank_id: str, server: Any, delay_ms: int, n: int) -> None:
    from fakes.llm_server import Reply

    def respond(body: dict) -> Any:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            reply = Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        else:
            reply = Reply.tool_calls([("done", {"answer": f"## Doc\n\n{uuid.uuid4().hex}",
                                                "memory_ids": _first_ids(body),
                                                "mental_model_ids": []})])
        return Reply.delay(delay_ms / 1000, reply) if delay_ms else reply

    server.reset()
    server.respond_with(respond)
    times, calls = [], []
    for i in range(n):
        mm_id = f"refresh-{delay_ms}-{i}"
        created = _call(base, "POST", f"/v1/default/banks/{bank_id}/mental-models",
                        {"id": mm_id, "name": mm_id, "source_query": "How does the team work?",
                         "tags": ["team"]})
        _wait(base, bank_id, created["operation_id"])
        before = len(server.requests)
        started = time.perf_counter()
        op = _call(base, "POST", f"/v1/default/banks/{bank_id}/mental-models/{mm_id}/refresh")
        status = _wait(base, bank_id, op["operation_id"])
        times.append((time.perf_counter() - started) * 1000)
        calls.append(len(server.requests) - before)
        assert status["status"] == "completed", status
    print(f"refresh → completed, LLM {delay_ms:3d} ms/call: {_summary(times)}  "
          f"({statistics.fmean(calls):.1f} LLM calls per refresh, n={n})")


def _first_ids(body: dict) -> list[str]:
    ids: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            try:
                payload = json.loads(message["content"])
            except ValueError:
                continue
            for key in ("facts", "observations"):
                ids += [item["id"] for item in payload.get(key, [])[:3]]
    return ids


def _wait(base: str, bank_id: str, op_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op = _call(base, "GET", f"/v1/default/banks/{bank_id}/operations/{op_id}")
        if op["status"] in ("completed", "failed", "cancelled"):
            return op
        time.sleep(0.01)
    raise RuntimeError(f"operation {op_id} not finished in {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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

    from fakes.llm_server import ScriptedLLMServer
    from hindsight.devstack.stack import Stack, openai_compatible_env

    llm = ScriptedLLMServer().start()
    queue = f"bench-mm-{uuid.uuid4().hex[:6]}"
    stack = Stack(Path(tempfile.mkdtemp(prefix="bench-mm-")), database_url=args.database_url,
                  redis_url=args.redis_url, env={
                      "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
                      "HINDSIGHT_API_TASK_QUEUE": queue,
                      # The scripted server's pseudo-embeddings: the local model would cost
                      # minutes to load and warm on every process and is not what this measures.
                      **openai_compatible_env(llm.base_url, api_key="bench"),
                      "HINDSIGHT_API_LLM_MAX_RETRIES": "0",
                  })
    try:
        stack.start_measured()
        args.database_url = stack.database_url
        base = stack.base_url
        # The pool the settings name (as before: -P prefork without one named is "no choice").
        stack.start_worker(queue=queue, concurrency=1, name="bench-mm", log_level="WARNING")
        stack.wait_healthy(60)

        bank_id = f"bench-mm-{uuid.uuid4().hex[:6]}"
        _call(base, "PUT", f"/v1/default/banks/{bank_id}", {"name": "mental-model benchmark"})
        print(f"# cores: {os.cpu_count()}  bank {bank_id}  memories {args.memories:,}  "
              f"models {args.models:,}")
        own_database = stack.pg is not None
        if own_database:
            # A throw-away database: build the HNSW index once after the COPY instead of
            # maintaining it row by row (minutes instead of tens of minutes on 2 cores).
            with __import__("psycopg").connect(args.database_url) as conn:
                conn.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        seconds = _load_seeder()(args.database_url, bank_id, args.memories, 384, rng)
        print(f"seeded {args.memories:,} memories by COPY in {seconds:.1f} s")
        if own_database:
            started = time.monotonic()
            with __import__("psycopg").connect(args.database_url) as conn:
                conn.execute(
                    "CREATE INDEX memory_embedding_hnsw ON banks_memoryunit USING hnsw "
                    "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
                )
            print(f"built the HNSW index in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        seed_models(args.database_url, bank_id, args.models, rng)
        print(f"seeded {args.models:,} models in {time.monotonic() - started:.1f} s")
        with __import__("psycopg").connect(args.database_url) as conn:
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
