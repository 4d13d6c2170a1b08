"""The reflect agent's tools: their schemas, their bounded outputs, and what they retrieved.

A ``ToolBox`` belongs to one run. It knows which tools the run may use (mental models unless
excluded, observations if the fact types allow them, raw facts if any raw type is allowed,
``done`` always), executes a call against the memory substrate with the run's scope and cutoff,
and remembers every memory and mental model a tool returned, because ``based_on`` may only cite
those. Every output is cut to a token budget before the model sees it. A lookup that raises
becomes ``RetrievalError``: a failed lookup must never pass for an empty one
(docs/behaviour.md#a-failed-lookup-is-a-failure).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hindsight.banks.recall import memory_recall
from hindsight.banks.tokens import count_tokens, count_tokens_batch
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.tagscope import TagScope
from hindsight.infra.vocabulary import RAW_FACT_TYPES, FactType, iso
from mentalmodels.reflect.mm_search import DEFAULT_LIMIT, MAX_LIMIT, mental_models_search
from mentalmodels.reflect.result import MemoryRef, RetrievalError
from mentalmodels.staleness import stale_flags

SEARCH_MENTAL_MODELS = "search_mental_models"
SEARCH_OBSERVATIONS = "search_observations"
RECALL = "recall"
DONE = "done"

RECALL_DEFAULT_TOKENS = 2048
OBSERVATIONS_DEFAULT_TOKENS = 5000
TOOL_MAX_TOKENS = 8192
TOOL_MIN_TOKENS = 128
# All mental-model entries of one search together stay under this many content tokens.
MENTAL_MODELS_CONTENT_TOKENS = 6000
# Everything the tools feed back in one run: past it, a lookup answers "answer now" instead of
# growing the conversation without bound over 20 iterations.
RUN_TOOL_TOKENS = 40000
RECALL_LIMIT = 60
# Recall items tokenized per batch while fitting a payload to its budget.
_COUNT_CHUNK = 16


def _int_arg(value: Any, default: int, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return max(lo, min(int(value), hi))


def _truncate(text: str, max_tokens: int) -> tuple[str, bool]:
    if count_tokens(text) <= max_tokens:
        return text, False
    # Cut by characters proportionally, then trim until it fits: exact enough, bounded work.
    cut = text[: max(1, int(len(text) * max_tokens / max(count_tokens(text), 1)))]
    while cut and count_tokens(cut) > max_tokens:
        cut = cut[: int(len(cut) * 0.9)]
    return cut.rstrip() + " …[truncated]", True


@dataclass
class ToolOutcome:
    payload: dict[str, Any]
    result_count: int
    duration_ms: int


@dataclass
class ToolBox:
    bank_id: str
    query: str
    scope: TagScope
    cutoff: datetime | None = None
    # A delta refresh's window: memory tools read only ``updated_at > updated_after`` (mental
    # models are searched whatever their age).
    updated_after: datetime | None = None
    exclude_mental_model_ids: tuple[str, ...] = ()
    include_mental_models: bool = True
    include_observations: bool = True
    observations_max_tokens: int | None = None
    tokens_left: int = field(default_factory=lambda: RUN_TOOL_TOKENS)
    # What the tools returned, by id, first-seen order.
    memories: dict[str, Any] = field(default_factory=dict)
    mental_models: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Query text → its embedding, for this run: the forced turns (mental models, observations,
    # raw facts) usually search with the same text, and one embedding serves them all.
    query_vectors: dict[str, list[float]] = field(default_factory=dict)

    # --- what the run may use ---------------------------------------------------------------

    def _fact_types(self) -> list[str] | None:
        types = self.scope.fact_types
        return list(types) if types else None

    def raw_fact_types(self) -> list[str]:
        types = self._fact_types()
        return [t for t in RAW_FACT_TYPES if types is None or t in types]

    def observations_allowed(self) -> bool:
        types = self._fact_types()
        return self.include_observations and (types is None or FactType.OBSERVATION in types)

    def names(self, *, models_visible: bool) -> list[str]:
        out = []
        if self.include_mental_models and models_visible:
            out.append(SEARCH_MENTAL_MODELS)
        if self.observations_allowed():
            out.append(SEARCH_OBSERVATIONS)
        if self.raw_fact_types():
            out.append(RECALL)
        out.append(DONE)
        return out

    def definitions(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [_DEFINITIONS[name] for name in names]

    # --- execution ---------------------------------------------------------------------------

    def run(self, name: str, arguments: dict[str, Any], *, allowed: Iterable[str]) -> ToolOutcome:
        started = time.monotonic()
        if name not in allowed or name == DONE:
            payload: dict[str, Any] = {
                "error": f"unknown tool {name!r}; available: {', '.join(allowed)}"
            }
            count = 0
        elif self.tokens_left < TOOL_MIN_TOKENS:
            payload = {
                "error": "the lookup budget of this question is spent: answer now with `done` "
                "from what the tools already returned"
            }
            count = 0
            self.warnings.append(f"tool output budget ({RUN_TOOL_TOKENS} tokens) spent; "
                                 f"{name} was refused")
        else:
            query = arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                query = self.query
            try:
                sent: int | None = None
                if name == SEARCH_MENTAL_MODELS:
                    payload, count = self._search_mental_models(query, arguments)
                elif name == SEARCH_OBSERVATIONS:
                    payload, count, sent = self._recall(
                        query, arguments, [FactType.OBSERVATION], self._observation_budget()
                    )
                else:
                    payload, count, sent = self._recall(
                        query, arguments, self.raw_fact_types(), RECALL_DEFAULT_TOKENS
                    )
            except RetrievalError:
                raise
            except Exception as exc:  # any failure to look is a failure, never an empty result
                raise RetrievalError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
            # A recall counted what it sends while fitting it to its budget: charge that count
            # (tokenizing the same JSON again costs as much as the first count did).
            self.tokens_left -= sent if sent is not None else count_tokens(
                json.dumps(payload, ensure_ascii=False, default=str))
        return ToolOutcome(payload, count, int((time.monotonic() - started) * 1000))

    def _observation_budget(self) -> int:
        return self.observations_max_tokens or OBSERVATIONS_DEFAULT_TOKENS

    def _search_mental_models(
        self, query: str, arguments: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        limit = _int_arg(arguments.get("max_results"), DEFAULT_LIMIT, 1, MAX_LIMIT)
        search = mental_models_search(
            bank_id=self.bank_id,
            query=query,
            scope=self.scope,
            exclude_ids=self.exclude_mental_model_ids,
            limit=limit,
            query_vectors=self.query_vectors,
        )
        self.warnings.extend(search.warnings)
        models = [r.model for r in search.ranked]
        flags = stale_flags(models) if models else {}
        per_model = max(
            TOOL_MIN_TOKENS,
            min(MENTAL_MODELS_CONTENT_TOKENS, self.tokens_left) // max(len(models), 1),
        )
        entries = []
        for ranked in search.ranked:
            m = ranked.model
            content, truncated = _truncate(m.content or "", per_model)
            entry: dict[str, Any] = {
                "id": m.mental_model_id,
                "name": m.name,
                "source_query": m.source_query,
                "content": content,
                "tags": list(m.tags or []),
                "is_stale": bool(flags.get(m.uid, False)),
                "is_empty": not (m.content or "").strip(),
                "last_refreshed_at": iso(m.last_refreshed_at),
            }
            if truncated:
                entry["truncated"] = True
            if ranked.relevance is not None:
                entry["relevance"] = ranked.relevance
            entries.append(entry)
            self.mental_models.setdefault(
                m.mental_model_id,
                {
                    "id": m.mental_model_id,
                    "name": m.name,
                    "text": m.content or "",
                    "tags": list(m.tags or []),
                    "is_stale": entry["is_stale"],
                },
            )
        return {"mental_models": entries, "count": len(entries)}, len(entries)

    def _recall(
        self, query: str, arguments: dict[str, Any], fact_types: list[str], default_tokens: int
    ) -> tuple[dict[str, Any], int, int]:
        """The payload, how many items it has, and its size in tokens as the budget counts it."""
        max_tokens = _int_arg(arguments.get("max_tokens"), default_tokens, TOOL_MIN_TOKENS,
                              TOOL_MAX_TOKENS)
        max_tokens = max(TOOL_MIN_TOKENS, min(max_tokens, self.tokens_left))
        scope = _with_fact_types(self.scope, fact_types)
        hits = memory_recall(
            bank_id=self.bank_id,
            query=query,
            scope=scope,
            max_tokens=max_tokens,
            limit=RECALL_LIMIT,
            cutoff=self.cutoff,
            updated_after=self.updated_after,
            query_vector=self._query_vector(query),
        )
        items = []
        for hit in hits:
            key = str(hit.id)
            item: dict[str, Any] = {"id": key, "type": hit.fact_type, "text": hit.text}
            if hit.context:
                item["context"] = hit.context
            if hit.tags:
                item["tags"] = list(hit.tags)
            occurred = getattr(hit, "occurred_start", None) or getattr(hit, "mentioned_at", None)
            if occurred is not None:
                item["occurred_at"] = iso(occurred)
            if hit.updated_at is not None:
                item["updated_at"] = iso(hit.updated_at)
            items.append(item)
        # Recall budgets memory texts; the model reads ids, dates and JSON too, so the budget is
        # applied again to what is actually sent (lowest-ranked items go first): the longest
        # prefix that fits. Counted a chunk at a time, best first, up to the first item that
        # does not fit — the items after it are never sent, so never tokenized.
        texts = [json.dumps(item, ensure_ascii=False) for item in items]
        # 16 for the wrapper, one per item for the separator.
        total, kept, full = 16, 0, False
        while kept < len(texts) and not full:
            for size in count_tokens_batch(texts[kept:kept + _COUNT_CHUNK]):
                if total + size + 1 > max_tokens:
                    full = True
                    break
                total += size + 1
                kept += 1
        del items[kept:]
        # Only what the model is sent counts as returned: it is what the answer may cite and
        # what a refresh reports as read (a memory cut here was never seen).
        for hit in hits[: len(items)]:
            self.memories.setdefault(str(hit.id), hit)
        key = "observations" if fact_types == [FactType.OBSERVATION] else "facts"
        return {key: items, "count": len(items)}, len(items), total

    def _query_vector(self, query: str) -> list[float]:
        """The embedding of ``query``, computed once per run (``EmbeddingError`` as it comes)."""
        vector = self.query_vectors.get(query)
        if vector is None:
            (vector,) = get_embedder().embed([query])
            self.query_vectors[query] = vector
        return vector

    # --- what was retrieved -------------------------------------------------------------------

    def memories_read(self) -> list[MemoryRef]:
        return [
            MemoryRef(id=key, fact_type=hit.fact_type, updated_at=hit.updated_at)
            for key, hit in self.memories.items()
        ]


def _with_fact_types(scope: TagScope, fact_types: list[str]) -> TagScope:
    return dataclasses.replace(scope, fact_types=tuple(fact_types))


def _query_param(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _search_tool(name: str, description: str) -> dict[str, Any]:
    """A memory search tool: a query and an optional output budget in tokens."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "query": _query_param("What to look for."),
                    "max_tokens": {"type": "integer", "minimum": TOOL_MIN_TOKENS,
                                   "maximum": TOOL_MAX_TOKENS},
                },
                "required": ["query"],
            },
        },
    }


_DEFINITIONS: dict[str, dict[str, Any]] = {
    SEARCH_MENTAL_MODELS: {
        "type": "function",
        "function": {
            "name": SEARCH_MENTAL_MODELS,
            "description": (
                "Search the curated mental models (pre-computed summaries), most relevant first. "
                "Each has is_stale: a stale model may miss recent memories."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": _query_param("What to look for."),
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                },
                "required": ["query"],
            },
        },
    },
    SEARCH_OBSERVATIONS: _search_tool(
        SEARCH_OBSERVATIONS, "Search observations: knowledge consolidated from many facts."
    ),
    RECALL: _search_tool(
        RECALL, "Recall raw facts (world knowledge and experiences): the ground truth."
    ),
    DONE: {
        "type": "function",
        "function": {
            "name": DONE,
            "description": "Finish with the final answer and the ids it relies on.",
            "parameters": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "description": "The answer, in markdown."},
                    "memory_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Ids of the facts and observations the answer uses.",
                    },
                    "mental_model_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Ids of the mental models the answer uses.",
                    },
                },
                "required": ["answer"],
            },
        },
    },
}
