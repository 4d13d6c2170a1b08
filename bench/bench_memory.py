"""Memory-substrate benchmark: seed a large bank by COPY, retain through the API, time recalls.

Run on demand, not as a test. It starts nothing: point it at a running server (``make run`` in
another shell) and at that server's database (for the COPY seeding)::

    make run                                   # shell 1
    .venv/bin/python -m bench.bench_memory     # shell 2; URLs from .devdata/servers.json

or explicitly ``--base-url http://127.0.0.1:8888 --database-url postgresql://…``.

1. Seeds ``--seed`` memories (default 100,000) into a fresh bank with ``COPY … FORMAT BINARY``:
   synthetic texts from a small vocabulary (so the lexical arm has work) and random unit
   vectors (embedding 100k texts on 2 cores would dominate the run). The HNSW, GIN and
   full-text indexes are maintained as rows arrive, as in production.
2. Retains ``--retain`` memories (default 1,000) through ``POST …/memories`` in requests of
   ``--batch`` items (``strategy: verbatim``: the local embedder runs, no LLM), and prints
   memories/s.
3. Runs ``--recalls`` recalls (default 200) and prints p50/p95/max latency.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
import uuid
from typing import Any

import numpy as np

from bench.harness import REPO, TAGS, VOCAB, argument_parser, call_json, percentile, sentence


def _servers_json() -> dict[str, str]:
    path = REPO / ".devdata" / "servers.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def seed(database_url: str, bank_id: str, count: int, dims: int, rng: random.Random) -> float:
    import psycopg
    from pgvector.psycopg import register_vector

    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    started = time.monotonic()
    with psycopg.connect(database_url) as conn:
        register_vector(conn)
        with conn.cursor() as cur, cur.copy(
            "COPY banks_memoryunit (id, bank_id, text, context, fact_type, tags, metadata, "
            "entities, source_memory_ids, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(
                ["uuid", "text", "text", "text", "text", "text[]", "jsonb", "text[]",
                 "uuid[]", "vector"]
            )
            chunk = 5000
            for start in range(0, count, chunk):
                n = min(chunk, count - start)
                vectors = np_rng.standard_normal((n, dims)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                for row in range(n):
                    copy.write_row([
                        uuid.uuid4(), bank_id, sentence(rng), "bench",
                        rng.choice(("world", "world", "experience", "observation")),
                        rng.sample(TAGS, rng.randint(0, 2)), psycopg.types.json.Jsonb({}),
                        [], [], vectors[row],
                    ])
        conn.commit()
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    recorded = _servers_json()
    parser = argument_parser("bench.bench_memory", __doc__)
    parser.add_argument("--base-url", default=recorded.get("api_url") or "http://127.0.0.1:8888")
    parser.add_argument("--database-url", default=recorded.get("database_url") or "")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--bank", default=f"bench-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--seed", type=int, default=100_000)
    parser.add_argument("--retain", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=25, help="items per retain request")
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--random-seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.random_seed)

    print(f"server {args.base_url}, bank {args.bank}")
    call_json(args.base_url, "PUT", f"/v1/default/banks/{args.bank}", {"name": "benchmark"},
              api_key=args.api_key)

    if args.seed:
        if not args.database_url:
            print("--database-url is needed to seed (or run `make run`, which records it)",
                  file=sys.stderr)
            return 2
        seconds = seed(args.database_url, args.bank, args.seed, args.dims, rng)
        print(f"seeded {args.seed:,} memories by COPY in {seconds:.1f} s "
              f"({args.seed / seconds:,.0f} memories/s)")

    if args.retain:
        started = time.monotonic()
        done = 0
        while done < args.retain:
            n = min(args.batch, args.retain - done)
            items = [{"content": sentence(rng), "tags": rng.sample(TAGS, rng.randint(0, 2)),
                      "strategy": "verbatim"} for _ in range(n)]
            body = call_json(args.base_url, "POST", f"/v1/default/banks/{args.bank}/memories",
                             {"items": items}, api_key=args.api_key)
            assert body["success"] and body["items_count"] == n, body
            done += n
        seconds = time.monotonic() - started
        print(f"retained {done:,} memories through the API ({args.batch}/request) in "
              f"{seconds:.1f} s: {done / seconds:,.1f} memories/s")

    if args.recalls:
        latencies = []
        results = []
        for index in range(args.recalls):
            query = " ".join(rng.sample(VOCAB, 4))
            body: dict[str, Any] = {"query": query, "max_tokens": 2048}
            if index % 2:
                body.update({"tags": [rng.choice(TAGS)], "tags_match": "any_strict"})
            started = time.monotonic()
            answer = call_json(args.base_url, "POST",
                               f"/v1/default/banks/{args.bank}/memories/recall", body,
                               api_key=args.api_key)
            latencies.append((time.monotonic() - started) * 1000)
            results.append(len(answer["results"]))
        print(f"{args.recalls} recalls: p50 {statistics.median(latencies):.1f} ms, "
              f"p95 {percentile(latencies, 0.95):.1f} ms, max {max(latencies):.1f} ms, "
              f"mean results {statistics.mean(results):.1f}")
    stats = call_json(args.base_url, "GET", f"/v1/default/banks/{args.bank}/stats",
                      api_key=args.api_key)
    print(f"bank total_nodes {stats['total_nodes']:,}, last_memory_write_at "
          f"{stats['last_memory_write_at']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
