"""Mental models as a reflect source: visibility, lazy embeddings, ranking, the tool entries.

Seed 004 governs here: models are ranked by cosine similarity of their stored embedding to the
query, most similar first, models without a comparable embedding last, capped. Before a search,
every visible model whose embedded text, embedding model or dimension no longer matches its
stored row is re-embedded under the deployment's profile (lazily: a model is indexed on first
use and a profile change re-indexes it). When the query is blank or the embedder cannot serve
it, ranking falls back to lexical similarity and ``relevance`` is absent from the entries.

Visibility (seed 000, "Tags and Visibility"): an untagged reflect sees every model of the bank;
a tagged one sees the models whose tags overlap the request's. ``exact`` with no tags selects
the untagged models only. ``tag_groups`` are evaluated on the model's tags.

Only the stragglers and the query are embedded, in one embedder request, outside any
transaction; each re-embedded row is written with a compare-and-set on the text it was embedded
from, so a concurrent edit of the model is never overwritten by a stale vector.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from hindsight.infra.embeddings import EmbeddingError, get_embedder
from hindsight.infra.tagscope import TagScope, matches
from hindsight.infra.vocabulary import FactType
from mentalmodels.models import MentalModel

DEFAULT_LIMIT = 5
MAX_LIMIT = 20

_WORD = re.compile(r"\w+", re.UNICODE)
# Words that carry no topic: dropping them keeps the lexical fallback from ranking on "the".
_STOPWORDS = frozenset(
    [
        "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have",
        "how", "i", "in", "is", "it", "its", "of", "on", "or", "our", "that", "the", "their",
        "there", "these", "this", "to", "was", "we", "were", "what", "when", "where", "which",
        "who", "why", "will", "with", "you", "your",
    ]
)


@dataclass(frozen=True)
class RankedModel:
    model: MentalModel
    relevance: float | None


@dataclass
class MentalModelSearch:
    """The outcome of one search: ranked models and whether embeddings ranked them."""

    ranked: list[RankedModel]
    semantic: bool
    reembedded: int = 0
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Visibility


def visible_models(
    *, bank_id: str, scope: TagScope, exclude_ids: Iterable[str] = ()
) -> QuerySet[MentalModel]:
    """The bank's mental models a reflect under ``scope`` may see, minus ``exclude_ids``.

    Flat tags: the model's tags must overlap the request's (``exact`` with no tags: untagged
    models only). ``tag_groups``: the group expression must hold on the model's tags, untagged
    models only where a group selects untagged explicitly (the strict reading of ``matches``);
    evaluated in Python over the candidates, which share the request's tags or are untagged.
    """
    qs = MentalModel.objects.filter(bank_id=bank_id)
    excluded = [e for e in exclude_ids if e]
    if excluded:
        qs = qs.exclude(mental_model_id__in=excluded)
    if scope.tag_groups is not None:
        groups_only = TagScope(tag_groups=scope.tag_groups)
        uids = [
            uid
            for uid, tags in qs.values_list("uid", "tags")
            if matches(groups_only, tags or [], FactType.WORLD, staleness=True)
        ]
        return qs.filter(uid__in=uids)
    if scope.tags:
        return qs.filter(tags__overlap=list(scope.tags))
    if scope.tags_match == "exact":
        return qs.filter(tags=[])
    return qs


# ---------------------------------------------------------------------------------------------
# Embeddings


def embedding_text(model: Searchable) -> str:
    """What a model is embedded from: its name and its document."""
    return f"{model.name}\n\n{model.content}".strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def needs_embedding(model: Searchable, *, profile_model: str, profile_dims: int) -> bool:
    """True when the stored vector does not describe the model's current text under the profile."""
    if not (model.content or "").strip():
        return False  # an empty document has nothing to match; it ranks last
    return (
        model.embedding is None
        or model.embedding_content_hash != content_hash(embedding_text(model))
        or model.embedding_model != profile_model
        or model.embedding_dimensions != profile_dims
    )


def _cosine(a: np.ndarray, b: Sequence[float]) -> float | None:
    vb = np.asarray(b, dtype=np.float64)
    if a.shape != vb.shape or not a.size:
        return None
    norm = float(np.linalg.norm(a) * np.linalg.norm(vb))
    return None if norm == 0.0 else float(np.dot(a, vb) / norm)


# ---------------------------------------------------------------------------------------------
# Stored vectors, parsed once per process

# A search ranks every visible model, and the database hands a vector over as text: parsing
# the bank's vectors was most of a search's (and a refresh's) CPU, for vectors that change only
# when a model is re-embedded. So each process keeps the vectors it parsed, keyed by the model
# and a digest of the stored vector's bytes (computed by the database, ``VECTOR_DIGEST``), and
# parses only those it has not seen. A cached array is the very array a fresh read would give
# (parsed from the same stored vector), so rankings and relevances are the same.
VECTOR_CACHE_SIZE = 2048
VECTOR_DIGEST = RawSQL(f'md5(vector_send("{MentalModel._meta.db_table}"."embedding"))', [])
_vectors: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
_vectors_lock = threading.Lock()


