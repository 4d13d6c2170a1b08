"""Recall (``memory_recall``): the one retrieval reflect and a mental-model refresh reuse.

Semantic (pgvector cosine: every row of a small scope, else the HNSW index) and lexical
(PostgreSQL full text) arms, plus a temporal arm when a window is given, fused by reciprocal
rank (k = 60), filtered by a ``TagScope`` (``hindsight.infra.tagscope`` compiles it) and cut to a
token budget counted offline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection

from hindsight.banks.tokens import count_tokens_batch
from hindsight.infra.db import vector_literal
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.tagscope import TagScope, filters_tags, scope_sql
from hindsight.infra.vocabulary import FactType

RRF_K = 60
# Candidates each arm contributes before fusion, per recall budget.
BUDGET_CANDIDATES = {"low": 30, "mid": 60, "high": 120}
# The keyword arm ranks at most this many matches per candidate it returns, the newest first: a
# query of common words matches a large share of a big bank, and ranking every match would make
# recall grow with the bank. Below the cap (rare words, ordinary banks) every match is ranked.
KEYWORD_RANKED_PER_CANDIDATE = 20
# At most this many rows in scope: a recall reads them once and ranks all of them by exact
# distance (and its keyword arm filters them in memory); more: each arm reads its own index
# (HNSW, approximate). HNSW with a filter that keeps a share s of the shared table evaluates
# ~32 neighbours per tuple it returns, and returns ~candidates / s tuples before enough pass the
# filter: a small bank or a selective tag pays for every other bank's rows. Measured on 112k
# rows, 60 candidates: a 10k bank ranks 2-3x faster exactly; 11k scattered rows (a tag in a
# 100k bank) about break even, and the keyword arm then reads no second copy of them.
EXACT_SCAN_MAX = 15_000


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


class _Row(NamedTuple):
    """A candidate's columns as the retrieval statement returns them (``_HIT_COLUMNS``)."""

    text: str
    context: str
    fact_type: str
    tags: list[str]
    updated_at: datetime
    created_at: datetime
    document_id: str | None
    metadata: Any
    entities: list[str]
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    source_memory_ids: list[Any]
    text_tokens: int | None


def _json_object(value: Any) -> dict[str, Any]:
    # Django's connection hands jsonb over as text (JSONField decodes it); a raw read does too.
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value or {})


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


# What a hit carries, read in the retrieval statement itself (never the embedding or tsvector).
_HIT_COLUMNS = (
    "text", "context", "fact_type", "tags", "updated_at", "created_at", "document_id",
    "metadata", "entities", "occurred_start", "occurred_end", "mentioned_at", "source_memory_ids",
    "text_tokens",
)


