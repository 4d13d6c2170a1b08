"""Recall (``memory_recall``): the one retrieval reflect and a mental-model refresh reuse.

Semantic (pgvector cosine over the HNSW index) and lexical (PostgreSQL full text) arms, plus a
temporal arm when a window is given, fused by reciprocal rank (k = 60), filtered by a
``TagScope`` (``hindsight.tagscope`` compiles it) and cut to a token budget counted offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from hindsight.banks.models import MemoryUnit
from hindsight.banks.tokens import count_tokens_batch
from hindsight.embeddings import get_embedder
from hindsight.tagscope import TagScope, scope_sql

RRF_K = 60
# Candidates each arm contributes before fusion, per recall budget.
BUDGET_CANDIDATES = {"low": 30, "mid": 60, "high": 120}


# ------------------------------------------------------------------------------------


@dataclass
class RecallHit:
    id: str
    text: str
    context: str
    fact_type: str
    tags: list[str]
    updated_at: datetime
    created_at: datetime
    document_id: str | None
    metadata: dict[str, Any]
    entities: list[str]
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    source_memory_ids: list[str]
    score: float
    semantic: float | None = None
    keyword: float | None = None
    tokens: int = 0
    arms: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RecallFloors:
    semantic: float | None = None
    keyword: float | None = None
    final: float | None = None


def _filters(
    *, bank_id: str, scope: TagScope, cutoff: datetime | None, updated_after: datetime | None,
    exclude_ids: Sequence[str],
) -> tuple[str, list[Any]]:
    where, params = scope_sql(scope, alias="m")
    parts = ["m.bank_id = %s", where]
    out: list[Any] = [bank_id, *params]
    if cutoff is not None:
        parts.append("m.updated_at <= %s")
        out.append(cutoff)
    if updated_after is not None:
        parts.append("m.updated_at > %s")
        out.append(updated_after)
    if exclude_ids:
        parts.append("NOT (m.id = ANY(%s::uuid[]))")
        out.append([str(i) for i in exclude_ids])
    return " AND ".join(parts), out


def _keyword_arm(
    cursor: Any, query: str, where: str, params: list[Any], floor: float | None, candidates: int
) -> list[tuple[str, float]]:
    """Full-text candidates, best ``ts_rank_cd`` first.

    Memories holding every lexeme of the query are tried first: when there are enough of them
    they are the top of the ranking anyway, and the query stays cheap. Otherwise the lexemes
    are OR-ed (a question rarely matches in full) and every match is ranked.
    """
    cursor.execute("SELECT plainto_tsquery('english', %s)::text", [query])
    all_terms = cursor.fetchone()[0]
    if not all_terms:
        return []
    attempts = [all_terms.replace(" & ", " | ")]
    if " & " in all_terms:
        attempts.insert(0, all_terms)
    floor_sql = "AND ts_rank_cd(m.search_vector, %s::tsquery) >= %s" if floor is not None else ""
    rows: list[tuple[Any, float]] = []
    for tsquery in attempts:
        cursor.execute(
            "SELECT m.id, ts_rank_cd(m.search_vector, %s::tsquery) AS rank FROM banks_memoryunit m "
            f"WHERE m.search_vector @@ %s::tsquery AND {where} {floor_sql} "
            "ORDER BY rank DESC, m.updated_at DESC LIMIT %s",
            [tsquery, tsquery, *params, *([tsquery, floor] if floor is not None else []),
             candidates],
        )
        rows = cursor.fetchall()
        if len(rows) >= candidates:
            break
    return [(str(i), float(r)) for i, r in rows]


def memory_recall(
    *,
    bank_id: str,
    query: str,
    scope: TagScope,
    max_tokens: int = 4096,
    limit: int | None = None,
    cutoff: datetime | None = None,
    updated_after: datetime | None = None,
    exclude_ids: Sequence[str] = (),
    budget: str = "mid",
    temporal_window: tuple[datetime, datetime] | None = None,
    floors: RecallFloors = RecallFloors(),
    prefer_observations: bool = False,
    query_vector: list[float] | None = None,
) -> list[RecallHit]:
    """Memories of ``bank_id`` in ``scope`` most relevant to ``query``, best first.

    ``cutoff`` keeps memories stamped at or before it (a refresh's snapshot); ``updated_after``
    keeps those stamped after it (a delta window). The result fits ``max_tokens`` (memory
    texts counted offline) and ``limit``. Raises ``EmbeddingError`` when the query cannot be
    embedded (a refresh treats that as a failed retrieval). Runs no I/O inside a transaction:
    the query is embedded first.
    """
    candidates = max(BUDGET_CANDIDATES.get(budget, 60), limit or 0)
    if query_vector is None:
        query_vector = get_embedder().embed([query])[0]
    where, params = _filters(
        bank_id=bank_id, scope=scope, cutoff=cutoff, updated_after=updated_after,
        exclude_ids=exclude_ids,
    )
    vector_literal = "[" + ",".join(repr(float(x)) for x in query_vector) + "]"
    arms: dict[str, list[tuple[str, float]]] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # Filtered HNSW scans stop early without iterative scans (pgvector >= 0.8): a bank or
        # tag filter would otherwise starve the semantic arm on a shared index.
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # SET takes no bind parameters; the value is an int computed here.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(max(40, min(candidates * 2, 1000)))}")
        semantic_floor = ""
        semantic_params: list[Any] = []
        if floors.semantic is not None:
            semantic_floor = "AND 1 - (m.embedding <=> %s::vector) >= %s"
            semantic_params = [vector_literal, floors.semantic]
        cursor.execute(
            "SELECT id, sim FROM (SELECT m.id, 1 - (m.embedding <=> %s::vector) AS sim, "
            "m.embedding <=> %s::vector AS dist FROM banks_memoryunit m "
            f"WHERE m.embedding IS NOT NULL AND {where} {semantic_floor} "
            "ORDER BY m.embedding <=> %s::vector LIMIT %s) s ORDER BY dist",
            [vector_literal, vector_literal, *params, *semantic_params, vector_literal, candidates],
        )
        arms["semantic"] = [(str(i), float(s)) for i, s in cursor.fetchall()]
        arms["keyword"] = _keyword_arm(cursor, query, where, params, floors.keyword, candidates)
        if temporal_window is not None:
            start, end = temporal_window
            cursor.execute(
                "SELECT m.id, 0 FROM banks_memoryunit m "
                f"WHERE {where} AND COALESCE(m.occurred_start, m.mentioned_at) BETWEEN %s AND %s "
                "ORDER BY COALESCE(m.occurred_start, m.mentioned_at) DESC LIMIT %s",
                [*params, start, end, candidates],
            )
            arms["temporal"] = [(str(i), 0.0) for i, _ in cursor.fetchall()]

    fused: dict[str, float] = {}
    raw: dict[str, dict[str, float]] = {}
    for arm, ranked in arms.items():
        for rank, (memory_id, value) in enumerate(ranked, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (RRF_K + rank)
            raw.setdefault(memory_id, {})[arm] = value
    ordered = sorted(fused, key=lambda i: (-fused[i], i))
    if floors.final is not None:
        ordered = [i for i in ordered if fused[i] >= floors.final]
    rows = {
        str(m.id): m
        for m in MemoryUnit.objects.filter(id__in=ordered).defer("embedding", "search_vector")
    }
    ordered = [i for i in ordered if i in rows]
    if prefer_observations:
        superseded = {
            str(s) for i in ordered if rows[i].fact_type == "observation"
            for s in rows[i].source_memory_ids
        }
        ordered = [i for i in ordered if i not in superseded]
    token_counts = count_tokens_batch([rows[i].text for i in ordered])
    hits: list[RecallHit] = []
    used = 0
    for memory_id, tokens in zip(ordered, token_counts, strict=True):
        if limit is not None and len(hits) >= limit:
            break
        if used + tokens > max_tokens:
            break
        used += tokens
        m = rows[memory_id]
        hits.append(
            RecallHit(
                id=memory_id, text=m.text, context=m.context, fact_type=m.fact_type,
                tags=list(m.tags), updated_at=m.updated_at, created_at=m.created_at,
                document_id=m.document_id, metadata=dict(m.metadata or {}),
                entities=list(m.entities), occurred_start=m.occurred_start,
                occurred_end=m.occurred_end, mentioned_at=m.mentioned_at,
                source_memory_ids=[str(s) for s in m.source_memory_ids],
                score=fused[memory_id], semantic=raw[memory_id].get("semantic"),
                keyword=raw[memory_id].get("keyword"), tokens=tokens,
                arms=sorted(raw[memory_id]),
            )
        )
    return hits
