"""Knowledge-base tree benchmark (run on demand; not a test).

Two page shapes, each at 100 and at 1,000 pages (in folders two levels deep, a tenth as many
folders as pages): pages drawn from ``--scopes`` distinct scopes (tags x tags_match x
fact_types; default 20, a bank's handful of topics), and every page its own random scope (the
staleness probe's worst case: one probe per distinct scope). Over HTTP against a real API
process (gunicorn, 2 workers): ``GET …/knowledge-base/tree`` latency p50 / p95 / max, the
response size, the SQL query count of one such request and the number of scope probes in it
(counted in-process with Django's ``CaptureQueriesContext`` on the same database). Each bank
holds ``--memories`` memories (default 20,000, seeded by ``COPY`` with random tags and fact
types) and its pages random tags, tag modes, fact types and watermarks (a third never
refreshed, a third half-way, a third at the bank's last write), so ``is_stale`` has real scope
probes to answer. All four banks share the database, as a server's banks do, vacuumed and
analysed before the requests.

Per shape, the 1,000 / 100 ratios: the query count stays flat; the time cannot (a 1,000-page
tree renders and sends ten times the nodes), so the line also gives the marginal cost of a
node: (p50 at 1,000 - p50 at 100) / (nodes at 1,000 - nodes at 100).

By default it starts its own embedded PostgreSQL on a free port (throw-away data, removed at
the end) and migrates;
``--database-url`` reuses a migrated server (the benchmark writes ``bench-kb-*`` banks).

    .venv/bin/python bench/bench_knowledge.py
    .venv/bin/python bench/bench_knowledge.py --runs 50 --scopes 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
FACT_TYPES = [None, ["world"], ["observation"], ["world", "experience"]]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as response:
        return response.read()


def seed_memories(database_url: str, bank_id: str, count: int, rng: random.Random) -> None:
    """``count`` memories by ``COPY``, random tags and fact types, no vectors (staleness reads
    tags, fact types and stamps only; an HNSW index would make the COPY minutes long)."""
    import psycopg

    with psycopg.connect(database_url) as conn, conn.cursor() as cur, cur.copy(
        "COPY banks_memoryunit (id, bank_id, text, context, fact_type, tags, metadata, entities,"
        " source_memory_ids) FROM STDIN"
    ) as copy:
        for i in range(count):
            copy.write_row([uuid.uuid4(), bank_id, f"Memory {i} about {rng.choice(TAGS)}.",
                            "bench", rng.choice(("world", "world", "experience", "observation")),
                            rng.sample(TAGS, rng.randint(0, 2)), "{}", [], []])


def _scope(rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    from mentalmodels.triggers import trigger_normalize

    trigger = trigger_normalize({"tags_match": rng.choice(MODES),
                                 "fact_types": rng.choice(FACT_TYPES), "mode": "delta"})
    return rng.sample(TAGS, rng.randint(0, 2)), trigger


def seed_tree(bank_id: str, pages: int, scopes: int, rng: random.Random) -> None:
    """``pages`` pages (mental-model rows and their nodes) under ``pages // 10`` folders, their
    scopes drawn from ``scopes`` distinct ones (0: each page its own random one). Written through
    the ORM (``bulk_create``), so a column added to the models takes its default."""
    from django.db.models import Max, Min

    from hindsight.banks.models import MemoryUnit
    from mentalmodels.knowledge.models import KnowledgeNode
    from mentalmodels.models import MentalModel

    pool = [_scope(rng) for _ in range(scopes)]
    span = MemoryUnit.objects.filter(bank_id=bank_id).aggregate(
        low=Min("updated_at"), high=Max("updated_at"))
    low, high = span["low"], span["high"]
    folders: list[str] = []
    for i in range(max(1, pages // 10)):
        folder = f"kf-{uuid.uuid4().hex}"
        # Half the folders nest under an earlier one: two levels deep.
        parent = rng.choice(folders[: max(1, len(folders) // 2)]) if folders and i % 2 else None
        KnowledgeNode.objects.create(id=folder, bank_id=bank_id, parent_id=parent,
                                     kind="folder", name=f"F{i:04d}")
        folders.append(folder)
    models = []
    for i in range(pages):
        kind = i % 3
        watermark = None if kind == 0 else (low + (high - low) / 2 if kind == 1 else high)
        tags, trigger = rng.choice(pool) if pool else _scope(rng)
        models.append(MentalModel(
            bank_id=bank_id, mental_model_id=f"mm-{uuid.uuid4().hex}", name=f"Page {i}",
            source_query=f"What about topic {i}?",
            content=f"## Page {i}\n\n" + " ".join(rng.sample(TAGS, 3)) * 20, tags=tags,
            max_tokens=4096, trigger=trigger, last_refreshed_at=watermark,
            last_memory_seen_at=watermark))
    MentalModel.objects.bulk_create(models)
    KnowledgeNode.objects.bulk_create(
        KnowledgeNode(id=f"kp-{uuid.uuid4().hex}", bank_id=bank_id,
                      parent_id=rng.choice([None, *folders]), kind="page", name=f"Page {i:05d}",
                      mental_model_id=model.uid)
        for i, model in enumerate(models))


def count_tree_queries(bank_id: str) -> tuple[int, int]:
    """SQL queries of one tree request, and the scope probes its staleness statement ran."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = Client().get(f"/v1/default/banks/{bank_id}/knowledge-base/tree")
    assert response.status_code == 200, response.content[:300]
    probes = sum(q["sql"].count("FROM banks_memoryunit m ") for q in captured.captured_queries)
    return len(captured.captured_queries), probes


