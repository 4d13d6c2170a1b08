"""Knowledge-base tree benchmark (run on demand; not a test).

Two page shapes, each at 100 and at 1,000 pages (in folders two levels deep, a tenth as many
folders as pages): pages drawn from ``--scopes`` distinct scopes (tags x tags_match x
fact_types; default 20, a bank's handful of topics), and every page its own random scope (the
staleness probe's worst case: one probe per distinct scope). Over HTTP against a real API
process (gunicorn, 2 workers), ``GET …/knowledge-base/tree`` three ways, p50 / p95 of each:

* cold: every request after a write the tree's version sees (a folder's ``updated_at``), so
  nothing kept answers it: the tree read, its staleness probed, its JSON rendered;
* warm: the same tree again, unchanged: answered from the rendering kept under its version
  (one statement reading the version);
* 304: warm with ``If-None-Match`` of its ETag (no body).

Beside them the response size, the SQL queries of one cold and one warm request and the
number of scope probes in the cold one (counted in-process with Django's
``CaptureQueriesContext`` on the same database), and the CPU time of a cold and a warm read
in-process, this process's and its database backend's (``/proc``): the figure a loaded
machine does not move. Each bank
holds ``--memories`` memories (default 20,000, seeded by ``COPY`` with random tags and fact
types) and its pages random tags, tag modes, fact types and watermarks (a third never
refreshed, a third half-way, a third at the bank's last write), so ``is_stale`` has real scope
probes to answer. All four banks share the database, as a server's banks do, vacuumed and
analysed before the requests.

Per shape, the 1,000 / 100 ratios: the query counts stay flat, and so does the warm time; the
cold time cannot (a 1,000-page tree renders and sends ten times the nodes), so the line also
gives the marginal cost of a node, (cold p50 at 1,000 - at 100) / (nodes at 1,000 - at 100),
and the cold time per node at each size.

By default it starts its own embedded PostgreSQL on a free port (throw-away data, removed at
the end) and migrates;
``--database-url`` reuses a migrated server (the benchmark writes ``bench-kb-*`` banks).

    .venv/bin/python -m bench.bench_knowledge
    .venv/bin/python -m bench.bench_knowledge --runs 50 --scopes 5
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from bench.harness import MODES, TAGS, argument_parser, bench_stack, percentile, ratio

FACT_TYPES = [None, ["world"], ["observation"], ["world", "experience"]]


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


def count_tree_queries(bank_id: str) -> dict[str, int]:
    """SQL queries of one cold tree request (its rendering not kept: as after a change) and the
    scope probes its staleness statement ran, then of one warm request (unchanged tree),
    counted in-process with Django's ``CaptureQueriesContext``."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from mentalmodels.knowledge.api.treecache import rendered_trees

    url = f"/v1/default/banks/{bank_id}/knowledge-base/tree"
    rendered_trees.clear()
    with CaptureQueriesContext(connection) as cold:
        response = Client().get(url)
    assert response.status_code == 200, response.content[:300]
    with CaptureQueriesContext(connection) as warm:
        Client().get(url)
    probes = sum(q["sql"].count(" AS i, (") for q in cold.captured_queries)
    return {"cold": len(cold.captured_queries), "warm": len(warm.captured_queries),
            "probes": probes}


def cpu_per_read(bank_id: str, database_url: str, runs: int) -> dict[str, float]:
    """CPU milliseconds of one tree read, cold and warm, in this process (the view's work:
    version, tree, staleness, rendering; not Django's request cycle) plus its database backend
    (``/proc/<pid>/stat``): on a machine shared with other work, the figure the load does not
    move (wall times wait for the CPU too)."""
    from django.db import connection

    from mentalmodels.knowledge.api.treecache import rendered_trees, tree_response
    from mentalmodels.knowledge.models import KnowledgeNode
    from mentalmodels.knowledge.selectors import PageFilter

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    tick = 1000 / os.sysconf("SC_CLK_TCK")

    def backend_ms() -> float:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * tick  # utime + stime

    def read() -> None:
        response = tree_response(bank_id=bank_id, page_filter=PageFilter(), if_none_match=None)
        assert response.status_code == 200

    folder = KnowledgeNode.objects.filter(bank_id=bank_id, kind="folder").first()
    assert folder is not None
    out: dict[str, float] = {}
    for name in ("cold", "warm"):
        read()
        api = server = 0.0
        for _ in range(runs):
            if name == "cold":
                folder.save(update_fields=["name"])  # the version moves (the trigger)
                rendered_trees.clear()
            started, backend = time.process_time(), backend_ms()
            read()
            api += (time.process_time() - started) * 1000
            server += backend_ms() - backend
        out[f"{name}_api_cpu"], out[f"{name}_db_cpu"] = api / runs, server / runs
    return out


def _touch(conn: Any, folder_id: str) -> None:
    """A write the tree's version sees (a folder's ``updated_at``): the next read is cold."""
    conn.execute("UPDATE knowledge_knowledgenode SET updated_at = clock_timestamp() "
                 "WHERE id = %s", [folder_id])


def _timed(url: str, runs: int, *, before: Any = None,
           headers: dict[str, str] | None = None) -> tuple[list[float], bytes, int]:
    times, body, status = [], b"", 0
    for _ in range(runs):
        if before is not None:
            before()
        request = urllib.request.Request(url, headers=headers or {})
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                body, status = response.read(), response.status
        except urllib.error.HTTPError as exc:  # 304 Not Modified
            status = exc.code
        times.append((time.perf_counter() - started) * 1000)
    return times, body, status


