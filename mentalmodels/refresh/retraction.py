"""A delta refresh's retraction step (docs/behaviour.md#retracted-facts): the memories a page cites
that were removed or edited since its watermark, what its edit call is shown of them, whether its
answer acted on them, and the record the result, the trace and the dry run carry.

A removed memory is one no longer in the bank (deleted, or invalidated: an invalidated memory
leaves the memory table) or no longer in the page's scope (its tags changed). An edited one is
still there but its ``updated_at`` is after the watermark and its text is not the one the page
recorded. Their last known text is the one the page's ``based_on`` kept when it cited them; for
an entry kept without one, the curation archive's (an invalidated memory) or the text its last
curation change recorded (a deleted one).

Reads only: ``retraction_find`` is one query by primary key, run by delta refreshes of pages that
cite memories; a page that cites none, or a full refresh, reads nothing here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from hindsight.banks.models import InvalidatedMemoryUnit, MemoryChange
from hindsight.infra.tagscope import scope_sql
from hindsight.infra.vocabulary import BASED_ON_FACT_TYPES, BASED_ON_KEYS
from mentalmodels.refresh.records import Plan

REMOVED = "removed"
EDITED = "edited"

# The operations that take something out of the document or rewrite it in place: an answer to a
# retraction must apply at least one of them (docs/behaviour.md#retracted-facts).
RETRACTING_OPS = frozenset({"remove_block", "replace_block", "replace_section_blocks",
                            "remove_section"})


@dataclass(frozen=True)
class RetractedFact:
    id: str
    text: str  # what the page recorded when it cited the memory
    kind: str  # REMOVED or EDITED
    now: str | None = None  # an edited memory's text today


@dataclass
class Retraction:
    """The retracted facts of one refresh and what became of them."""

    facts: list[RetractedFact]
    cited_count: int  # memories the page cited, retracted ones included
    # The edit answer removed or rewrote something, or the page was rewritten in full.
    applied: bool = False
    # Rewritten in full instead of edited (docs/behaviour.md#retracted-facts says when).
    rewritten: bool = False

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(f.id for f in self.facts)

    @property
    def everything(self) -> bool:
        """Every memory the page cited is retracted: nothing is left to edit the page against."""
        return self.cited_count > 0 and len(self.facts) == self.cited_count

    def as_json(self) -> dict[str, Any]:
        """The wire shape: upstream's four fields (``fact_ids`` and ``fact_texts`` side by side,
        ``deferred_reason`` always null: a retraction is never put off here) and
        ``edited_fact_ids``, the ones still in the bank with another text."""
        facts = sorted(self.facts, key=lambda f: f.id)
        return {
            "fact_ids": [f.id for f in facts],
            "fact_texts": [f.text for f in facts],
            "applied": self.applied,
            "deferred_reason": None,
            "edited_fact_ids": [f.id for f in facts if f.kind == EDITED],
        }


def cited_memories(based_on: Any) -> dict[str, dict[str, Any]]:
    """The memory entries of a stored ``based_on`` by id (mental models and directives are not
    memories), first entry of an id kept."""
    cited: dict[str, dict[str, Any]] = {}
    if not isinstance(based_on, dict):
        return cited
    for key in BASED_ON_FACT_TYPES:
        entries = based_on.get(key)
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id"):
                cited.setdefault(str(entry["id"]), entry)
    return cited


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def retraction_find(plan: Plan) -> Retraction | None:
    """The retracted facts of a delta refresh's page; None when there are none."""
    model = plan.model
    cited = cited_memories((model.reflect_response or {}).get("based_on"))
    if not cited:
        return None
    ids = {key: _uuid(key) for key in cited}
    where, params = scope_sql(plan.scope, alias="m")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id::text, m.text, m.updated_at, ({where}) FROM banks_memoryunit m "
            "WHERE m.bank_id = %s AND m.id = ANY(%s::uuid[])",
            [*params, model.bank_id, [i for i in ids.values() if i]],
        )
        rows: dict[str, tuple[str, datetime, bool]] = {
            row[0]: (row[1], row[2], row[3]) for row in cursor.fetchall()}
    watermark = model.last_memory_seen_at
    gone = [uid for key, uid in ids.items()
            if uid and uid not in rows and not cited[key].get("text")]
    last_known = _last_known_texts(model.bank_id, gone) if gone else {}
    facts = []
    for key, entry in cited.items():
        recorded = str(entry.get("text") or "")
        row = rows.get(ids[key] or "")
        if row is None or not row[2]:
            text = recorded or (row[0] if row else last_known.get(ids[key] or "", ""))
            facts.append(RetractedFact(id=key, text=text, kind=REMOVED))
        elif (watermark is not None and row[1] > watermark
              and (entry.get("text") is None or row[0] != recorded)):
            facts.append(RetractedFact(id=key, text=recorded, kind=EDITED, now=row[0]))
    return Retraction(facts=facts, cited_count=len(cited)) if facts else None


def _last_known_texts(bank_id: str, ids: list[str]) -> dict[str, str]:
    """The texts of removed memories the page cited without one: the archive's for an
    invalidated memory, else what its newest curation change recorded it said."""
    texts = {str(i): t for i, t in InvalidatedMemoryUnit.objects.filter(
        bank_id=bank_id, id__in=ids).values_list("id", "text")}
    changes = MemoryChange.objects.filter(
        bank_id=bank_id, memory_id__in=[i for i in ids if i not in texts]).order_by("changed_at")
    for memory_id, previous in changes.values_list("memory_id", "previous"):
        if isinstance(previous, dict) and previous.get("text"):
            texts[str(memory_id)] = str(previous["text"])  # the newest change last, so it wins
    return texts


def retraction_prompt(retraction: Retraction) -> str:
    """The part of the edit call's prompt that shows the retracted facts."""
    lines = []
    for index, fact in enumerate(retraction.facts, 1):
        said = fact.text or "(its text was not recorded)"
        if fact.kind == EDITED:
            lines.append(f"{index}. {said} — edited; it now reads: {fact.now}")
        else:
            lines.append(f"{index}. {said} — removed (deleted, invalidated or out of this "
                         "document's scope)")
    return (
        "Retracted facts (the document rests on them, and they no longer hold as it recorded "
        "them). Remove or rewrite every statement that rests on them, with remove_block, "
        "replace_block, replace_section_blocks or remove_section; keep what other facts still "
        "support:\n" + "\n".join(lines)
    )


def acted_on(applied: list[dict[str, Any]]) -> bool:
    """Whether the applied operations removed or rewrote anything."""
    return any(isinstance(entry.get("operation"), dict)
               and entry["operation"].get("op") in RETRACTING_OPS for entry in applied)


def prune_based_on(based_on: Any, drop: frozenset[str]) -> dict[str, list[Any]]:
    """``based_on`` without the memory entries whose id is in ``drop``."""
    source = based_on if isinstance(based_on, dict) else {}
    return {key: [e for e in source.get(key) or []
                  if not (key in BASED_ON_FACT_TYPES and isinstance(e, dict)
                          and str(e.get("id")) in drop)]
            for key in BASED_ON_KEYS}
