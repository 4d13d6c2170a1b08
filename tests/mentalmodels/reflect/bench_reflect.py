"""On-demand timings of reflect (not collected by the test run: the name is not test_*).

Run: .venv/bin/python -m pytest -q -s tests/mentalmodels/reflect/bench_reflect.py
Prints the mental-model search latency with the local embedder (first search re-embeds every
model, later ones embed only the query) and the whole reflect loop over 2,000 memories with the
scripted LLM (so the figure is our overhead: retrieval, staleness, tool payloads, bookkeeping).
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time

import pytest

from fakes.llm_server import Reply
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.infra.config import LOCAL_EMBEDDING_DIMENSIONS, LOCAL_EMBEDDING_MODEL
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.tagscope import TagScope
from mentalmodels.models import MentalModel
from mentalmodels.reflect import reflect_run
from mentalmodels.reflect.mm_search import mental_models_search

pytestmark = pytest.mark.django_db

WORDS = ["alpha", "beta", "gamma", "delta", "team", "slack", "deploy", "coffee", "release", "pipeline", "async", "meeting", "budget", "roadmap", "hiring", "design", "review", "oncall", "incident", "customer"]


def _words(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def test_bench_mental_model_search_with_the_local_embedder(settings, capsys):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, embeddings_provider="local", embeddings_model=LOCAL_EMBEDDING_MODEL,
        embeddings_dimensions=LOCAL_EMBEDDING_DIMENSIONS,
    )
    bank = Bank.objects.create(id="bench-mm")
    rnd = random.Random(1)
    for i in range(100):
        MentalModel.objects.create(bank=bank, mental_model_id=f"m{i}", name=f"Model {i}",
                                   source_query="q", content=_words(rnd, 300))
    get_embedder().embed(["warm up"])
    started = time.perf_counter()
    first = mental_models_search(bank_id=bank.id, query="slack async team", scope=TagScope())
    first_ms = (time.perf_counter() - started) * 1000
    times = []
    for query in ["deploy pipeline", "coffee", "hiring roadmap", "incident oncall", "budget"] * 4:
        started = time.perf_counter()
        mental_models_search(bank_id=bank.id, query=query, scope=TagScope())
        times.append((time.perf_counter() - started) * 1000)
    with capsys.disabled():
        print(f"\nlocal embedder, 100 models x 300 words: first search (re-embeds "
              f"{first.reembedded}) {first_ms:.0f} ms; warm searches p50 "
              f"{statistics.median(times):.1f} ms, max {max(times):.1f} ms")


def test_bench_reflect_loop_overhead(scripted_llm, capsys):
    bank = Bank.objects.create(id="bench-loop")
    rnd = random.Random(2)
    texts = [_words(rnd, 30) for _ in range(2000)]
    vectors = get_embedder().embed(texts)
    MemoryUnit.objects.bulk_create([
        MemoryUnit(bank=bank, text=t, embedding=v,
                   fact_type="observation" if i % 4 == 0 else "world")
        for i, (t, v) in enumerate(zip(texts, vectors))
    ])
    for i in range(20):
        MentalModel.objects.create(bank=bank, mental_model_id=f"m{i}", name=f"Model {i}",
                                   source_query="q", content=_words(rnd, 200))
    turns = [("search_mental_models", {"query": "slack async"}),
             ("search_observations", {"query": "slack async"}),
             ("recall", {"query": "slack async team"})]

    def responder(body: dict) -> Reply:
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done < len(turns):
            return Reply.tool_calls([turns[done]])
        return Reply.tool_calls([("done", {"answer": "ok"})])

    scripted_llm.respond_with(responder)
    times = []
    for _ in range(10):
        started = time.perf_counter()
        result = reflect_run(bank_id=bank.id, query="how does the team use slack async",
                             scope=TagScope(), budget="mid")
        times.append((time.perf_counter() - started) * 1000)
    tool_ms = sum(c["duration_ms"] for c in result.tool_calls)
    with capsys.disabled():
        print(f"\nreflect, 2000 memories + 20 models, scripted LLM (4 calls): p50 "
              f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms; tools {tool_ms} ms "
              f"of the last run, {len(result.memories_read)} memories read")