def _load_vectors(models: Sequence[_Candidate]) -> None:
    """Set ``embedding`` on the candidates (read with ``vector_digest``, without the vector):
    from the process's cache, the rest in one query."""
    missing: list[_Candidate] = []
    with _vectors_lock:
        for model in models:
            digest = model.vector_digest
            cached = _vectors.get((model.uid, digest)) if digest is not None else None
            if cached is not None and digest is not None:
                _vectors.move_to_end((model.uid, digest))
            elif digest is not None:
                missing.append(model)
            model.embedding = cached  # None: no stored vector (or not read yet, just below)
    if not missing:
        return
    # Read again with its digest: a model re-embedded since the first read is cached under its
    # new vector's digest, and its embedding fields are the ones that vector was stored with.
    rows: dict[int, tuple[str | None, Any, str, str, int | None]] = {
        uid: (digest, vector, text_hash, name, dims)
        for uid, digest, vector, text_hash, name, dims in MentalModel.objects.filter(
            uid__in=[m.uid for m in missing]
        ).annotate(digest=VECTOR_DIGEST).values_list(
            "uid", "digest", "embedding", "embedding_content_hash", "embedding_model",
            "embedding_dimensions")
    }
    with _vectors_lock:
        for model in missing:
            if model.uid not in rows:
                continue  # deleted since: no vector
            read, vector, text_hash, name, dims = rows[model.uid]
            model.embedding_content_hash = text_hash
            model.embedding_model = name
            model.embedding_dimensions = dims
            if vector is None or read is None:
                continue
            array = np.asarray(vector, dtype=np.float64)
            model.embedding = array
            _vectors[(model.uid, read)] = array
        while len(_vectors) > VECTOR_CACHE_SIZE:
            _vectors.popitem(last=False)


# ---------------------------------------------------------------------------------------------
# Lexical fallback


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def lexical_score(query: str, model: Searchable) -> float:
    """Share of the query's terms the model mentions, name and source query weighted up."""
    q = set(_terms(query))
    if not q:
        return 0.0
    head = set(_terms(f"{model.name} {model.source_query}"))
    body = set(_terms(model.content or ""))
    hits = sum(2.0 if t in head else 1.0 if t in body else 0.0 for t in q)
    return hits / (2.0 * len(q))


def _recency_key(model: Searchable) -> float:
    ts = model.last_refreshed_at
    return ts.timestamp() if ts is not None else float("-inf")


def _rank_lexically(query: str, models: list[_Candidate], limit: int) -> list[RankedModel]:
    # Stable order: score, then the most recently refreshed, then id (deterministic).
    ordered = sorted(
        models,
        key=lambda m: (-lexical_score(query, m), -_recency_key(m), m.mental_model_id),
    )
    return [RankedModel(m.as_model(), None) for m in ordered[:limit]]


@dataclass(frozen=True)
class SemanticRelevance:
    """Cosine similarity of each model with a comparable embedding to the query, by ``uid``
    (models without one, such as an empty document, are absent), and how many were re-embedded
    first."""

    scores: dict[int, float]
    reembedded: int


def semantic_relevance(
    models: Sequence[Searchable], query: str, *,
    query_vectors: dict[str, list[float]] | None = None,
) -> SemanticRelevance:
    """Re-embed the stragglers among ``models`` (seed 004) and score each against ``query``,
    in one embedder request. Raises ``EmbeddingError`` when the embedder cannot serve it.
    ``query_vectors``: a run's memo of query embeddings by text, read and filled here."""
    embedder = get_embedder()
    profile = embedder.profile
    stragglers = [
        m
        for m in models
        if needs_embedding(m, profile_model=profile.model, profile_dims=profile.dimensions)
    ]
    known = query_vectors.get(query) if query_vectors is not None else None
    texts = ([] if known is not None else [query]) + [embedding_text(m) for m in stragglers]
    vectors = embedder.embed(texts) if texts else []
    if known is not None:
        vectors = [known, *vectors]
    elif query_vectors is not None:
        query_vectors[query] = list(vectors[0])

    query_vec = np.asarray(vectors[0], dtype=np.float64)
    for model, vec in zip(stragglers, vectors[1:], strict=True):
        text = embedding_text(model)
        digest = content_hash(text)
        # Compare-and-set on the text embedded: an edit that landed meanwhile keeps its own turn.
        MentalModel.objects.filter(
            uid=model.uid, name=model.name, content=model.content
        ).update(
            embedding=list(vec),
            embedding_model=profile.model,
            embedding_dimensions=profile.dimensions,
            embedding_content_hash=digest,
        )
        model.embedding = list(vec)
        model.embedding_model = profile.model
        model.embedding_dimensions = profile.dimensions
        model.embedding_content_hash = digest

    scores: dict[int, float] = {}
    for model in models:
        comparable = (
            model.embedding is not None
            and (model.content or "").strip()
            and model.embedding_model == profile.model
            and model.embedding_dimensions == profile.dimensions
        )
        score = (_cosine(query_vec, model.embedding)
                 if comparable and model.embedding is not None else None)
        if score is not None:
            scores[model.uid] = score
    return SemanticRelevance(scores=scores, reembedded=len(stragglers))


