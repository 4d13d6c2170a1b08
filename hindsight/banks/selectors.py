"""Reads of the banks app: banks, stats, memory listing, tags, and recall.

Recall (``memory_recall``) is the one retrieval reflect and a mental-model refresh reuse:
semantic (pgvector cosine over the HNSW index) and lexical (PostgreSQL full text) arms, plus a
temporal arm when a window is given, fused by reciprocal rank (k = 60), filtered by a
``TagScope`` (``hindsight.tagscope`` compiles it) and cut to a token budget counted offline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max, Q

from hindsight.banks import bankconfig
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.tokens import count_tokens_batch
from hindsight.embeddings import get_embedder
from hindsight.errors import FieldError, NotFound
from hindsight.tagscope import TagScope, scope_sql
from operations.selectors import operation_counts

RRF_K = 60
# Candidates each arm contributes before fusion, per recall budget.
BUDGET_CANDIDATES = {"low": 30, "mid": 60, "high": 120}


def bank_get(*, bank_id: str) -> Bank:
    bank = Bank.objects.filter(id=bank_id).first()
    if bank is None:
        raise NotFound(f"Bank '{bank_id}' not found")
    return bank


def bank_exists(*, bank_id: str) -> bool:
    return Bank.objects.filter(id=bank_id).exists()


def bank_last_memory_write_at(*, bank_id: str) -> datetime | None:
    """``MAX(updated_at)`` of the bank's memories: exact, through the (bank, updated_at) index."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT updated_at FROM banks_memoryunit WHERE bank_id = %s "
            "ORDER BY updated_at DESC LIMIT 1",
            [bank_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def bank_last_memory_write_at_many(*, bank_ids: Iterable[str]) -> dict[str, datetime | None]:
    """``bank_last_memory_write_at`` of many banks in one query (one index probe per bank)."""
    ids = sorted(set(bank_ids))
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.id, (SELECT m.updated_at FROM banks_memoryunit m WHERE m.bank_id = b.id "
            "ORDER BY m.updated_at DESC LIMIT 1) FROM unnest(%s::text[]) AS b(id)",
            [ids],
        )
        return {row[0]: row[1] for row in cursor.fetchall()}


def bank_list(*, q: str | None = None, limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    banks = Bank.objects.all()
    if q:
        banks = banks.filter(Q(id__icontains=q) | Q(name__icontains=q))
    total = banks.count()
    page = list(
        banks.order_by("id")
        .annotate(
            fact_count=Count("memories", filter=~Q(memories__fact_type="observation")),
            last_write_at=Max("memories__updated_at"),
            last_document_at=Max("memories__created_at", filter=Q(memories__document_id__isnull=False)),
        )[offset: offset + limit]
    )
    return [
        {"bank": b, "fact_count": b.fact_count, "last_write_at": b.last_write_at,
         "last_document_at": b.last_document_at}
        for b in page
    ], total


DISPOSITION_TRAITS = ("skepticism", "literalism", "empathy")


def bank_disposition(*, bank: Bank) -> dict[str, int]:
    """The bank's disposition: its ``disposition_*`` config overrides, else what the bank row
    holds (rows written before the config became the disposition's home), else 3."""
    config = bank.config or {}
    legacy = bank.disposition or {}
    return {
        trait: config.get(f"disposition_{trait}", legacy.get(trait, 3))
        for trait in DISPOSITION_TRAITS
    }


def bank_mission(*, bank: Bank) -> str:
    """The bank's mission: its ``reflect_mission`` override, else what the bank row holds."""
    override = (bank.config or {}).get("reflect_mission")
    return override if override is not None else bank.mission or ""


def bank_config_get(*, bank_id: str) -> dict[str, Any]:
    bank = bank_get(bank_id=bank_id)
    overrides = dict(bank.config or {})
    config = bankconfig.resolved(overrides)
    config.update({f"disposition_{t}": v for t, v in bank_disposition(bank=bank).items()})
    config["reflect_mission"] = bank_mission(bank=bank) or None
    return {"bank_id": bank.id, "config": config, "overrides": overrides}


def bank_stats(*, bank_id: str) -> dict[str, Any]:
    """Upstream's ``BankStatsResponse``; computed on every call (never cached)."""
    bank_get(bank_id=bank_id)
    memories = MemoryUnit.objects.filter(bank_id=bank_id)
    by_type = {
        row["fact_type"]: row["n"]
        for row in memories.values("fact_type").annotate(n=Count("id")).order_by()
    }
    aggregates = memories.aggregate(
        documents=Count("document_id", distinct=True),
        last_consolidated_at=Max("consolidated_at"),
        pending_consolidation=Count(
            "id", filter=Q(consolidated_at__isnull=True, fact_type__in=("world", "experience"))
        ),
    )
    operations_by_status = operation_counts(bank_id=bank_id)
    return {
        "bank_id": bank_id,
        "total_nodes": sum(by_type.values()),
        "total_links": 0,
        "total_documents": aggregates["documents"],
        "nodes_by_fact_type": by_type,
        "links_by_link_type": {},
        "links_by_fact_type": {},
        "links_breakdown": {},
        "pending_operations": operations_by_status.get("pending", 0)
        + operations_by_status.get("processing", 0),
        "failed_operations": operations_by_status.get("failed", 0),
        "operations_by_status": operations_by_status,
        "last_consolidated_at": aggregates["last_consolidated_at"],
        "last_memory_write_at": bank_last_memory_write_at(bank_id=bank_id),
        "pending_consolidation": aggregates["pending_consolidation"],
        "failed_consolidation": 0,
        "total_observations": by_type.get("observation", 0),
    }


# --- memory listing ----------------------------------------------------------------------------

TIME_FIELDS = ("created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end")
CONSOLIDATION_STATES = ("pending", "done", "failed")
MEMORY_STATES = ("valid", "invalidated")


def memories_list(
    *,
    bank_id: str,
    fact_type: str | None = None,
    q: str | None = None,
    document_id: str | None = None,
    scope: TagScope | None = None,
    consolidation_state: str | None = None,
    state: str | None = None,
    entity_id: str | None = None,
    time_field: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[MemoryUnit], int]:
    """A page of the bank's memories, newest first, and the total the filters select.

    Filters this service has no data for select nothing rather than being ignored: no memory is
    ever invalidated (``state=invalidated``), consolidation records no failure
    (``consolidation_state=failed``), and entities are kept as text, not as linked entity rows
    (``entity_id``).
    """
    bank_get(bank_id=bank_id)
    qs = MemoryUnit.objects.filter(bank_id=bank_id).defer("embedding", "search_vector")
    if state == "invalidated" or consolidation_state == "failed" or entity_id:
        qs = qs.none()
    if fact_type:
        qs = qs.filter(fact_type=fact_type)
    if q:
        qs = qs.filter(Q(text__icontains=q) | Q(context__icontains=q))
    if document_id:
        qs = qs.filter(document_id=document_id)
    if consolidation_state == "pending":
        qs = qs.filter(consolidated_at__isnull=True)
    elif consolidation_state == "done":
        qs = qs.filter(consolidated_at__isnull=False)
    if scope is not None:
        where, params = scope_sql(scope, alias="banks_memoryunit")
        if where != "TRUE":
            qs = qs.extra(where=[where], params=params)
    order_field = time_field or ("created_at" if (start or end) else None)
    if order_field:
        qs = qs.filter(**{f"{order_field}__isnull": False})
        if start:
            qs = qs.filter(**{f"{order_field}__gte": start})
        if end:
            qs = qs.filter(**{f"{order_field}__lt": end})
    total = qs.count()
    order = order_field or "created_at"
    page = list(qs.order_by(f"-{order}", "-id")[offset: offset + limit])
    return page, total


# --- tags --------------------------------------------------------------------------------------

TagSource = Callable[..., tuple[list[dict[str, Any]], int]]
_tag_sources: dict[str, TagSource] = {}


def tag_source_register(name: str, source: TagSource) -> None:
    """Another app lists its tags here (``source=mental_models`` is the mental-models app's).

    ``source(bank_id=, pattern=, limit=, offset=)`` returns ``([{tag, count}], total)``;
    ``pattern`` is a SQL ``ILIKE`` pattern (``None`` = all), built by ``tag_pattern``.
    """
    _tag_sources[name] = source


def tag_pattern(q: str | None) -> str | None:
    """``q`` with ``*`` wildcards → an ``ILIKE`` pattern; without ``*``, a substring match."""
    if not q:
        return None
    escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%") if "*" in q else f"%{escaped}%"


def tag_counts(
    *, table: str, bank_id: str, pattern: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """Tags of ``table``'s rows in a bank with their counts, most used first (any tag source).

    ``table`` is a model's ``_meta.db_table`` (never request input); ``pattern`` an ``ILIKE``
    pattern from ``tag_pattern``.
    """
    condition = "AND tag ILIKE %s" if pattern else ""
    params: list[Any] = [bank_id] + ([pattern] if pattern else [])
    source = f"{connection.ops.quote_name(table)} t0, unnest(t0.tags) AS tag"
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH t AS (SELECT tag, count(*) AS n FROM {source} "
            f"WHERE t0.bank_id = %s {condition} GROUP BY tag) "
            "SELECT tag, n, count(*) OVER () FROM t ORDER BY n DESC, tag LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = cursor.fetchall()
        if rows:
            total = rows[0][2]
        else:  # past the last page: the window count is not there to read
            cursor.execute(
                f"SELECT count(DISTINCT tag) FROM {source} WHERE t0.bank_id = %s {condition}",
                params,
            )
            total = cursor.fetchone()[0]
    return [{"tag": tag, "count": n} for tag, n, _ in rows], int(total)


_tag_sources["memories"] = partial(tag_counts, table=MemoryUnit._meta.db_table)


def tags_list(
    *, bank_id: str, source: str = "memories", q: str | None = None, limit: int = 100, offset: int = 0
) -> dict[str, Any]:
    bank_get(bank_id=bank_id)
    lister = _tag_sources.get(source)
    if lister is None:
        raise FieldError(
            ("query", "source"),
            f"tag source {source!r} is not available (available: {', '.join(sorted(_tag_sources))})",
        )
    items, total = lister(bank_id=bank_id, pattern=tag_pattern(q), limit=limit, offset=offset)
    return {"items": items, "total": total, "limit": limit, "offset": offset}


# --- recall ------------------------------------------------------------------------------------


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