def bench_tree(base: str, bank_id: str, label: str, runs: int) -> dict[str, float]:
    url = f"{base}/v1/default/banks/{bank_id}/knowledge-base/tree"
    body = _get(url)  # warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        body = _get(url)
        times.append((time.perf_counter() - started) * 1000)
    tree = json.loads(body)
    nodes = sum(1 for _ in _nodes(tree["roots"]))
    stale = sum(1 for n in _nodes(tree["roots"]) if n["is_stale"])
    queries, probes = count_tree_queries(bank_id)
    p50 = _percentile(times, 0.5)
    print(f"{label}: p50 {p50:7.1f} ms  p95 {_percentile(times, 0.95):7.1f} ms  "
          f"max {max(times):7.1f} ms  {nodes:5d} nodes  {queries} SQL queries "
          f"({probes:3d} scope probes)  {len(body) / 1024:5.0f} KiB  ({stale} stale)")
    return {"p50": p50, "queries": queries, "nodes": nodes}


def _nodes(nodes: list[dict[str, Any]]) -> Any:
    for node in nodes:
        yield node
        yield from _nodes(node["children"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url")
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--scopes", type=int, default=20,
                        help="distinct page scopes of the first shape (tags x tags_match x "
                             "fact_types); the second shape gives every page its own")
    parser.add_argument("--random-seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.random_seed)

    from hindsight.devstack.stack import Stack

    # No broker: the tree publishes nothing.
    stack = Stack(Path(tempfile.mkdtemp(prefix="bench-kb-")), database_url=args.database_url,
                  redis_url="redis://127.0.0.1:1/0",
                  env={"DJANGO_SETTINGS_MODULE": "hindsight.settings"})
    try:
        stack.start_servers()
        args.database_url = stack.database_url
        stack.use_here()
        stack.migrate(verbosity=0)
        base = stack.base_url
        stack.start_api(workers=2, threads=1, log_level="warning", access_log=None)
        stack.wait_healthy(60)
        print(f"# cores: {os.cpu_count()}  load average {_load()}  memories per bank "
              f"{args.memories:,}  runs {args.runs}")
        import psycopg

        shapes = [(args.scopes, f"{args.scopes} scopes"), (0, "one scope per page")]
        banks: dict[tuple[int, int], str] = {}
        for scopes, _ in shapes:
            for pages in (100, 1000):
                bank_id = banks[scopes, pages] = f"bench-kb-{pages}-{uuid.uuid4().hex[:6]}"
                with psycopg.connect(args.database_url) as conn:
                    conn.execute("INSERT INTO banks_bank (id, name, mission, disposition, config)"
                                 " VALUES (%s, '', '', '{}', '{}')", [bank_id])
                seed_memories(args.database_url, bank_id, args.memories, rng)
                seed_tree(bank_id, pages, scopes, rng)
        # As autovacuum leaves the table: without it the tags' GIN index keeps the COPYed rows
        # in its pending list, which every probe using that index reads through (several
        # times the probes' time at 2,000 memories a bank).
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        for scopes, name in shapes:
            small, large = (bench_tree(base, banks[scopes, pages],
                                       f"{pages:5d} pages, {name:>18}", args.runs)
                            for pages in (100, 1000))
            per_node = (large["p50"] - small["p50"]) / (large["nodes"] - small["nodes"])
            print(f"  1,000 / 100 pages, {name}: SQL queries "
                  f"{large['queries'] / small['queries']:.2f}x, p50 "
                  f"{large['p50'] / small['p50']:.2f}x (nodes {large['nodes'] / small['nodes']:.2f}x;"
                  f" {1000 * per_node:.0f} µs per added node)")
        print(f"# load average {_load()}")
    finally:
        stack.stop()
        # Throw-away data (~200 MB a run).
        stack.remove_data()


if __name__ == "__main__":
    main()
