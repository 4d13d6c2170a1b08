"""Retain (verbatim, all-or-nothing, document replace, write clock) and recall (fusion, filters,
token budget)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from hindsight.banks import recall, services
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.tokens import count_tokens
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.tagscope import TagScope
from operations.models import Operation

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


def post(api: APIClient, path: str, body: Any) -> Any:
    return api.post(f"{BASE}/{path}", body, format="json")


def test_a_retained_fact_stores_exactly_the_embedders_vector(api: APIClient) -> None:
    texts = ["Alice prefers async communication.", "The deploy runs at 09:00 on Mondays.",
             "Bob's budget review moved to Friday"]
    response = post(api, "v/memories", {"items": [{"content": t} for t in texts]})
    assert response.status_code == 200, response.content
    wanted = np.array(get_embedder().embed(texts), dtype=np.float32)
    for text, vector in zip(texts, wanted, strict=True):
        stored = MemoryUnit.objects.get(bank_id="v", text=text).embedding
        assert np.array_equal(np.array(stored, dtype=np.float32), vector)


def test_retain_without_llm_stores_each_item_verbatim_as_world_fact(api: APIClient) -> None:
    response = post(api, "r/memories", {
        "items": [
            {"content": "Alice prefers async communication.", "context": "team chat",
             "tags": ["team", "alice"], "metadata": {"k": "v"}, "document_id": "doc1",
             "timestamp": "2026-01-02T03:04:05Z", "entities": [{"text": "Alice"}],
             "resolve_entities": True, "observation_scopes": "per_tag", "strategy": None,
             "update_mode": None},
            {"content": "Bob likes tea."},
        ],
        "async": False, "document_tags": ["imported"],
    })
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {"success": True, "bank_id": "r", "items_count": 2, "async": False,
                    "operation_id": None, "operation_ids": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                              "cached_tokens": 0, "thoughts_tokens": 0}}
    alice = MemoryUnit.objects.get(bank_id="r", text="Alice prefers async communication.")
    assert alice.fact_type == "world" and alice.context == "team chat"
    assert alice.tags == ["team", "alice", "imported"] and alice.metadata == {"k": "v"}
    assert alice.document_id == "doc1" and alice.entities == ["Alice"]
    assert alice.mentioned_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert alice.embedding is not None and len(alice.embedding) == 384
    assert alice.consolidated_at is None


def test_retain_creates_the_bank_lazily(api: APIClient) -> None:
    assert post(api, "lazy/memories", {"items": [{"content": "x"}]}).status_code == 200
    assert api.get(f"{BASE}/lazy").status_code == 200


def test_retain_same_document_replaces_its_facts_unless_append(api: APIClient) -> None:
    post(api, "d/memories", {"items": [{"content": "v1", "document_id": "doc"}]})
    post(api, "d/memories", {"items": [{"content": "v2", "document_id": "doc"}]})
    assert list(MemoryUnit.objects.filter(bank_id="d").values_list("text", flat=True)) == ["v2"]
    post(api, "d/memories", {"items": [{"content": "v3", "document_id": "doc",
                                        "update_mode": "append"}]})
    assert sorted(MemoryUnit.objects.filter(bank_id="d").values_list("text", flat=True)) == ["v2", "v3"]


def test_retain_is_all_or_nothing_when_before_commit_raises(db: None) -> None:
    def refuse() -> None:
        raise RuntimeError("fence lost")

    with pytest.raises(RuntimeError):
        services.memories_retain(
            bank_id="aon", items=[RetainItem(content="a"), RetainItem(content="b")],
            before_commit=refuse,
        )
    assert not MemoryUnit.objects.filter(bank_id="aon").exists()


def test_retain_stamps_from_the_database_clock_under_the_bank_write_lock(db: None) -> None:
    calls: list[str] = []

    def probe() -> None:
        # Inside the write transaction: the shared advisory lock of the bank is held.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' "
                "AND pid = pg_backend_pid()"
            )
            calls.append(str(cursor.fetchone()[0]))

    before = datetime.now(UTC) - timedelta(seconds=5)
    result = services.memories_retain(bank_id="wc", items=[RetainItem(content="x")],
                                      before_commit=probe)
    assert calls == ["1"]
    unit = MemoryUnit.objects.get(id=result.memory_ids[0])
    assert unit.updated_at >= before and unit.created_at == unit.updated_at


def test_every_row_of_one_retain_carries_the_same_write_stamp(db: None) -> None:
    result = services.memories_retain(
        bank_id="wc2", items=[RetainItem(content="one"), RetainItem(content="two")]
    )
    stamps = set(MemoryUnit.objects.filter(id__in=result.memory_ids)
                 .values_list("updated_at", flat=True))
    assert len(stamps) == 1


def test_async_retain_queues_json_items_as_one_operation_and_stores_nothing_yet(api: APIClient) -> None:
    response = post(api, "as2/memories", {"items": [{"content": "x", "tags": ["t"]}],
                                          "async": True, "document_tags": ["d"]})
    assert response.status_code == 200
    assert response.json()["async"] is True
    op = Operation.objects.get(id=response.json()["operation_id"])
    assert op.bank_id == "as2" and op.operation_type == "retain"
    assert RetainItem.from_json(op.payload["items"][0]) == RetainItem(content="x", tags=["t", "d"])
    assert not MemoryUnit.objects.filter(bank_id="as2").exists()


def test_async_retain_creates_the_bank_lazily(db: None) -> None:
    # The engine never creates banks: the retain service ensures its bank before it submits.
    op_id = services.retain_submit_async(bank_id="fresh-bank",
                                         items=[RetainItem(content="x")]).operation_id
    assert Bank.objects.filter(id="fresh-bank").exists()
    assert Operation.objects.filter(id=op_id, bank_id="fresh-bank").exists()


def _seed(api: APIClient, bank: str) -> None:
    post(api, f"{bank}/memories", {"items": [
        # Lexical-only hit for the query below: shares the rare token, not the meaning.
        {"content": "Invoice ZX-4411 was archived by the accounting robot.", "tags": ["ops"]},
        # Semantic-only hit: same meaning, no shared word.
        {"content": "Felines enjoy napping in warm sunlight.", "tags": ["pets"]},
        {"content": "The quarterly budget meeting moved to Thursday.", "tags": ["ops"]},
        {"content": "Untagged note about databases and indexes."},
    ]})


def test_recall_returns_both_a_lexical_only_and_a_semantic_only_hit(api: APIClient) -> None:
    _seed(api, "rc")
    # Enough near-synonym filler that the semantic arm (budget low: 30 candidates) is full of
    # pets and never reaches the invoice, which only the lexical arm can find.
    animals = ["kittens", "tomcats", "house pets", "tabby felines", "pet animals", "young cats"]
    places = ["a sunny windowsill", "the afternoon sunshine", "a warm patch of light",
              "a heated blanket", "the bright porch", "a sunbeam"]
    post(api, "rc/memories", {"items": [
        {"content": f"Our {a} doze on {p}."} for a in animals for p in places]})
    hits = recall.memory_recall(
        bank_id="rc", query="cats sleeping in the sun zx-4411", scope=TagScope(),
        max_tokens=100_000, budget="low",
    )
    by_text = {h.text: h for h in hits}
    lexical = by_text["Invoice ZX-4411 was archived by the accounting robot."]
    semantic = by_text["Felines enjoy napping in warm sunlight."]
    assert lexical.semantic is None and lexical.keyword is not None
    assert semantic.keyword is None and semantic.semantic is not None
    assert lexical.arms == ["keyword"] and semantic.arms == ["semantic"]


def test_recall_api_filters_by_tags_types_and_shape(api: APIClient) -> None:
    _seed(api, "rf")
    body = post(api, "rf/memories/recall", {"query": "budget meeting", "tags": ["ops"],
                                            "tags_match": "any_strict"}).json()
    texts = [r["text"] for r in body["results"]]
    assert texts and all("Felines" not in t and "Untagged" not in t for t in texts)
    first = body["results"][0]
    assert first["text"] == "The quarterly budget meeting moved to Thursday."
    assert first["type"] == "world" and first["tags"] == ["ops"]
    assert set(first["scores"]) == {"final", "reranker", "semantic", "keyword"}
    any_mode = post(api, "rf/memories/recall", {"query": "databases", "tags": ["ops"],
                                                "tags_match": "any"}).json()
    assert "Untagged note about databases and indexes." in [r["text"] for r in any_mode["results"]]
    none = post(api, "rf/memories/recall", {"query": "budget", "types": ["experience"]}).json()
    assert none["results"] == []
    grouped = post(api, "rf/memories/recall", {
        "query": "anything", "tag_groups": [{"not": {"tags": ["ops"]}}]}).json()
    assert {r["text"] for r in grouped["results"]} == {
        "Felines enjoy napping in warm sunlight.", "Untagged note about databases and indexes."}


def test_recall_cuts_results_to_the_token_budget(api: APIClient) -> None:
    _seed(api, "rb")
    full = recall.memory_recall(bank_id="rb", query="notes", scope=TagScope(), max_tokens=10_000)
    assert len(full) == 4
    budget = full[0].tokens + full[1].tokens
    cut = recall.memory_recall(bank_id="rb", query="notes", scope=TagScope(), max_tokens=budget)
    assert [h.id for h in cut] == [h.id for h in full[:2]]
    assert sum(count_tokens(h.text) for h in cut) <= budget


def test_recall_snapshot_window_and_exclusions(api: APIClient) -> None:
    for text in ("alpha x", "beta x", "gamma x", "delta x"):  # one write each: four stamps
        post(api, "rw/memories", {"items": [{"content": text}]})
    units = list(MemoryUnit.objects.filter(bank_id="rw").order_by("updated_at"))
    assert len({u.updated_at for u in units}) == 4
    cutoff = units[1].updated_at
    before = recall.memory_recall(bank_id="rw", query="x", scope=TagScope(), cutoff=cutoff)
    assert {h.id for h in before} == {str(u.id) for u in units[:2]}
    after = recall.memory_recall(bank_id="rw", query="x", scope=TagScope(), updated_after=cutoff)
    assert {h.id for h in after} == {str(u.id) for u in units[2:]}
    excluded = recall.memory_recall(bank_id="rw", query="x", scope=TagScope(),
                                       exclude_ids=[str(units[0].id)])
    assert str(units[0].id) not in {h.id for h in excluded} and len(excluded) == 3


def test_recall_unknown_bank_is_404(api: APIClient) -> None:
    assert post(api, "nobank/memories/recall", {"query": "x"}).status_code == 404


def test_retain_stores_each_texts_token_count_and_recall_counts_the_rows_without_one(
    api: APIClient,
) -> None:
    _seed(api, "rt")
    units = list(MemoryUnit.objects.filter(bank_id="rt"))
    assert units and all(u.text_tokens == count_tokens(u.text) for u in units)
    stored = recall.memory_recall(bank_id="rt", query="notes", scope=TagScope(), max_tokens=10_000)
    # A row without a count (written before the column, or by consolidation) is counted on read.
    MemoryUnit.objects.filter(bank_id="rt").update(text_tokens=None)
    counted = recall.memory_recall(bank_id="rt", query="notes", scope=TagScope(), max_tokens=10_000)
    assert [(h.id, h.tokens, h.score) for h in counted] == [(h.id, h.tokens, h.score) for h in stored]
    assert all(h.tokens == count_tokens(h.text) for h in counted)


def test_a_changed_text_drops_its_stored_token_count(api: APIClient) -> None:
    post(api, "rx/memories", {"items": [{"content": "short"}]})
    unit = MemoryUnit.objects.get(bank_id="rx")
    assert unit.text_tokens == count_tokens("short")
    longer = "a much longer text than before, with many more word pieces in it"
    MemoryUnit.objects.filter(id=unit.id).update(text=longer)  # as consolidation rewrites one
    unit.refresh_from_db()
    assert unit.text_tokens is None
    (hit,) = recall.memory_recall(bank_id="rx", query="longer text", scope=TagScope())
    assert hit.tokens == count_tokens(longer)
    MemoryUnit.objects.filter(id=unit.id).update(text="short", text_tokens=1)  # set together
    unit.refresh_from_db()
    assert unit.text_tokens == 1


# --- the two ways to the same recall: the rows in scope ranked exactly, or each arm's index ---

_STRATEGY_TEXTS = [
    f"{who} {what} the {thing}." for who in ("Alice", "Bob", "Carol", "Dave")
    for what in ("reviewed", "deployed", "budgeted for", "postponed", "discussed")
    for thing in ("release", "database index", "quarterly report")
]
_STRATEGY_SCOPES = [
    TagScope(),
    TagScope(tags=("ops",), tags_match="any_strict"),
    TagScope(tags=("ops", "eng"), tags_match="all"),
    TagScope(tags=("eng",), tags_match="exact"),
    TagScope(fact_types=("world",)),
]


def _seed_strategies(api: APIClient, bank: str) -> None:
    tag_sets: list[list[str]] = [[], ["ops"], ["eng"], ["ops", "eng"]]
    post(api, f"{bank}/memories", {"items": [
        {"content": text, "tags": tag_sets[i % 4]} for i, text in enumerate(_STRATEGY_TEXTS)]})


# On a table this small the planner would rather sort the rows than walk HNSW: these make the
# index side use the index (sorting costs more than anything then).
_USE_THE_INDEXES = ("SET LOCAL enable_sort = off", "SET LOCAL enable_seqscan = off")


def _recall_with_bound(monkeypatch: pytest.MonkeyPatch, bound: int, **kwargs: Any) -> list[Any]:
    monkeypatch.setattr(recall, "EXACT_SCAN_MAX", bound)
    hits = recall.memory_recall(max_tokens=100_000, **kwargs)
    return [(h.id, h.score, h.semantic, h.keyword, h.tokens, h.arms) for h in hits]


def _plan(monkeypatch: pytest.MonkeyPatch, bound: int, **kwargs: Any) -> list[str]:
    """The retrieval statement's EXPLAIN ANALYZE, with ``EXACT_SCAN_MAX`` = ``bound``."""
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(recall, "EXACT_SCAN_MAX", bound)
    with CaptureQueriesContext(connection) as captured:
        recall.memory_recall(**kwargs)
    *settings, statement = captured.captured_queries[-1]["sql"].split("; ", 2)
    with connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(setting)
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement)
        return [row[0] for row in cursor.fetchall()]