def _retrieval_sql(
    *, where: str, params: list[Any], vector_literal: str, query: str, candidates: int,
    floors: RecallFloors, temporal_window: tuple[datetime, datetime] | None,
    index_only_count: bool, exact_scan_max: int,
) -> tuple[str, list[Any]]:
    """Every arm of a recall and the candidates' rows, as one statement (one round trip).

    - semantic: the ``candidates`` nearest by cosine distance, ranked by exact distance;
    - keyword: memories holding every lexeme of the query, best ``ts_rank_cd`` first; when there
      are fewer than ``candidates`` of them, the lexemes OR-ed instead (a question rarely matches
      in full) — the OR scan runs only then (a one-time filter). Each ranks the newest
      ``KEYWORD_RANKED_PER_CANDIDATE × candidates`` matches at most (a retain stamps all its
      rows alike: equal stamps go by id, so both sides below cut at the same row);
    - temporal (with a window): the latest events in it.

    Two ways to the candidates (the same ones wherever HNSW finds the true nearest), chosen by
    a count of the rows in scope (up to ``exact_scan_max + 1``; one-time filters run one side
    only). At most ``exact_scan_max``: the rows in scope are read once (``scoped``, with their
    distance to the query) and every arm but the temporal one runs over them — the semantic
    arm ranks all of them (exact). More:
    each arm reads its own index — HNSW for the semantic arm (approximate), the bank-scoped full
    text index for the keyword arm. The count reads an index alone when ``index_only_count``
    (no tag or id filter); otherwise ``scoped`` itself, read up to the bound, is counted.

    Each arm's rows carry their rank (1 = best); the rows of every candidate come back joined.
    """
    distance = "m.embedding <=> (SELECT v FROM qv)"
    small, large = "(SELECT n FROM scoped_n) <= %s", "(SELECT n FROM scoped_n) > %s"
    scoped = (
        f"SELECT m.id, {distance} AS dist, m.search_vector, m.updated_at "
        f"FROM banks_memoryunit m WHERE {where}"
    )
    # Materialized: read at most once, only by the side that runs, and never through HNSW.
    if index_only_count:
        head = [
            ("qv AS (SELECT %s::vector AS v)", [vector_literal]),
            ("scoped_n AS (SELECT count(*) AS n FROM (SELECT FROM banks_memoryunit m "
             f"WHERE {where} LIMIT %s) p)", [*params, exact_scan_max + 1]),
            (f"scoped AS MATERIALIZED ({scoped})", params),
        ]
    else:
        head = [
            ("qv AS (SELECT %s::vector AS v)", [vector_literal]),
            (f"scoped AS MATERIALIZED ({scoped} LIMIT %s)", [*params, exact_scan_max + 1]),
            ("scoped_n AS (SELECT count(*) AS n FROM scoped)", []),
        ]

    def floor(value: float | None, sql: str) -> tuple[str, list[Any]]:
        return ("", []) if value is None else (f"AND {sql} >= %s", [value])

    exact_floor, exact_floor_params = floor(floors.semantic, "1 - s.dist")
    sem_floor, sem_floor_params = floor(floors.semantic, f"1 - ({distance})")
    sem = (
        "sem AS (SELECT id, 1 - dist AS value, row_number() OVER (ORDER BY dist, id) AS r FROM ("
        f"(SELECT s.id, s.dist FROM scoped s WHERE {small} AND s.dist IS NOT NULL {exact_floor} "
        "ORDER BY s.dist, s.id LIMIT %s) UNION ALL "
        f"(SELECT m.id, {distance} AS dist FROM banks_memoryunit m "
        f"WHERE {large} AND m.embedding IS NOT NULL AND {where} {sem_floor} "
        f"ORDER BY {distance} LIMIT %s)) x)",
        [exact_scan_max, *exact_floor_params, candidates,
         exact_scan_max, *params, *sem_floor_params, candidates],
    )

    def keyword(q: str, extra: str = "", extra_params: Sequence[Any] = ()) -> tuple[str, list[Any]]:
        """The newest matches of ``q`` in scope, ranked: from ``scoped`` or from the index."""
        rank_floor, rank_floor_params = floor(floors.keyword, f"ts_rank_cd(c.sv, {q})")
        matches = (
            f"(SELECT s.id, s.search_vector AS sv, s.updated_at FROM scoped s WHERE {small} "
            f"AND s.search_vector @@ {q} {extra} ORDER BY s.updated_at DESC, s.id LIMIT %s) UNION ALL "
            "(SELECT m.id, m.search_vector AS sv, m.updated_at FROM banks_memoryunit m "
            f"WHERE {large} AND m.search_vector @@ {q} AND {where} {extra} "
            "ORDER BY m.updated_at DESC, m.id LIMIT %s)"
        )
        ranked = candidates * KEYWORD_RANKED_PER_CANDIDATE
        sql = (
            f"SELECT c.id, ts_rank_cd(c.sv, {q}) AS value, c.updated_at FROM ({matches}) c "
            f"WHERE TRUE {rank_floor} ORDER BY value DESC, c.updated_at DESC, c.id LIMIT %s"
        )
        return sql, [query, exact_scan_max, query, *extra_params, ranked,
                     exact_scan_max, query, *params, *extra_params, ranked,
                     *([query, *rank_floor_params] if rank_floor else []), candidates]

    kw_all_sql, kw_all_params = keyword("plainto_tsquery('english', %s)")
    kw_any_sql, kw_any_params = keyword(
        "replace(plainto_tsquery('english', %s)::text, ' & ', ' | ')::tsquery",
        "AND (SELECT count(*) FROM kw_all) < %s", [candidates],
    )
    pieces = [
        *head,
        sem,
        (f"kw_all AS ({kw_all_sql})", kw_all_params),
        (f"kw_any AS ({kw_any_sql})", kw_any_params),
        ("kw AS (SELECT id, value, row_number() OVER (ORDER BY value DESC, updated_at DESC, id) "
         "AS r FROM (SELECT * FROM kw_all WHERE (SELECT count(*) FROM kw_all) >= %s "
         "UNION ALL SELECT * FROM kw_any) k)", [candidates]),
    ]
    ctes = [sql for sql, _ in pieces]
    out: list[Any] = [p for _, ps in pieces for p in ps]
    arms = ["sem", "kw"]
    if temporal_window is not None:
        when = "COALESCE(m.occurred_start, m.mentioned_at)"
        ctes.append(
            "tmp AS (SELECT id, row_number() OVER (ORDER BY t DESC, id) AS r FROM ("
            f"SELECT m.id, {when} AS t FROM banks_memoryunit m WHERE {where} "
            f"AND {when} BETWEEN %s AND %s ORDER BY {when} DESC, m.id LIMIT %s) x)"
        )
        out += [*params, *temporal_window, candidates]
        arms.append("tmp")
    ids = " UNION ".join(f"SELECT id FROM {arm}" for arm in arms)
    columns = ", ".join(f"m.{c}" for c in _HIT_COLUMNS)
    arm_columns = ", ".join(
        f"{arm}.r, {arm}.value" if arm != "tmp" else "tmp.r" for arm in arms
    )
    joins = " ".join(f"LEFT JOIN {arm} ON {arm}.id = m.id" for arm in arms)
    sql = (
        f"WITH {', '.join(ctes)}, ids AS ({ids}) "
        f"SELECT m.id, {columns}, {arm_columns} FROM ids "
        f"JOIN banks_memoryunit m ON m.id = ids.id {joins}"
    )
    return sql, out


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
    texts counted offline, once at retain) and ``limit``. Raises ``EmbeddingError`` when the
    query cannot be embedded (a refresh treats that as a failed retrieval). Runs no I/O inside a
    transaction: the query is embedded first.
    """
    candidates = max(BUDGET_CANDIDATES.get(budget, 60), limit or 0)
    if query_vector is None:
        query_vector = get_embedder().embed([query])[0]
    where, params = _filters(
        bank_id=bank_id, scope=scope, cutoff=cutoff, updated_after=updated_after,
        exclude_ids=exclude_ids,
    )
    sql, sql_params = _retrieval_sql(
        where=where, params=params, vector_literal=vector_literal(query_vector), query=query,
        candidates=candidates, floors=floors, temporal_window=temporal_window,
        index_only_count=not filters_tags(scope) and not exclude_ids,
        exact_scan_max=EXACT_SCAN_MAX,
    )
    # Filtered HNSW scans stop early without iterative scans (pgvector >= 0.8): a bank or tag
    # filter would otherwise starve the semantic arm on a shared index. SET takes no bind
    # parameters (the value is an int computed here); SET LOCAL and the statement go in one
    # round trip, one implicit transaction (or the caller's, as a savepoint would).
    ef_search = int(max(40, min(candidates * 2, 1000)))
    with connection.cursor() as cursor:
        cursor.execute(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; "
            f"SET LOCAL hnsw.ef_search = {ef_search}; {sql}",
            sql_params,
        )
        while cursor.description is None and cursor.nextset():
            pass
        fetched = cursor.fetchall()

    fused: dict[str, float] = {}
    raw: dict[str, dict[str, float]] = {}
    rows: dict[str, _Row] = {}
    arm_names = ["semantic", "keyword"] + (["temporal"] if temporal_window is not None else [])
    for record in fetched:
        memory_id = str(record[0])
        rows[memory_id] = _Row(*record[1:1 + len(_HIT_COLUMNS)])
        ranks = record[1 + len(_HIT_COLUMNS):]
        values: dict[str, float] = {}
        score = 0.0
        for index, arm in enumerate(arm_names):
            # Fused in the arms' order, as sums of 1 / (k + rank): scores equal to the bit.
            rank = ranks[2 * index]
            if rank is None:
                continue
            score += 1.0 / (RRF_K + rank)
            values[arm] = float(ranks[2 * index + 1]) if arm != "temporal" else 0.0
        fused[memory_id] = score
        raw[memory_id] = values
    ordered = sorted(fused, key=lambda i: (-fused[i], i))
    if floors.final is not None:
        ordered = [i for i in ordered if fused[i] >= floors.final]
    if prefer_observations:
        superseded = {
            str(s) for i in ordered if rows[i].fact_type == FactType.OBSERVATION
            for s in rows[i].source_memory_ids
        }
        ordered = [i for i in ordered if i not in superseded]
    # The count retain stored with the text; the rows without one (older rows, observations, a
    # text changed since) are counted now — the same count either way.
    uncounted = [i for i in ordered if rows[i].text_tokens is None]
    counted = dict(zip(uncounted, count_tokens_batch([rows[i].text for i in uncounted]),
                       strict=True))
    token_counts = [counted.get(i, rows[i].text_tokens or 0) for i in ordered]
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
                document_id=m.document_id, metadata=_json_object(m.metadata),
                entities=list(m.entities), occurred_start=m.occurred_start,
                occurred_end=m.occurred_end, mentioned_at=m.mentioned_at,
                source_memory_ids=[str(s) for s in m.source_memory_ids],
                score=fused[memory_id], semantic=raw[memory_id].get("semantic"),
                keyword=raw[memory_id].get("keyword"), tokens=tokens,
                arms=sorted(raw[memory_id]),
            )
        )
    return hits