# ---------------------------------------------------------------------------------------------
# Search


# What a search and its tool entries read of each visible model: ranking (the embedded text,
# the vector's profile, recency), the entry (id, name, query, document, tags) and staleness
# (bank, tags, trigger, watermark). Never the stored reflect_response (with a kept trace, the
# bulk of a row), the document's structure, nor the dozen bookkeeping columns (failures, cron,
# timestamps) whose parsing, for every model of the bank at every refresh, cost more than the
# ranking itself. A column read later would cost a query per model.
SEARCH_FIELDS = (
    "uid", "bank_id", "mental_model_id", "name", "source_query", "content", "tags", "trigger",
    "last_refreshed_at", "last_memory_seen_at", "embedding_model", "embedding_dimensions",
    "embedding_content_hash",
)


@dataclass(slots=True)
class _Candidate:
    """One visible model as the search ranks it: ``SEARCH_FIELDS`` and the stored vector's
    digest, read as a row (a model instance for each of a bank's models, at every refresh, cost
    more than ranking them); the ranked ones become ``MentalModel`` instances (``_as_model``)."""

    uid: int
    bank_id: str
    mental_model_id: str
    name: str
    source_query: str
    content: str
    tags: list[str]
    trigger: dict[str, Any]
    last_refreshed_at: Any
    last_memory_seen_at: Any
    embedding_model: str
    embedding_dimensions: int | None
    embedding_content_hash: str
    vector_digest: str | None
    embedding: Any = None

    def as_model(self) -> MentalModel:
        """The ``MentalModel`` these fields describe (the others deferred, as ``.only()``
        leaves them), with the vector the search used."""
        values = {name: getattr(self, name) for name in SEARCH_FIELDS}
        model = MentalModel.from_db(
            MentalModel.objects.db, list(SEARCH_FIELDS),
            [values[f.attname] for f in MentalModel._meta.concrete_fields if f.attname in values],
        )
        model.embedding = self.embedding
        return model


# What ranking reads: a model instance, or a search's row of it.
Searchable = MentalModel | _Candidate


def mental_models_search(
    *,
    bank_id: str,
    query: str,
    scope: TagScope,
    exclude_ids: Iterable[str] = (),
    limit: int = DEFAULT_LIMIT,
    query_vectors: dict[str, list[float]] | None = None,
) -> MentalModelSearch:
    """Rank the visible models for ``query``, re-embedding the stragglers first (seed 004).

    Database errors propagate (the caller turns them into ``RetrievalError``); an embedder that
    cannot serve the request only costs the semantic ranking (lexical stands in, with a warning).
    ``query_vectors``: a run's memo of query embeddings by text, read and filled here (the
    query is embedded only when it is not in it, with the stragglers, in one batch).
    """
    limit = max(1, min(int(limit), MAX_LIMIT))
    # The search reads only ``SEARCH_FIELDS`` of every visible model; the vectors come from the
    # process's cache where it has them (``_load_vectors``).
    models = [
        _Candidate(*row)
        for row in visible_models(bank_id=bank_id, scope=scope, exclude_ids=exclude_ids)
        .annotate(vector_digest=VECTOR_DIGEST)
        .values_list(*SEARCH_FIELDS, "vector_digest")
    ]
    if not models:
        return MentalModelSearch(ranked=[], semantic=False)
    if not query.strip():
        return MentalModelSearch(ranked=_rank_lexically(query, models, limit), semantic=False)

    warnings: list[str] = []
    _load_vectors(models)
    try:
        relevance = semantic_relevance(models, query, query_vectors=query_vectors)
    except EmbeddingError as exc:
        warnings.append(f"mental-model search used lexical ranking: the embedder failed ({exc})")
        return MentalModelSearch(
            ranked=_rank_lexically(query, models, limit), semantic=False, warnings=warnings
        )
    scored = [(model, relevance.scores.get(model.uid)) for model in models]
    scored.sort(
        key=lambda pair: (
            pair[1] is None,
            -(pair[1] if pair[1] is not None else 0.0),
            -_recency_key(pair[0]),
            pair[0].mental_model_id,
        )
    )
    ranked = [
        RankedModel(m.as_model(), round(float(r), 6) if r is not None else None)
        for m, r in scored[:limit]
    ]
    return MentalModelSearch(
        ranked=ranked, semantic=True, reembedded=relevance.reembedded, warnings=warnings
    )
