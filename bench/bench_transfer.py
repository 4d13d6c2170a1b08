"""Bank transfer at scale: export and import of a bank with ``--sizes`` memories (default 10,000
and 100,000) and ``--models`` mental models (default 1,000, each with two history entries),
seeded by ``COPY`` with synthetic unit vectors (a tenth of the memories observations citing two
facts, half the facts in documents of 20), then vacuumed and analyzed as a bank that has lived.

Each export and each import runs in a process of its own (Django set up on the stack's
database, nothing else in it), so its peak memory (``ru_maxrss``) is the transfer's alone: it
should stay flat as the bank grows tenfold (the archive is written and read entry by entry, the
database read through server-side cursors, the vectors staged in a file). The import re-embeds
every memory through the scripted embeddings server (the local model's cost is not the
transfer's) and checks that the models fresh at export read fresh after it.

    python -m bench.bench_transfer [--sizes 10000,100000] [--models 1000] [--json FILE]

Prints per size: export seconds, its peak RSS, the archive's size; import seconds, its peak
RSS, the memories written and the models read stale after the import.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness import REPO, TAGS, argument_parser, bench_stack, log, sentence, write_json

DIMENSIONS = 384
FACTS_PER_DOCUMENT = 20


def seed(url: str, bank: str, memories: int, models: int, rng: random.Random) -> float:
    """``memories`` memories and ``models`` fresh models (with history) in a new ``bank``."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    started = time.monotonic()
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute("INSERT INTO banks_bank (id, name, mission, disposition, config) "
                     "VALUES (%s, %s, '', '{}', '{}')", [bank, bank])
        recent: list[uuid.UUID] = []
        with conn.cursor() as cur, cur.copy(
            "COPY banks_memoryunit (id, bank_id, text, context, fact_type, tags, document_id, "
            "metadata, entities, source_memory_ids, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "text", "text", "text", "text", "text[]", "text", "jsonb",
                            "text[]", "uuid[]", "vector"])
            for start in range(0, memories, 5000):
                k = min(5000, memories - start)
                vectors = np_rng.standard_normal((k, DIMENSIONS)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                for row in range(k):
                    index = start + row
                    unit = uuid.uuid4()
                    observation = index % 10 == 9 and len(recent) >= 2
                    document = (None if observation or index % 2 else
                                f"doc-{index // (2 * FACTS_PER_DOCUMENT)}")
                    copy.write_row([
                        unit, bank, sentence(rng), "bench",
                        "observation" if observation else rng.choice(("world", "experience")),
                        rng.sample(TAGS, rng.randint(0, 2)), document,
                        psycopg.types.json.Jsonb({"source": "bench"}), [],
                        rng.sample(recent, 2) if observation else [], vectors[row],
                    ])
                    if not observation:
                        recent = [*recent[-999:], unit]
        conn.execute(
            "INSERT INTO mentalmodels_mentalmodel (bank_id, mental_model_id, name, source_query, "
            "content, tags, max_tokens, trigger, last_refreshed_at, last_memory_seen_at, "
            "reflect_response, embedding_model, embedding_content_hash, "
            "last_refresh_failure_transient, refresh_failure_streak) "
            "SELECT %s, 'bench-' || lpad(i::text, 5, '0'), 'Model ' || i, "
            "'What about topic ' || i || '?', repeat('A line of the model''s page. ', 40), "
            "ARRAY['team'], 2048, '{\"mode\": \"full\"}'::jsonb, clock_timestamp(), "
            "clock_timestamp(), '{\"text\": \"x\", \"based_on\": {\"world\": []}}'::jsonb, '', '', "
            "false, 0 FROM generate_series(1, %s) AS i", [bank, models])
        for previous in ("", "An older page."):
            conn.execute(
                "INSERT INTO mentalmodels_mentalmodelhistory (model_id, kind, previous_content) "
                "SELECT uid, 'version', %s FROM mentalmodels_mentalmodel WHERE bank_id = %s",
                [previous, bank])
        conn.commit()
    # A bank as it is once it has lived: its rows' hint bits set and statistics taken (the first
    # read of freshly copied rows writes every page, which is the seeding's cost, not an export's).
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE banks_memoryunit")
        conn.execute("VACUUM ANALYZE mentalmodels_mentalmodel")
    return round(time.monotonic() - started, 1)


# ---------------------------------------------------------------------------------------------
# The measured processes


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child(role: str, bank: str, path: str) -> None:
    """One export or import in this process; its figures as JSON on stdout."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    django.setup()
    from mentalmodels.models import MentalModel
    from mentalmodels.staleness import stale_flags
    from mentalmodels.transfer.exporter import Scope, bank_export
    from mentalmodels.transfer.importer import ImportRequest, bank_import

    baseline = _peak_rss_mb()
    started = time.monotonic()
    result: dict[str, Any]
    if role == "export":
        with open(path, "wb") as out:
            manifest = bank_export(bank_id=bank, scope=Scope(), out=out)
        result = {"facts": manifest["fact_count"], "observations": manifest["observation_count"],
                  "bytes": Path(path).stat().st_size}
    else:
        counts = bank_import(path=path, request=ImportRequest(target_bank_id=bank))
        models = list(MentalModel.objects.filter(bank_id=bank))
        result = {"memories": counts["facts_imported"] + counts["observations_imported"],
                  "models": len(models), "stale_models": sum(stale_flags(models).values())}
    result |= {"seconds": round(time.monotonic() - started, 1), "peak_rss_mb": _peak_rss_mb(),
               "rss_before_mb": baseline}
    print(json.dumps(result))


def measured(stack: Any, role: str, bank: str, path: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.bench_transfer", "--child", role,
                           bank, path], env=stack.env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {role} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argument_parser("bench.bench_transfer", __doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--json", default=None, help="Also write the figures to this file")
    parser.add_argument("--child", nargs=3, metavar=("ROLE", "BANK", "PATH"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    from fakes.llm_server import ScriptedLLMServer

    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    llm = ScriptedLLMServer().start()
    stack = bench_stack("bench-transfer", llm=llm, valkey=False)
    results: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="bench-transfer-"))
    try:
        stack.start_servers()
        stack.migrate(verbosity=0)
        for size in sizes:
            source, copy = f"src-{size}", f"copy-{size}"
            seeded = seed(stack.database_url, source, size, args.models, rng)
            log(f"{size} memories, {args.models} models seeded in {seeded} s")
            archive = str(scratch / f"{source}.zip")
            exported = measured(stack, "export", source, archive)
            log(f"export: {exported}")
            imported = measured(stack, "import", copy, archive)
            log(f"import: {imported}")
            Path(archive).unlink()
            results.append({"memories": size, "models": args.models, "export": exported,
                            "import": imported})
    finally:
        stack.stop()
        stack.remove_data()
        shutil.rmtree(scratch, ignore_errors=True)
        llm.stop()
    print(report(results))
    if args.json:
        write_json({"runs": results}, args.json)


def report(results: list[dict[str, Any]]) -> str:
    lines = [f"{'memories':>9} {'models':>6} | {'export s':>8} {'peak MB':>8} {'archive MB':>10} |"
             f" {'import s':>8} {'peak MB':>8} {'written':>8} {'stale':>5}"]
    for r in results:
        e, i = r["export"], r["import"]
        lines.append(f"{r['memories']:>9} {r['models']:>6} | {e['seconds']:>8} "
                     f"{e['peak_rss_mb']:>8} {e['bytes'] / 1e6:>10.1f} | {i['seconds']:>8} "
                     f"{i['peak_rss_mb']:>8} {i['memories']:>8} {i['stale_models']:>5}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