def _side(plan: list[str]) -> str:
    """``exact`` when the semantic arm ranked ``scoped`` (its first reader, alias s), else
    ``index``."""
    (line,) = [line for line in plan if "CTE Scan on scoped s " in line]
    return "index" if "never executed" in line else "exact"


def test_recall_ranks_the_same_hits_exactly_and_through_the_indexes(
    api: APIClient, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a bank this small HNSW finds every nearest row: both sides must agree to the bit.
    _seed_strategies(api, "rs")
    stamps = sorted(MemoryUnit.objects.filter(bank_id="rs").values_list("updated_at", flat=True))
    some_id = str(MemoryUnit.objects.filter(bank_id="rs").values_list("id", flat=True)[0])
    for scope in _STRATEGY_SCOPES:
        for extra in ({}, {"budget": "low", "limit": 5}, {"exclude_ids": [some_id]},
                      {"floors": recall.RecallFloors(semantic=0.1, keyword=0.01)},
                      {"cutoff": stamps[-1]}, {"budget": "low", "ranked": 1}):
            # One retain, one stamp: a keyword cap of 30 (budget low, 1 per candidate) cuts
            # the OR matches among equal stamps.
            monkeypatch.setattr(recall, "KEYWORD_RANKED_PER_CANDIDATE", extra.pop("ranked", 20))
            kwargs: dict[str, Any] = {"bank_id": "rs", "query": "Bob deployed the release",
                                      "scope": scope, **extra}
            exact = _recall_with_bound(monkeypatch, 10_000, **kwargs)
            with transaction.atomic():
                with connection.cursor() as cursor:
                    for setting in _USE_THE_INDEXES:
                        cursor.execute(setting)
                index = _recall_with_bound(monkeypatch, 0, **kwargs)
                plan = _plan(monkeypatch, 0, **kwargs)
                transaction.set_rollback(True)  # the settings go with the savepoint
            assert exact and exact == index, (scope, extra)
            assert _side(plan) == "index"
            assert any("Index Scan using memory_embedding_hnsw" in line
                       and "never executed" not in line for line in plan), (scope, extra)


def test_recall_reads_the_rows_in_scope_at_most_the_bound_and_the_indexes_above(
    api: APIClient, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _seed_strategies(api, "rp")
    everything = len(_STRATEGY_TEXTS)
    tagged = TagScope(tags=("ops",), tags_match="any_strict")  # half of them
    cases = [
        (TagScope(), everything), (tagged, everything // 2),
        # An id filter: the count reads the rows, as a tag filter does.
        (TagScope(), everything),
    ]
    for index, (scope, rows) in enumerate(cases):
        kwargs: dict[str, Any] = {"bank_id": "rp", "query": "the release", "scope": scope}
        if index == 2:
            kwargs["exclude_ids"] = [str(MemoryUnit.objects.filter(bank_id="rp").first().id)]  # type: ignore[union-attr]
            rows -= 1
        assert _side(_plan(monkeypatch, rows, **kwargs)) == "exact", scope
        assert _side(_plan(monkeypatch, rows - 1, **kwargs)) == "index", scope