def bench_tree(base: str, database_url: str, bank_id: str, label: str,
               runs: int) -> dict[str, float]:
    """Cold (each request after a write the tree's version sees, so nothing kept answers it),
    warm (the same tree again: answered from the rendering kept) and revalidated
    (``If-None-Match`` of the last ETag: 304) reads of the tree over HTTP."""
    from mentalmodels.knowledge.models import KnowledgeNode

    url = f"{base}/v1/default/banks/{bank_id}/knowledge-base/tree"
    folder = KnowledgeNode.objects.filter(bank_id=bank_id, kind="folder").values_list(
        "id", flat=True).first()
    assert folder is not None
    _get(url)  # the process warmed up (imports, connection)
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        cold, body, _ = _timed(url, runs, before=lambda: _touch(conn, folder))
    # Both API workers keep their own rendering: a few reads warm both.
    for _ in range(6):
        _get(url)
    warm, body, _ = _timed(url, runs)
    with urllib.request.urlopen(url, timeout=600) as response:
        etag = response.headers["ETag"]
    assert etag, "a quiet tree is answered with an ETag"
    revalidated, _, status = _timed(url, runs, headers={"If-None-Match": etag})
    assert status == 304, status
    tree = json.loads(body)
    nodes = sum(1 for _ in _nodes(tree["roots"]))
    stale = sum(1 for n in _nodes(tree["roots"]) if n["is_stale"])
    queries = count_tree_queries(bank_id)
    cpu = cpu_per_read(bank_id, database_url, max(runs, 40))
    out = {"nodes": nodes, **{f"queries_{k}": v for k, v in queries.items()}, **cpu}
    for name, times in (("cold", cold), ("warm", warm), ("304", revalidated)):
        out[f"{name}_p50"] = percentile(times, 0.5)
        out[f"{name}_p95"] = percentile(times, 0.95)
    print(f"{label}: {nodes:5d} nodes  {len(body) / 1024:5.0f} KiB  ({stale} stale)\n"
          f"    cold  p50 {out['cold_p50']:7.1f} ms  p95 {out['cold_p95']:7.1f} ms  "
          f"{queries['cold']} SQL queries ({queries['probes']:3d} scope probes)\n"
          f"    warm  p50 {out['warm_p50']:7.1f} ms  p95 {out['warm_p95']:7.1f} ms  "
          f"{queries['warm']} SQL query\n"
          f"    304   p50 {out['304_p50']:7.1f} ms  p95 {out['304_p95']:7.1f} ms\n"
          f"    CPU a read, in-process (API + database backend): cold "
          f"{cpu['cold_api_cpu']:.1f} + {cpu['cold_db_cpu']:.1f} ms, warm "
          f"{cpu['warm_api_cpu']:.2f} + {cpu['warm_db_cpu']:.2f} ms")
    return out


def _cpu(figures: dict[str, float], read: str) -> float:
    return figures[f"{read}_api_cpu"] + figures[f"{read}_db_cpu"]


def _nodes(nodes: list[dict[str, Any]]) -> Any:
    for node in nodes:
        yield node
        yield from _nodes(node["children"])


def main() -> None:
    parser = argument_parser("bench.bench_knowledge", __doc__)
    parser.add_argument("--database-url")
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--scopes", type=int, default=20,
                        help="distinct page scopes of the first shape (tags x tags_match x "
                             "fact_types); the second shape gives every page its own")
    parser.add_argument("--random-seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.random_seed)

    # No broker: the tree publishes nothing.
    stack = bench_stack("bench-kb", queue=False, database_url=args.database_url,
                        redis_url="redis://127.0.0.1:1/0")
    try:
        stack.start_measured()
        args.database_url = stack.database_url
        base = stack.base_url
        stack.wait_healthy(60)
        print(f"# cores: {os.cpu_count()}  load average {_load()}  memories per bank "
              f"{args.memories:,}  runs {args.runs}")
        import psycopg

        floor, _, _ = _timed(base + "/health", args.runs)
        print(f"# GET /health (the HTTP floor of this machine now): p50 "
              f"{percentile(floor, 0.5):.1f} ms  p95 {percentile(floor, 0.95):.1f} ms")
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
            small, large = (bench_tree(base, args.database_url, banks[scopes, pages],
                                       f"{pages:5d} pages, {name:>18}", args.runs)
                            for pages in (100, 1000))
            added = large["nodes"] - small["nodes"]
            grew = {key: ratio(large[key], small[key]) for key in (
                "nodes", "queries_cold", "queries_warm", "cold_p50", "warm_p50", "304_p50")}
            print(f"  1,000 / 100 pages, {name} (nodes {grew['nodes']}): "
                  f"SQL queries cold {grew['queries_cold']}, warm {grew['queries_warm']}; "
                  f"p50 cold {grew['cold_p50']} "
                  f"({1000 * (large['cold_p50'] - small['cold_p50']) / added:.0f} µs per added "
                  f"node; per node {1000 * small['cold_p50'] / small['nodes']:.0f} µs at 100, "
                  f"{1000 * large['cold_p50'] / large['nodes']:.0f} µs at 1,000), "
                  f"warm {grew['warm_p50']}, 304 {grew['304_p50']}; CPU cold "
                  f"{ratio(_cpu(large, 'cold'), _cpu(small, 'cold'))} "
                  f"({1000 * _cpu(large, 'cold') / large['nodes']:.0f} µs a node at 1,000, "
                  f"{1000 * _cpu(small, 'cold') / small['nodes']:.0f} at 100), warm "
                  f"{ratio(_cpu(large, 'warm'), _cpu(small, 'warm'))}")
        print(f"# load average {_load()}")
    finally:
        stack.stop()
        # Throw-away data (~200 MB a run).
        stack.remove_data()


if __name__ == "__main__":
    main()
