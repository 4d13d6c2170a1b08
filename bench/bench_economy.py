"""Economy benchmark: what automatic refreshes cost when a bank ingests continuously (run on
demand; not a test).

Over HTTP against a real API process and a real Celery worker, with the scripted
OpenAI-compatible LLM (``fakes.consolidation_llm``: one observation per consolidation
round, a reflect loop that reads its tools), it retains ``--retains`` facts (default 1,000,
one per request, ``strategy: verbatim`` so extraction costs nothing and the figures are
consolidation and refreshes only) into a bank, then waits for the bank to settle and prints the
LLM requests and tokens of the request log, split into consolidation and refreshes, for:

- ``all-in-scope``: 20 models with ``refresh_after_consolidation`` tagged ``team``, the tag
  every retain carries;
- ``half-untouched``: 10 such models plus 10 tagged ``elsewhere``, a scope no retain touches
  (their cost must be 0);

each with the rate floor (``min_refresh_interval_seconds`` on every model) at 0 and at
``--floor`` seconds (default 60). Retains are sent as fast as the API answers, so the floor run
shows what a burst costs. Then

- ``budgeted``: the all-in-scope bank with ``llm_token_budget_per_day`` = ``--budget`` (default
  100,000): once the bank is spent its consolidation and refreshes are parked, so its total
  stays within the budget plus the overspend bound (README "Spend": one call per worker slot
  running at the crossing, here ``--workers`` × the costliest operation of the run).

``--only-budget`` runs the budgeted bank alone.

By default it starts its own embedded PostgreSQL and Valkey on free ports (throw-away data).

    .venv/bin/python -m bench.bench_economy
    .venv/bin/python -m bench.bench_economy --retains 200 --floor 20
    .venv/bin/python -m bench.bench_economy --only-budget --retains 300 --budget 50000
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from functools import partial
from typing import Any

from bench.harness import argument_parser, bench_stack, call_json, start_api_and_worker
from fakes.consolidation_llm import ConsolidatingLLM
from fakes.llm_server import ScriptedLLMServer

_call = partial(call_json, timeout=120)


def _settled(bank_id: str) -> bool:
    from operations.models import Operation

    return not Operation.objects.filter(bank_id=bank_id,
                                        status__in=("pending", "processing")).exists()


def _costs(bank_id: str) -> dict[str, dict[str, int]]:
    """Requests and tokens of the bank's log, by what they were for."""
    from django.db.models import Count, Sum

    from hindsight.infra.llm.models import LLMRequest
    from operations.models import Operation

    model_of = dict(Operation.objects.filter(bank_id=bank_id, mental_model_id__isnull=False)
                    .values_list("id", "mental_model_id"))
    out: dict[str, dict[str, int]] = {}
    rows = (LLMRequest.objects.filter(bank_id=bank_id)
            .values("operation", "operation_id")
            .annotate(n=Count("id"), i=Sum("input_tokens"), o=Sum("output_tokens")))
    for row in rows:
        if row["operation"] == "refresh_mental_model":
            model = model_of.get(row["operation_id"], "?")
            key = "refresh:" + ("untouched" if model.startswith("elsewhere") else "in-scope")
        else:
            key = row["operation"] or "other"
        bucket = out.setdefault(key, {"requests": 0, "input": 0, "output": 0, "refreshes": 0})
        bucket["requests"] += row["n"]
        bucket["input"] += row["i"] or 0
        bucket["output"] += row["o"] or 0
    for model_id, n in (Operation.objects.filter(bank_id=bank_id,
                                                 operation_type="refresh_mental_model",
                                                 status="completed", automatic=True)
                        .values_list("mental_model_id").annotate(n=Count("id"))):
        key = "refresh:" + ("untouched" if model_id.startswith("elsewhere") else "in-scope")
        out.setdefault(key, {"requests": 0, "input": 0, "output": 0, "refreshes": 0})
        out[key]["refreshes"] += n
    return out


def scenario(base: str, llm: Any, *, name: str, untouched: int, floor: int, retains: int) -> None:
    bank_id = f"bench-eco-{name}-{floor}-{uuid.uuid4().hex[:4]}"
    _call(base, "PUT", f"/v1/default/banks/{bank_id}", {"name": name})
    for i in range(20):
        tag = "elsewhere" if i < untouched else "team"
        _call(base, "POST", f"/v1/default/banks/{bank_id}/mental-models", {
            "id": f"{tag}-{i}", "name": f"{tag} {i}", "source_query": "What about the team?",
            "tags": [tag], "trigger": {"refresh_after_consolidation": True,
                                       "min_refresh_interval_seconds": floor}})
    while not _settled(bank_id):  # the first refreshes: empty scopes, no LLM request
        time.sleep(0.2)
    before = len(llm.requests)
    started = time.monotonic()
    for i in range(retains):
        _call(base, "POST", f"/v1/default/banks/{bank_id}/memories", {"items": [
            {"content": f"Team fact {i}: item {i} of the stream", "tags": ["team"],
             "strategy": "verbatim"}]})
    ingest = time.monotonic() - started
    while not _settled(bank_id):
        time.sleep(0.5)
    total = time.monotonic() - started
    costs = _costs(bank_id)
    sent = len(llm.requests) - before
    logged = sum(c["requests"] for c in costs.values())
    print(f"\n{name}, floor {floor} s: {retains} retains in {ingest:.1f} s, settled after "
          f"{total:.1f} s; LLM requests sent {sent}, logged {logged}")
    for key in sorted(costs):
        c = costs[key]
        extra = f"  ({c['refreshes']} refreshes)" if key.startswith("refresh") else ""
        print(f"  {key:<20} {c['requests']:6d} requests  {c['input']:9,d} in  "
              f"{c['output']:8,d} out tokens{extra}")
    if untouched and "refresh:untouched" in costs:
        print("  !! models tagged to an untouched scope spent something")


