"""Delta-mode token benchmark (run on demand; not a test).

LLM input tokens per refresh as a bank grows, delta mode next to full mode. At each bank size
(default 1,000 / 10,000 / 100,000 memories, seeded by ``COPY`` with synthetic unit vectors,
``bench.bench_memory``'s seeder) it

- runs ``--refreshes`` delta refreshes of a fresh delta model (its baseline is a first, full
  refresh), each after 10 new memories were written, and
- runs the same number of full refreshes of a full-mode model over the same bank,

and prints the mean input tokens per refresh of each (the pipeline's own usage count, summed over
every LLM call of the refresh: the reflect loop, and in delta mode the operations call). The
delta model's document grows by the same number of blocks at every size, so what changes from
one row to the next is only the bank.

The LLM is the scripted OpenAI-compatible server (``fakes.llm_server``) answering at once:
its token count is whitespace-separated words of every message sent, a deterministic stand-in
proportional to what a provider would bill. Refreshes run in this process through
``mentalmodels.refresh.pipeline.refresh_run`` (through a claimed operation's fenced job) on an
embedded PostgreSQL (throw-away data).

    .venv/bin/python -m bench.bench_delta_tokens
    .venv/bin/python -m bench.bench_delta_tokens --sizes 1000,10000 --refreshes 3
"""

from __future__ import annotations

import os
import random
import statistics
import uuid
from typing import Any

from bench.bench_memory import seed
from bench.harness import argument_parser, bench_stack, ratio
from fakes.delta_llm import is_delta_call, parse_delta_call
from fakes.llm_server import Reply, ScriptedLLMServer, reflect_reply

NEW_PER_REFRESH = 10


def responder(body: dict[str, Any]) -> Any:
    if body.get("response_format") and is_delta_call(body):
        call = parse_delta_call(body)
        last = call.outline[-1]["section_id"]
        return Reply.json({"operations": [
            {"op": "append_block", "section_id": last, "markdown": f"- {fact}"}
            for fact in call.facts]})
    doc = "## Team\n\n" + "\n\n".join(f"Paragraph {i} of the baseline document." for i in range(12))
    return reflect_reply(body, doc, first=NEW_PER_REFRESH, query="the team")


def main() -> None:
    parser = argument_parser("bench.bench_delta_tokens", __doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--refreshes", type=int, default=5)
    parser.add_argument("--random-seed", type=int, default=7)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    verbose = args.verbose
    rng = random.Random(args.random_seed)
    sizes = [int(s) for s in args.sizes.split(",")]

    llm = ScriptedLLMServer().start()
    llm.respond_with(responder)
    # No broker: the refreshes run in this process.
    stack = bench_stack("bench-delta", llm=llm, queue=False, valkey=False)
    stack.start_servers()
    stack.use_here()
    pg_url = stack.database_url
    import psycopg

    from hindsight.banks.models import Bank
    from mentalmodels.models import MentalModel
    from mentalmodels.refresh import pipeline
    from mentalmodels.services import refresh_dedupe_key
    from mentalmodels.triggers import trigger_normalize
    from operations.jobs import Job
    from operations.leases import operation_claim
    from operations.models import Operation

    def refresh_run(*, bank_id: str, mental_model_id: str, mode: str | None = None) -> Any:
        """One refresh attempt the way a worker runs it: a claimed operation, its fenced job."""
        op = Operation.objects.create(
            bank_id=bank_id, operation_type="refresh_mental_model",
            mental_model_id=mental_model_id, payload={"mode": mode} if mode else {},
            dedupe_key=refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id))
        claimed = operation_claim(operation_id=op.id, holder="bench")
        assert isinstance(claimed, Operation), claimed
        return pipeline.refresh_run(job=Job(claimed, fence=claimed.fence, key=claimed.lease_key))

    try:
        stack.migrate(verbosity=0)
        with psycopg.connect(pg_url) as conn:
            # Throw-away data: exact scans instead of maintaining the HNSW index per row.
            conn.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        bank_id = f"bench-delta-{uuid.uuid4().hex[:6]}"
        Bank.objects.create(id=bank_id, name="delta token benchmark")
        print(f"# cores: {os.cpu_count()}  {NEW_PER_REFRESH} new memories per refresh, "
              f"{args.refreshes} refreshes per mode and size")
        print(f"{'memories':>9}  {'delta in/refresh':>16}  {'full in/refresh':>15}  "
              f"{'full/delta':>10}  {'delta ops applied':>17}")
        seeded = 0
        rows = []
        for size in sizes:
            seed(pg_url, bank_id, size - seeded, 384, rng)
            seeded = size
            with psycopg.connect(pg_url) as conn:
                conn.execute("ANALYZE banks_memoryunit")
            # One pair of models at a time: a sibling's content would be read by the mental-model
            # search (unbounded in both modes) and blur what the bank size does.
            MentalModel.objects.filter(bank_id=bank_id).delete()
            delta_id, full_id = f"delta-{size}", f"full-{size}"
            for mm_id, mode in ((delta_id, "delta"), (full_id, "full")):
                # Sibling models excluded: both read memories, which is what grows.
                MentalModel.objects.create(bank_id=bank_id, mental_model_id=mm_id, name=mm_id,
                                           source_query="How does the team work?",
                                           trigger=trigger_normalize({"mode": mode, "exclude_mental_models": True}))
            baseline = refresh_run(bank_id=bank_id, mental_model_id=delta_id)
            assert baseline.plan.effective_mode == "full", baseline.plan
            delta_tokens, full_tokens, applied = [], [], 0
            for _ in range(args.refreshes):
                seed(pg_url, bank_id, NEW_PER_REFRESH, 384, rng)
                seeded += NEW_PER_REFRESH
                report = refresh_run(bank_id=bank_id, mental_model_id=delta_id)
                assert report.plan.effective_mode == "delta", report.plan
                assert report.outcome.outcome == "content_written", report.outcome.outcome
                applied += len((report.outcome.delta_operations or {}).get("applied", []))
                delta_tokens.append(report.usage["input_tokens"])
                full = refresh_run(bank_id=bank_id, mental_model_id=full_id, mode="full")
                full_tokens.append(full.usage["input_tokens"])
                if verbose:
                    reads = [(c["tool"], c["result_count"]) for c in report.trace["tool_calls"]]
                    full_reads = [(c["tool"], c["result_count"]) for c in full.trace["tool_calls"]]
                    print(f"  delta {report.usage['input_tokens']} tokens, read {reads}; "
                          f"full {full.usage['input_tokens']} tokens, read {full_reads}")
            d, f = statistics.fmean(delta_tokens), statistics.fmean(full_tokens)
            rows.append((size, d, f))
            print(f"{size:>9,}  {d:>16,.0f}  {f:>15,.0f}  {ratio(f, d, 1):>10}  {applied:>17}")
        first, last = rows[0], rows[-1]
        print(f"\ndelta input tokens {last[0]:,} vs {first[0]:,} memories: "
              f"{ratio(last[1], first[1])}; full: {ratio(last[2], first[2])}")
    finally:
        llm.stop()
        stack.stop()


if __name__ == "__main__":
    main()
