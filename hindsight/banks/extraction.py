"""Fact extraction for retain: an item's content → facts, through the LLM's structured output.

One ``structured`` call per item (an item is one source text; the facts keep its context and
tags); ``facts_extract_many`` runs a retain's calls concurrently, at most
``HINDSIGHT_API_RETAIN_EXTRACTION_CONCURRENCY`` in flight, and keeps the items' order. Without
an LLM, or for an item with ``strategy: "verbatim"``, the content is stored as one ``world``
fact, unchanged. The LLM never chooses tags: tags are visibility scopes the caller
sets, and an invented tag would silently move a fact out of the scopes that should read it.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections

from hindsight.banks.retaintypes import RetainItem, Usage
from hindsight.banks.serializers import parse_datetime_value
from hindsight.infra.db import connection_release_to_pool
from hindsight.infra.llm import Deadline, get_llm
from hindsight.infra.vocabulary import EXTRACTED_FACT_TYPES, FactType

FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "fact_type", "occurred_start", "occurred_end"],
                "properties": {
                    "text": {"type": "string"},
                    "fact_type": {"type": "string", "enum": list(EXTRACTED_FACT_TYPES)},
                    "occurred_start": {"type": ["string", "null"]},
                    "occurred_end": {"type": ["string", "null"]},
                },
            },
        }
    },
}

SYSTEM_PROMPT = (
    "You extract durable facts from a text for a long-term memory. Return JSON matching the "
    "schema. Each fact is one self-contained sentence that makes sense without the source "
    "(resolve pronouns to names). fact_type is 'world' for facts about the world and other "
    "people, 'experience' for what the speaker/agent itself did or experienced. "
    "occurred_start/occurred_end are ISO 8601 date-times when the text says when it happened, "
    "else null. Skip greetings and filler; return an empty list when there is nothing durable."
)


@dataclass(frozen=True)
class ExtractedFact:
    text: str
    fact_type: str
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None


def _parse_when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None

    try:
        return parse_datetime_value(value)
    except ValueError:
        # A malformed date from the model costs the date, not the fact.
        return None


def uses_llm(item: RetainItem) -> bool:
    return settings.HINDSIGHT.llm_configured and item.strategy != "verbatim"


def facts_extract_many(
    *, items: Sequence[RetainItem], bank_id: str | None = None, deadline: Deadline | None = None
) -> list[tuple[list[ExtractedFact], Usage]]:
    """``facts_extract`` of every item, in the items' order, the LLM calls run concurrently.

    The first failure stops the calls not started yet and is raised once the running ones end.
    """
    results: list[tuple[list[ExtractedFact], Usage]] = [([], Usage())] * len(items)
    llm_indexes = []
    for i, item in enumerate(items):
        if uses_llm(item):
            llm_indexes.append(i)
        else:
            results[i] = facts_extract(item=item, bank_id=bank_id)
    workers = min(settings.HINDSIGHT.retain_extraction_concurrency, len(llm_indexes))
    if workers <= 1:
        for i in llm_indexes:
            results[i] = facts_extract(item=items[i], bank_id=bank_id, deadline=deadline)
    else:
        _extract_concurrently(items, llm_indexes, results, workers, bank_id, deadline)
    return results


def _extract_concurrently(
    items: Sequence[RetainItem],
    indexes: list[int],
    results: list[tuple[list[ExtractedFact], Usage]],
    workers: int,
    bank_id: str | None,
    deadline: Deadline | None,
) -> None:
    """``workers`` threads take the items at ``indexes`` in turn and fill ``results``, each run
    in a copy of the caller's context (``collect_llm_calls`` blocks see its calls).

    The LLM request log writes a row per call, so a thread holds a database connection: each
    thread keeps its one connection for all the items it takes and closes it when it ends — a
    thread (and a connection) per call would cost the database a new backend per item. The
    caller's own connection (its transaction, its query count) sees none of those writes.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in indexes:
        todo.put(i)
    failures: list[Exception] = []

    def work() -> None:
        while not failures:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[i] = facts_extract(item=items[i], bank_id=bank_id, deadline=deadline)
            except Exception as exc:
                failures.append(exc)

    def work_in_thread() -> None:
        try:
            work()
        finally:
            connections.close_all()  # this thread's connections only

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(work_in_thread,),
                         name=f"retain-extract-{n}", daemon=True)
        for n in range(workers)
    ]
    # The threads take connections from the caller's pool, if it has one: the caller holding
    # its own while it waits for them starved a bounded pool (eight async retains in a worker of
    # eight connections stood still, their threads waiting for one, until the pool's timeout).
    connection_release_to_pool()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def facts_extract(
    *, item: RetainItem, bank_id: str | None = None, deadline: Deadline | None = None
) -> tuple[list[ExtractedFact], Usage]:
    """The facts of one item, and the LLM usage it cost (zero when verbatim)."""
    if not uses_llm(item):
        return [ExtractedFact(text=item.content, fact_type=FactType.WORLD)], Usage()

    user = item.content if not item.context else f"Context: {item.context}\n\n{item.content}"
    if item.timestamp:
        user = f"Written at: {item.timestamp}\n\n{user}"
    result = get_llm(bank_id=bank_id).structured(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        schema=FACT_SCHEMA,
        name="retain_facts",
        deadline=deadline,
        purpose="retain",
    )
    facts = []
    for raw in result.data.get("facts", []):
        # PostgreSQL text cannot hold NUL: a model that emits one would fail the whole retain.
        text = str(raw.get("text", "")).replace("\x00", "").strip()
        if not text:
            continue
        fact_type = raw.get("fact_type")
        if fact_type not in EXTRACTED_FACT_TYPES:
            fact_type = FactType.WORLD
        facts.append(
            ExtractedFact(
                text=text,
                fact_type=fact_type,
                occurred_start=_parse_when(raw.get("occurred_start")),
                occurred_end=_parse_when(raw.get("occurred_end")),
            )
        )
    usage = result.usage
    return facts, Usage(
        int(getattr(usage, "input_tokens", 0) or 0),
        int(getattr(usage, "output_tokens", 0) or 0),
        int(getattr(usage, "total_tokens", 0) or 0),
    )