def _parked_by_budget(bank_id: str) -> int:
    from hindsight.banks.budget import PARKED_BY_BUDGET
    from operations.models import Operation

    return Operation.objects.filter(
        bank_id=bank_id, status="pending",
        result_metadata__parked_by__reason=PARKED_BY_BUDGET).count()


def _budget_settled(bank_id: str) -> bool:
    """Nothing runs and every pending operation waits for the budget (or none is pending)."""
    from operations.models import Operation

    ops = Operation.objects.filter(bank_id=bank_id, status__in=("pending", "processing"))
    return not ops.filter(status="processing").exists() and (
        ops.count() == _parked_by_budget(bank_id))


def budgeted(base: str, llm: Any, *, budget: int, retains: int, workers: int) -> bool:
    """The all-in-scope bank under a token budget; True when the total is within the bound."""
    from django.db.models import F, Sum

    from hindsight.infra.llm.models import LLMRequest
    from operations.models import Operation

    bank_id = f"bench-eco-budget-{uuid.uuid4().hex[:4]}"
    _call(base, "PUT", f"/v1/default/banks/{bank_id}", {"name": "budgeted"})
    _call(base, "PATCH", f"/v1/default/banks/{bank_id}/config",
          {"updates": {"llm_token_budget_per_day": budget}})
    for i in range(20):
        _call(base, "POST", f"/v1/default/banks/{bank_id}/mental-models", {
            "id": f"team-{i}", "name": f"team {i}", "source_query": "What about the team?",
            "tags": ["team"], "trigger": {"refresh_after_consolidation": True}})
    while not _settled(bank_id):
        time.sleep(0.2)
    started = time.monotonic()
    for i in range(retains):  # verbatim: accepted while spent (it spends nothing itself)
        _call(base, "POST", f"/v1/default/banks/{bank_id}/memories", {"items": [
            {"content": f"Team fact {i}: item {i} of the stream", "tags": ["team"],
             "strategy": "verbatim"}]})
    time.sleep(2.0)
    while not _budget_settled(bank_id):
        time.sleep(0.5)
    total = (LLMRequest.objects.filter(bank_id=bank_id)
             .aggregate(t=Sum(F("input_tokens") + F("output_tokens")))["t"] or 0)
    costliest = max((int(((op.result_metadata or {}).get("llm") or {}).get("total_tokens", 0))
                     for op in Operation.objects.filter(bank_id=bank_id)), default=0)
    bound = budget + workers * costliest
    stats = _call(base, "GET", f"/v1/default/banks/{bank_id}/stats")
    print(f"\nbudgeted, budget {budget:,} tokens/day: {retains} retains, settled after "
          f"{time.monotonic() - started:.1f} s")
    print(f"  spent {total:,} tokens (stats: {stats['llm_tokens_last_24h']:,}); bound "
          f"{budget:,} + {workers} x {costliest:,} (costliest operation) = {bound:,}; "
          f"spent / budget {total / budget:.3f}, spent / bound {total / bound:.3f}")
    print(f"  parked by the budget: {_parked_by_budget(bank_id)} operation(s)"
          f"{'' if total <= bound else '  !! over the bound'}")
    return total <= bound


def main() -> None:
    parser = argument_parser("bench.bench_economy", __doc__)
    parser.add_argument("--retains", type=int, default=1000)
    parser.add_argument("--floor", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (-c)")
    parser.add_argument("--budget", type=int, default=100_000,
                        help="the budgeted bank's llm_token_budget_per_day")
    parser.add_argument("--only-budget", action="store_true", help="run the budgeted bank only")
    args = parser.parse_args()
    within = True

    llm = ScriptedLLMServer().start()
    ConsolidatingLLM(llm, usage=None)  # tokens estimated from the words each request sends
    stack = bench_stack("bench-eco", llm=llm)
    stop = threading.Event()

    def beat() -> None:  # what celery-beat's operations.release_due does: send due parks
        from operations.engine import release_due

        while not stop.wait(1.0):
            release_due()

    try:
        start_api_and_worker(stack, concurrency=args.workers, name="bench-eco")
        base = stack.base_url
        threading.Thread(target=beat, daemon=True).start()
        print(f"# cores: {os.cpu_count()}  retains {args.retains}  worker -c {args.workers}")
        for floor in () if args.only_budget else (0, args.floor):
            scenario(base, llm, name="all-in-scope", untouched=0, floor=floor,
                     retains=args.retains)
            scenario(base, llm, name="half-untouched", untouched=10, floor=floor,
                     retains=args.retains)
        within = budgeted(base, llm, budget=args.budget, retains=args.retains,
                          workers=args.workers)
    finally:
        stop.set()
        stack.stop()
        llm.stop()
    sys.exit(0 if within else 1)


if __name__ == "__main__":
    main()
