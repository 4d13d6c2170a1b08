"""Hot-path benchmark (run on demand; not a test): refresh, list, recall and retain, with SQL
query counts, query plans and a profile — and, with ``--compare``, the same workload against an
older checkout in the same run, so the ratios compare like with like on a noisy machine.

    .venv/bin/python -m bench.bench_hotpaths                         # this checkout only
    git clone -q --shared . /tmp/before && git -C /tmp/before checkout -q <commit>
    .venv/bin/python -m bench.bench_hotpaths --compare /tmp/before   # before, then after

One embedded PostgreSQL (pgvector) and Valkey on free ports, one scripted OpenAI-compatible LLM
answering at once (``fakes.llm_server``). Each side gets its own database: the "before" database
is migrated by the older checkout and seeded by ``COPY`` (synthetic unit vectors, HNSW built once
after the load), then cloned (``CREATE DATABASE … TEMPLATE``) for the "after" side, which
applies its own migrations on top. Each side then runs in a subprocess started in its checkout,
so that checkout's code is the one imported (same interpreter, same packages; ``bench`` itself
comes from this checkout, unless the other one has it as a package too), in-process through
Django's test client
(URL routing, middleware, DRF, JSON rendering — everything but the socket), with one Celery
worker subprocess for refreshes:

1. refresh request → ``completed`` at a 0 ms LLM, split by stage from the operation row and the
   refresh trace (submit, queue → claim, pipeline: LLM calls, tool calls, the rest; completion;
   the time outside the pipeline split by the row's clocks: commit → dispatch stamp → claim →
   pipeline start, and persist), the bench polling the row every millisecond,
   and the SQL queries of one refresh run in-process through ``operations.engine``;
2. ``GET …/mental-models`` at 100 and 1,000 models per detail level;
3. recall at each ``--memories`` size (a bank of that size; all banks share the table and its
   indexes, as in production) p50/p95, the statements' plans (EXPLAIN ANALYZE);
4. retain throughput: ``--retain`` facts in sync requests of ``--batch``, once with LLM
   extraction (one fact per item, the LLM at 0 ms) and once verbatim (no LLM), the local
   embedder in both; and one sync retain of 50 items with the LLM answering after 50 ms.

``--profile`` adds a cProfile summary (top functions by own time) of the list and recall paths,
and of one refresh run in-process in the worker's code (by own and by cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import FINAL, MODES, REPO, TAGS, VOCAB, argument_parser, percentile, sentence

# Columns of the mental-model row a COPY must fill (Django's defaults are not the database's).
FAILURE_COLUMNS = {"last_refresh_failure_transient": False, "refresh_failure_streak": 0}
LIST_BANK = "hot-list"
RETAIN_BANK = "hot-retain"
DELAY_MARK = "bench-delay-50"
BENCH_SECRET = secrets.token_urlsafe(50)


# ---------------------------------------------------------------------------------------------
# Orchestrator: servers, seeding, the two sides, the table


def _psql(url: str, sql: str, *, autocommit: bool = True) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=autocommit) as conn:
        conn.execute(sql)


def _db_url(server_url: str, name: str) -> str:
    return server_url.rsplit("/", 1)[0] + "/" + name


def seed(url: str, sizes: list[int], models: int, dims: int, rng: random.Random) -> dict[str, Any]:
    """Banks ``hot-<n>`` of n memories each (COPY), the HNSW index built once afterwards, and
    ``models`` mental models in ``hot-list`` (random scopes, a third never refreshed)."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    timings: dict[str, Any] = {}
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        banks = [f"hot-{n}" for n in sizes] + [LIST_BANK, RETAIN_BANK]
        with conn.cursor() as cur:
            for bank in banks:
                cur.execute("INSERT INTO banks_bank (id, name, mission, disposition, config) "
                            "VALUES (%s, %s, '', '{}', '{}')", [bank, bank])
        # A schema with stored token counts (retain writes them) gets them here too, as rows
        # retained through the API would have; an older schema has no such column.
        counter = _token_counter(conn)
        started = time.monotonic()
        for n, bank in [(n, f"hot-{n}") for n in sizes] + [(2000, LIST_BANK)]:
            with conn.cursor() as cur, cur.copy(
                "COPY banks_memoryunit (id, bank_id, text, context, fact_type, tags, metadata, "
                "entities, source_memory_ids, embedding"
                + (", text_tokens" if counter else "") + ") FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "text", "text", "text", "text", "text[]", "jsonb",
                                "text[]", "uuid[]", "vector"] + (["int4"] if counter else []))
                for start in range(0, n, 5000):
                    k = min(5000, n - start)
                    vectors = np_rng.standard_normal((k, dims)).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                    rows = [[
                        uuid.uuid4(), bank, sentence(rng), "bench",
                        rng.choice(("world", "world", "experience", "observation")),
                        rng.sample(TAGS, rng.randint(0, 2)), psycopg.types.json.Jsonb({}),
                        [], [], vectors[row],
                    ] for row in range(k)]
                    counts = counter([r[2] for r in rows]) if counter else []
                    for row, values in enumerate(rows):
                        copy.write_row([*values, *counts[row:row + 1]])
        conn.commit()
        timings["copy_s"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        # The graph of a million rows fits in memory: the build does not spill (minutes, not an hour).
        conn.execute("SET maintenance_work_mem = '3GB'")
        conn.execute("CREATE INDEX memory_embedding_hnsw ON banks_memoryunit USING hnsw "
                     "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
        conn.commit()
        timings["hnsw_s"] = round(time.monotonic() - started, 1)
        with conn.cursor() as cur:
            cur.execute("SELECT min(updated_at), max(updated_at) FROM banks_memoryunit "
                        "WHERE bank_id = %s", [LIST_BANK])
            low, high = cur.fetchone()
            # The failure-class columns (no database default), where the seeding side has them.
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = "
                        "'mentalmodels_mentalmodel' AND column_name = ANY(%s)",
                        [list(FAILURE_COLUMNS)])
            present = {row[0] for row in cur.fetchall()}
            failure = [name for name in FAILURE_COLUMNS if name in present]
            with cur.copy(
                "COPY mentalmodels_mentalmodel (bank_id, mental_model_id, name, source_query, "
                "content, tags, max_tokens, trigger, last_refreshed_at, last_memory_seen_at, "
                "reflect_response, embedding_model, embedding_content_hash"
                + "".join(f", {name}" for name in failure) + ") FROM STDIN"
            ) as copy:
                for i in range(models):
                    kind = i % 3
                    mark = None if kind == 0 else (low + (high - low) / 2 if kind == 1 else high)
                    mode = rng.choice(MODES)
                    trigger = {"mode": "full", **({"tags_match": mode} if mode else {})}
                    content = f"## Model {i}\n\n" + " ".join(rng.sample(TAGS, 3)) * 20
                    response = {"text": content, "outcome": "content_written",
                                "based_on": {"world": [{"id": str(uuid.uuid4()),
                                                        "text": "x" * 200}] * 20},
                                "mental_models": []}
                    copy.write_row([LIST_BANK, f"bench-{i:05d}", f"Model {i}",
                                    f"What about topic {i}?", content,
                                    rng.sample(TAGS, rng.randint(0, 2)), 2048,
                                    json.dumps(trigger), mark, mark, json.dumps(response), "", "",
                                    *(FAILURE_COLUMNS[name] for name in failure)])
        conn.commit()
    _psql(url, "VACUUM ANALYZE")
    return timings


def _token_counter(conn: Any) -> Any:
    """Word pieces per text as retain stores them, when the schema has ``text_tokens``."""
    has_column = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_name = 'banks_memoryunit' "
        "AND column_name = 'text_tokens'").fetchone()
    if not has_column:
        return None
    from tokenizers import Tokenizer

    from hindsight.infra.embeddings.local import tokenizer_path

    tokenizer = Tokenizer.from_file(str(tokenizer_path()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda texts: [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def _side_env(database_url: str, redis_url: str, llm_url: str, queue: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
        # A throw-away deployment: one random key shared by the side's processes.
        "HINDSIGHT_API_SECRET_KEY": os.environ.get("HINDSIGHT_API_SECRET_KEY") or BENCH_SECRET,
        "HINDSIGHT_API_DATABASE_URL": database_url,
        "HINDSIGHT_API_REDIS_URL": redis_url,
        "HINDSIGHT_API_TASK_QUEUE": queue,
        "HINDSIGHT_API_LLM_PROVIDER": "openai",
        "HINDSIGHT_API_LLM_BASE_URL": llm_url,
        "HINDSIGHT_API_LLM_API_KEY": "bench",
        "HINDSIGHT_API_LLM_MODEL": "scripted",
        "HINDSIGHT_API_LLM_MAX_RETRIES": "0",
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "local",
    }


def respond(body: dict[str, Any]) -> Any:
    """The scripted LLM: retain extraction gets one fact per item; a refresh's forced tool
    turns get a recall, its free turn ``done`` citing the first facts it saw."""
    # Here, not at the top: a side's process imports this module with an older checkout's
    # ``hindsight``, and the fakes import its dev stack.
    from fakes.llm_server import Reply, reflect_reply

    delay = 0.0
    if body.get("response_format"):
        user = body["messages"][-1]["content"]
        # The retain-latency case marks its items' context: those calls answer after 50 ms.
        delay = 0.05 if DELAY_MARK in user else 0.0
        reply = Reply.json({"facts": [{"text": user[-200:], "fact_type": "world",
                                       "occurred_start": None, "occurred_end": None}]})
    else:
        reply = reflect_reply(body, f"## Doc\n\n{uuid.uuid4().hex}", first=3)
    return Reply.delay(delay, reply) if delay else reply


def orchestrate(args: argparse.Namespace) -> int:
    from fakes.llm_server import ScriptedLLMServer
    from hindsight.devstack.stack import Stack

    sides = [("before", Path(args.compare).resolve())] if args.compare else []
    sides.append(("after", REPO))
    sizes = [int(s) for s in args.memories.split(",")]
    # The stack's servers only: each side migrates its own database with its own checkout.
    stack = Stack(Path(tempfile.mkdtemp(prefix="bench-hot-")))
    llm = ScriptedLLMServer()
    results: dict[str, Any] = {}
    try:
        stack.start_servers()
        pg_url, redis_url = stack.database_url, stack.redis_url
        llm.start()
        llm.respond_with(respond)
        first = sides[0][0]
        for name, _ in sides:
            _psql(pg_url.rsplit("/", 1)[0] + "/postgres", f"CREATE DATABASE hot_{name}"
                  + (f" TEMPLATE hot_{first}" if name != first else ""))
            if name == first:
                url = _db_url(pg_url, f"hot_{name}")
                env = _side_env(url, redis_url, llm.base_url, "hot")
                _run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=sides[0][1], env=env)
                print(f"# seeding {', '.join(f'{n:,}' for n in sizes)} memories and "
                      f"{args.models:,} models …", flush=True)
                timings = seed(url, sizes, args.models, 384, random.Random(args.random_seed))
                print(f"# seeded: COPY {timings['copy_s']} s, HNSW build {timings['hnsw_s']} s",
                      flush=True)
        for name, repo in sides:
            url = _db_url(pg_url, f"hot_{name}")
            env = _side_env(url, redis_url, llm.base_url, f"hot-{name}")
            _run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=repo, env=env)
            _psql(url, "VACUUM ANALYZE")
        # Sections interleaved side by side, the order flipped every round (ABBA), so a change
        # in the machine's load falls on both sides alike; each metric is the median of rounds.
        collected: dict[str, dict[str, list[Any]]] = {name: {} for name, _ in sides}
        flip = False
        for section in args.sections.split(","):
            for round_index in range(args.rounds):
                for name, repo in (sides[::-1] if flip else sides):
                    url = _db_url(pg_url, f"hot_{name}")
                    env = _side_env(url, redis_url, llm.base_url, f"hot-{name}")
                    print(f"# {section}, round {round_index + 1}: {name} ({repo})", flush=True)
                    cmd = [sys.executable, "-m", "bench.bench_hotpaths", "--side", str(repo),
                           "--only", section,
                           "--memories", args.memories, "--runs", str(args.runs),
                           "--recalls", str(args.recalls), "--retain", str(args.retain),
                           "--batch", str(args.batch), "--refreshes", str(args.refreshes)]
                    if round_index == 0:
                        cmd += (["--profile"] if args.profile else []) + ["--plans"]
                    # Started in the side's checkout, which ``-m`` puts first on the path; this
                    # checkout after it, for ``bench`` (an older one's bench/ is no package).
                    side_env = {**env, "PYTHONPATH": str(REPO)}
                    lines = _run(cmd, cwd=repo, env=side_env).strip().splitlines()
                    if round_index == 0:
                        print("\n".join(lines[:-1]), flush=True)
                    for key, value in json.loads(lines[-1])["metrics"].items():
                        collected[name].setdefault(key, []).append(value)
                    llm.reset()
                    llm.respond_with(respond)
                flip = not flip
        for name, values in collected.items():
            results[name] = {"metrics": {k: statistics.median(v) for k, v in values.items()}}
    finally:
        llm.stop()
        stack.stop()
        stack.remove_data()
    print_table(results)
    return 0


def print_table(results: dict[str, Any]) -> None:
    names = list(results)
    keys = list(results[names[-1]]["metrics"])
    header = f"| {'metric':58s} | " + " | ".join(f"{n:>18s}" for n in names)
    if len(names) == 2:
        header += " | after/before"
    print("\n" + header + " |")
    print("|" + "-" * 60 + "|" + "|".join("-" * 20 for _ in names)
          + ("|" + "-" * 14 if len(names) == 2 else "") + "|")
    for key in keys:
        values = [results[n]["metrics"].get(key) for n in names]
        cells = " | ".join(f"{v:>18.2f}" if isinstance(v, float) else f"{v!s:>18s}"
                           for v in values)
        row = f"| {key:58s} | {cells}"
        if len(names) == 2:
            before, after = values
            ratio = (f"{after / before:12.2f}" if isinstance(before, (int, float)) and before
                     and isinstance(after, (int, float)) else f"{'':12s}")
            row += f" | {ratio}"
        print(row + " |")


# ---------------------------------------------------------------------------------------------
# One side, in-process with its checkout's code


def side(args: argparse.Namespace) -> int:
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = ["*"]
    metrics: dict[str, Any] = {}
    client = Client()
    rng = random.Random(11)

    def timed(method: str, path: str, body: Any = None) -> tuple[float, Any]:
        started = time.perf_counter()
        if method == "GET":
            response = client.get(path)
        else:
            response = client.post(path, data=json.dumps(body) if body is not None else None,
                                   content_type="application/json")
        ms = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        return ms, response

    def queries(method: str, path: str, body: Any = None) -> int:
        from django.db import connection

        with CaptureQueriesContext(connection) as captured:
            timed(method, path, body)
        return len(captured.captured_queries)

    def profiled(label: str, fn: Any, n: int) -> None:
        if not args.profile:
            return
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(n):
            fn()
        profile.disable()
        stream = io.StringIO()
        pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(12)
        print(f"\n### profile: {label} ({n} calls), top functions by own time")
        print("\n".join(line for line in stream.getvalue().splitlines()[6:] if line.strip()))

    sections = args.only.split(",")
    # 1. refresh (before the worker starts: one run in-process for its SQL count)
    if "refresh" in sections:
        metrics.update(bench_refresh(args, timed, queries))

    # 2. list
    for limit in ((100, 1000) if "list" in sections else ()):
        for detail in ("metadata", "content", "full"):
            path = f"/v1/default/banks/{LIST_BANK}/mental-models?detail={detail}&limit={limit}"
            timed("GET", path)
            times = [timed("GET", path)[0] for _ in range(args.runs)]
            metrics[f"list {limit} {detail}: p50 ms"] = statistics.median(times)
            metrics[f"list {limit} {detail}: SQL queries"] = queries("GET", path)
    path = f"/v1/default/banks/{LIST_BANK}/mental-models?detail=metadata&limit=1000"
    if "list" in sections and args.plans:
        print("\n### plans: GET mental-models limit=1000 detail=metadata (the page, its staleness)")
        print(explain_request("GET", path, None, timed, table=""))
    if "list" in sections:
        profiled("GET mental-models limit=1000 detail=metadata", lambda: timed("GET", path), 5)

    # 3. recall
    for n in [int(s) for s in args.memories.split(",")] if "recall" in sections else []:
        path = f"/v1/default/banks/hot-{n}/memories/recall"
        bodies = []
        for index in range(args.recalls):
            body: dict[str, Any] = {"query": " ".join(rng.sample(VOCAB, 4)), "max_tokens": 2048}
            if index % 2:
                body.update({"tags": [rng.choice(TAGS)], "tags_match": "any_strict"})
            bodies.append(body)
        # Warm-up queries of their own: a query timed below is never one the process has
        # embedded before (the local embedder caches recent single texts).
        for _ in range(5):
            timed("POST", path, {"query": " ".join(rng.sample(VOCAB, 4)), "max_tokens": 2048})
        times = [timed("POST", path, body)[0] for body in bodies]
        metrics[f"recall {n:,}: p50 ms"] = statistics.median(times)
        metrics[f"recall {n:,}: p95 ms"] = percentile(times, 0.95)
        metrics[f"recall {n:,}: SQL queries"] = queries("POST", path, bodies[0])
        for label, body in (("untagged", bodies[0]), ("tagged any_strict", bodies[1])):
            if args.plans:
                print(f"\n### plans: recall over {n:,} memories, {label}")
                print(explain_request("POST", path, body, timed))
        profiled(f"recall over {n:,} memories", lambda p=path, b=bodies[0]: timed("POST", p, b), 20)

    # 4. retain
    if "retain" not in sections:
        print(json.dumps({"metrics": metrics}))
        return 0
    metrics.update(bench_retain(args, timed, queries, rng))
    retain_path = f"/v1/default/banks/{RETAIN_BANK}/memories"
    profiled(f"sync retain of {args.batch} items, LLM at 0 ms", lambda: timed("POST", retain_path, {
        "items": [{"content": sentence(rng)} for _ in range(args.batch)]
    }), 3)
    print(json.dumps({"metrics": metrics}))
    return 0


def explain_request(method: str, path: str, body: dict[str, Any] | None, timed: Any,
                    table: str = "banks_memoryunit") -> str:
    """Replay the statements one request ran, the SELECTs on ``table`` as EXPLAIN ANALYZE, in
    one transaction (so its SET LOCALs apply); the plan nodes that scan."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        timed(method, path, body)
    out: list[str] = []
    with transaction.atomic(), connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if sql.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
                continue
            while sql.startswith("SET"):  # "SET LOCAL …; SET LOCAL …; SELECT …" in one go
                head, _, sql = sql.partition("; ")
                cursor.execute(head)
            if table not in sql or not sql.startswith(("SELECT", "WITH")):
                continue
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) " + sql)
            lines = [row[0] for row in cursor.fetchall()]
            keep = [line for line in lines if "Scan" in line or "Execution Time" in line]
            out.append(f"- {sql[:110]}…\n    " + "\n    ".join(keep))
        transaction.set_rollback(True)
    return "\n".join(out)


def bench_refresh(args: argparse.Namespace, timed: Any, queries: Any) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mentalmodels.models import MentalModel
    from operations.engine import operation_execute
    from operations.models import Operation

    bank = "hot-10000" if "10000" in args.memories.split(",") else f"hot-{args.memories.split(',')[0]}"
    out: dict[str, Any] = {}

    def create(mm_id: str) -> str:
        _, response = timed("POST", f"/v1/default/banks/{bank}/mental-models",
                            {"id": mm_id, "name": mm_id, "source_query": "How does the team work?",
                             "tags": ["team"], "trigger": {"keep_trace": True}})
        return response.json()["operation_id"]

    # SQL of one refresh, in-process (no worker yet): the create's first refresh.
    suffix = uuid.uuid4().hex[:6]
    op_id = create(f"hot-sql-{suffix}")
    operation_execute(operation_id=op_id, holder="bench")  # warm (embedder, first connection)
    create_op = Operation.objects.get(id=op_id)
    assert create_op.status == "completed", create_op.error_message
    _, response = timed("POST", f"/v1/default/banks/{bank}/mental-models/hot-sql-{suffix}/refresh")
    op_id = response.json()["operation_id"]
    with CaptureQueriesContext(connection) as captured:
        operation_execute(operation_id=op_id, holder="bench")
    out["refresh: SQL queries in the worker (one refresh)"] = len(captured.captured_queries)
    if args.plans:
        print("\n### SQL of one refresh in the worker, in order")
        for query in captured.captured_queries:
            print(f"- {query['time']}s {' '.join(query['sql'].split())[:150]}")
    out["refresh: SQL queries of the request"] = queries(
        "POST", f"/v1/default/banks/{bank}/mental-models/hot-sql-{suffix}/refresh")
    Operation.objects.filter(bank_id=bank, status="pending").delete()
    # The worker's code alone, in-process (no Celery delivery, no pool): claim → completed.
    in_process = []
    for _ in range(args.refreshes):
        _, response = timed(
            "POST", f"/v1/default/banks/{bank}/mental-models/hot-sql-{suffix}/refresh")
        op_id = response.json()["operation_id"]
        started = time.perf_counter()
        operation_execute(operation_id=op_id, holder="bench")
        in_process.append((time.perf_counter() - started) * 1000)
    if in_process:
        out["refresh in the worker's code, in-process (no Celery): p50 ms"] = (
            statistics.median(in_process))
    if args.profile:
        # The worker's side of a refresh, in-process: everything but the Celery delivery. Two
        # paths: the model alone in its bank (forced lookups: observations, then raw facts),
        # then — once the refreshes below have given it siblings — with fresh sibling models
        # in reach (a mental-model search that releases the forced turns, then the answer).
        mm_ids = [f"hot-sql-{suffix}", f"hot-sib-{suffix}"]
        for path, mm_id in (("alone", mm_ids[0]), ("with siblings", mm_ids[1])):
            if path == "with siblings":
                for i in range(3):
                    operation_execute(operation_id=create(f"hot-sib{i}-{suffix}"), holder="bench")
                operation_execute(operation_id=create(mm_id), holder="bench")
            profile, runs = cProfile.Profile(), 10
            for _ in range(runs):
                _, response = timed("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}/refresh")
                op_id = response.json()["operation_id"]
                profile.enable()
                operation_execute(operation_id=op_id, holder="bench")
                profile.disable()
            if os.environ.get("BENCH_PROFILE_DUMP"):
                profile.dump_stats(os.environ["BENCH_PROFILE_DUMP"] + ("" if path == "alone" else ".siblings"))
            for order in ("tottime", "cumulative"):
                stream = io.StringIO()
                pstats.Stats(profile, stream=stream).sort_stats(order).print_stats(25)
                print(f"\n### profile: one refresh in the worker, in-process, {path} ({runs} runs), "
                      f"by {order}")
                print("\n".join(line for line in stream.getvalue().splitlines()[6:] if line.strip()))
    if not args.refreshes:
        return out

    # Started here, not with hindsight.devstack.stack: this side's checkout may predate it.
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "hindsight", "worker", "-Q",
         os.environ["HINDSIGHT_API_TASK_QUEUE"], "-c", "1", "-P", "prefork", "-n",
         f"hot-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle",
         "--without-heartbeat", "-l", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        stages: dict[str, list[float]] = {k: [] for k in (
            "total", "request", "queue_to_start", "pipeline", "llm", "tools", "pipeline_other",
            "completion_seen", "commit_to_dispatch", "dispatch_to_claim", "claim_to_pipeline",
            "persist")}
        for i in range(args.refreshes + 2):
            mm_id = f"hot-r{i}-{suffix}"
            op_id = create(mm_id)
            _wait(Operation, op_id)
            started = time.perf_counter()
            request_ms, response = timed("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}/refresh")
            op_id = response.json()["operation_id"]
            # Polled every millisecond (one primary-key read each), so the figure is the
            # service's, not the bench's sleep: "completion_seen" is what the polling adds.
            op = _wait(Operation, op_id, poll=0.001)
            total = (time.perf_counter() - started) * 1000
            assert op.status == "completed", op.error_message
            if i < 2:
                continue  # warm-up: the worker's first runs load the embedder
            trace = (MentalModel.objects.get(bank_id=bank, mental_model_id=mm_id)
                     .reflect_response or {}).get("trace") or {}
            pipeline = float(trace.get("duration_ms") or 0)
            llm = sum(float(c.get("duration_ms") or 0) for c in trace.get("llm_calls", []))
            tools = sum(float(c.get("duration_ms") or 0) for c in trace.get("tool_calls", []))
            in_db = (op.completed_at - op.created_at).total_seconds() * 1000
            stages["total"].append(total)
            stages["request"].append(request_ms)
            stages["queue_to_start"].append(max(0.0, in_db - pipeline))
            stages["pipeline"].append(pipeline)
            stages["llm"].append(llm)
            stages["tools"].append(tools)
            stages["pipeline_other"].append(max(0.0, pipeline - llm - tools))
            stages["completion_seen"].append(max(0.0, total - request_ms - in_db))
            # "queue_to_start" split by the row's clocks (database time) and the trace's end
            # (the worker's wall clock, same machine): created → dispatched_at (the request's
            # commit and publish stamp) → heartbeat_at (the claim stamps it; a job this short
            # sees no heartbeat) → the pipeline's start → its end → completed_at (persist).
            ended = datetime.fromisoformat(str(trace.get("recorded_at")).replace("Z", "+00:00"))
            began = ended - timedelta(milliseconds=pipeline)
            if op.dispatched_at is not None and op.heartbeat_at is not None:
                stages["commit_to_dispatch"].append(_ms(op.created_at, op.dispatched_at))
                stages["dispatch_to_claim"].append(_ms(op.dispatched_at, op.heartbeat_at))
                stages["claim_to_pipeline"].append(_ms(op.heartbeat_at, began))
            stages["persist"].append(_ms(ended, op.completed_at))
        out["refresh → completed (0 ms LLM): p50 ms"] = statistics.median(stages["total"])
        out["refresh → completed (0 ms LLM): p95 ms"] = percentile(stages["total"], 0.95)
        for key in ("request", "queue_to_start", "pipeline", "llm", "tools", "pipeline_other",
                    "completion_seen", "commit_to_dispatch", "dispatch_to_claim",
                    "claim_to_pipeline", "persist"):
            if stages[key]:
                out[f"refresh stage {key}: p50 ms"] = statistics.median(stages[key])
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
    return out


def _ms(start: Any, end: Any) -> float:
    return max(0.0, (end - start).total_seconds() * 1000)


def _wait(model: Any, op_id: str, timeout: float = 120, poll: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op = model.objects.get(id=op_id)
        if op.status in FINAL:
            return op
        time.sleep(poll)
    raise RuntimeError(f"operation {op_id} not finished in {timeout}s")


def bench_retain(args: argparse.Namespace, timed: Any, queries: Any,
                 rng: random.Random) -> dict[str, Any]:
    path = f"/v1/default/banks/{RETAIN_BANK}/memories"

    def items(n: int, verbatim: bool = True) -> list[dict[str, Any]]:
        return [{"content": sentence(rng), "tags": rng.sample(TAGS, rng.randint(0, 2)),
                 **({"strategy": "verbatim"} if verbatim else {})} for _ in range(n)]

    out: dict[str, Any] = {}
    timed("POST", path, {"items": items(args.batch)})  # warm: the embedder loads
    for verbatim, label in ((False, "LLM extraction at 0 ms"), (True, "verbatim")):
        started = time.perf_counter()
        done = 0
        while done < args.retain:
            n = min(args.batch, args.retain - done)
            timed("POST", path, {"items": items(n, verbatim)})
            done += n
        seconds = time.perf_counter() - started
        out[f"retain {args.retain} facts, {label}, sync requests of {args.batch}: s"] = seconds
        out[f"retain throughput, {label}: facts/s"] = done / seconds
        out[f"retain of {args.batch}, {label}: SQL queries"] = queries(
            "POST", path, {"items": items(args.batch, verbatim)})
    # One sync retain of 50 items through the LLM, each call answered after 50 ms.
    batch = [{**item, "context": DELAY_MARK} for item in items(50, verbatim=False)]
    ms, _ = timed("POST", path, {"items": batch})
    out["sync retain of 50 items, LLM 50 ms/call: s"] = ms / 1000
    return out


def main() -> int:
    parser = argument_parser("bench.bench_hotpaths", __doc__)
    parser.add_argument("--compare", help="a checkout of the 'before' code to run first")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--memories", default="10000,100000", help="recall bank sizes")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20, help="list requests per case")
    parser.add_argument("--recalls", type=int, default=100)
    parser.add_argument("--retain", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each section per side")
    parser.add_argument("--sections", default="refresh,list,recall,retain")
    parser.add_argument("--only", default="refresh,list,recall,retain", help=argparse.SUPPRESS)
    parser.add_argument("--plans", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--random-seed", type=int, default=7)
    args = parser.parse_args()
    return side(args) if args.side else orchestrate(args)


if __name__ == "__main__":
    raise SystemExit(main())
