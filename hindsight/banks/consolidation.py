"""Consolidation: facts waiting for it (``consolidated_at IS NULL``, world/experience) become
``observation`` memory units, per tag scope, in bounded rounds.

One operation per bank at a time (dedupe key ``consolidate:{bank}``: a request while one is
queued folds into it; one while it runs queues one behind it). The operation is a *chain* of
rounds: each round reads up to ``HINDSIGHT_API_CONSOLIDATION_BATCH_SIZE`` pending facts (oldest
first), groups them by their exact tag set, and asks the LLM (structured output, one call per
group) which observations of *that* tag set to create, update or delete. An observation
therefore never mixes facts of different tag sets; it carries their tags and records
``source_memory_ids``.

A round's writes are one transaction: the job's fence, the bank's shared write lock (the write
clock: created and updated observations get ``updated_at`` = the write stamp, so a refresh
cutoff taken earlier never misses them), the observation writes and the marking of every fact
of the round — also those the LLM placed nowhere, so no fact is retried forever. Marking sets
``consolidated_at`` only: a fact's ``updated_at`` is its write, not its consolidation. The LLM
and the embedder are called before that transaction opens. A round that fails (LLM, embedder,
database) raises: its facts stay pending and the engine retries the operation, which carries on
from the rounds that had committed (what they touched is kept in ``result_metadata``).

When the chain has nothing left to read (or spent ``HINDSIGHT_API_CONSOLIDATION_MAX_ROUNDS``
rounds, or the bank spent its token budget after a round — ``hindsight.banks.budget`` —, in
which case it queues its continuation), the operation completes and, in the same
transaction, the bank's consolidation listeners (``hindsight.banks.hooks``) hear once which tag
scopes it touched — mental models queue their ``refresh_after_consolidation`` refreshes there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from pgvector.django import CosineDistance

from hindsight.banks.budget import bank_budget_spent
from hindsight.banks.events import consolidation_completed as consolidation_event
from hindsight.banks.hooks import ConsolidationCompleted, consolidation_completed_notify
from hindsight.banks.models import MemoryUnit
from hindsight.banks.operation_types import BankOperationType
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.llm import get_llm
from hindsight.infra.vocabulary import EXTRACTED_FACT_TYPES, FactType
from operations.jobs import Job
from operations.queue import SubmitResult, operation_fold_automatic, operation_submit

log = logging.getLogger(__name__)

# Existing observations of a tag set shown to the LLM with a round's facts (nearest first).
OBSERVATIONS_SHOWN = 12
# Characters of one fact or observation put into the prompt.
TEXT_CHARS = 2000

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["create", "update", "delete"],
    "properties": {
        "create": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "source_fact_ids"],
                "properties": {
                    "text": {"type": "string"},
                    "source_fact_ids": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "update": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["observation_id", "text", "source_fact_ids"],
                "properties": {
                    "observation_id": {"type": "string"},
                    "text": {"type": "string"},
                    "source_fact_ids": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "delete": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["observation_id"],
                "properties": {"observation_id": {"type": "string"}},
            },
        },
    },
}

SYSTEM_PROMPT = (
    "You maintain the observations of a long-term memory: short, durable statements that "
    "synthesise what many facts say (preferences, patterns, states, relationships). You get "
    "new facts (ids F1, F2, …) and the existing observations of the same scope (ids O1, O2, …). "
    "Return JSON matching the schema: 'create' new observations the facts support, 'update' an "
    "existing observation whose statement the facts refine or change (give its full new text), "
    "'delete' an observation the facts show is no longer true. Cite in source_fact_ids the new "
    "facts each observation rests on. Do not restate a fact that says nothing beyond itself; "
    "return empty lists when the facts change nothing."
)


def consolidation_key(bank_id: str) -> str:
    return f"consolidate:{bank_id}"


def consolidation_submit(*, bank_id: str, automatic: bool = True) -> SubmitResult:
    """Queue the bank's consolidation, or return the one already queued (coalescing).

    Safe inside the caller's transaction (retain calls it in the one that stores the facts):
    it is published after commit.
    """
    return operation_submit(
        bank_id=bank_id,
        operation_type=BankOperationType.CONSOLIDATION,
        dedupe_key=consolidation_key(bank_id),
        automatic=automatic,
    )


def consolidation_submit_after_retain(*, bank_id: str) -> None:
    """Retain's ``consolidation_submit`` (automatic, in the retain's transaction): one
    ``UPDATE`` when a consolidation is queued already (``operation_fold_automatic``), else the
    general submit queues one."""
    if not operation_fold_automatic(dedupe_key=consolidation_key(bank_id)):
        consolidation_submit(bank_id=bank_id)


# ---------------------------------------------------------------------------------------------
# What a chain touched


@dataclass
class Touched:
    """The ``(tags, fact_type)`` pairs a chain consolidated or wrote, and its counts."""

    scopes: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    rounds: int = 0
    facts: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> Touched:
        saved = metadata.get("consolidation") or {}
        return cls(
            scopes={(tuple(tags), fact_type) for tags, fact_type in saved.get("scopes", [])},
            rounds=int(saved.get("rounds", 0)),
            facts=int(saved.get("facts", 0)),
            created=int(saved.get("observations_created", 0)),
            updated=int(saved.get("observations_updated", 0)),
            deleted=int(saved.get("observations_deleted", 0)),
        )

    def as_metadata(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "facts": self.facts,
            "observations_created": self.created,
            "observations_updated": self.updated,
            "observations_deleted": self.deleted,
            "scopes": [[list(tags), fact_type] for tags, fact_type in sorted(self.scopes)],
        }


# ---------------------------------------------------------------------------------------------
# One round


@dataclass
class _Plan:
    """What one tag group's LLM answer asks for, resolved to rows and ids."""

    tags: tuple[str, ...]
    creates: list[tuple[str, list[str]]] = field(default_factory=list)
    updates: list[tuple[MemoryUnit, str, list[str]]] = field(default_factory=list)
    deletes: list[MemoryUnit] = field(default_factory=list)


def _pending_facts(bank_id: str, limit: int) -> list[MemoryUnit]:
    return list(
        MemoryUnit.objects.filter(
            bank_id=bank_id, consolidated_at__isnull=True, fact_type__in=EXTRACTED_FACT_TYPES
        )
        .only("id", "text", "tags", "fact_type", "embedding", "created_at")
        .order_by("created_at", "id")[:limit]
    )


def _scope_observations(bank_id: str, tags: tuple[str, ...], facts: Sequence[MemoryUnit]
                        ) -> list[MemoryUnit]:
    """Observations with exactly ``tags``, nearest to the facts first."""
    qs = MemoryUnit.objects.filter(
        bank_id=bank_id, fact_type=FactType.OBSERVATION, tags__contains=list(tags),
        tags__contained_by=list(tags),
    ).only("id", "text", "tags", "source_memory_ids")
    vectors = [np.asarray(f.embedding) for f in facts if f.embedding is not None]
    if vectors:
        centroid = np.mean(vectors, axis=0)
        qs = qs.order_by(CosineDistance("embedding", centroid.tolist()), "id")
    else:
        qs = qs.order_by("-updated_at", "id")
    return list(qs[:OBSERVATIONS_SHOWN])


def _ask(bank_id: str, tags: tuple[str, ...], facts: Sequence[MemoryUnit],
         observations: Sequence[MemoryUnit]) -> dict[str, Any]:
    lines = ["New facts:"]
    lines += [f"F{i}: {f.text[:TEXT_CHARS]}" for i, f in enumerate(facts, 1)]
    lines.append("Existing observations:" if observations else "Existing observations: none")
    lines += [f"O{i}: {o.text[:TEXT_CHARS]}" for i, o in enumerate(observations, 1)]
    result = get_llm(bank_id=bank_id).structured(
        [{"role": "system", "content": SYSTEM_PROMPT},
         {"role": "user", "content": "\n".join(lines)}],
        schema=SCHEMA,
        name="consolidation",
        purpose="consolidation",
    )
    data: dict[str, Any] = result.data
    return data


def _plan_group(bank_id: str, tags: tuple[str, ...], facts: Sequence[MemoryUnit]) -> _Plan:
    observations = _scope_observations(bank_id, tags, facts)
    answer = _ask(bank_id, tags, facts, observations)
    fact_ids = {f"F{i}": str(f.id) for i, f in enumerate(facts, 1)}
    shown = {f"O{i}": o for i, o in enumerate(observations, 1)}
    plan = _Plan(tags=tags)

    def sources(labels: list[str]) -> list[str]:
        # Only facts of this round's group can be cited: an invented id is dropped.
        return list(dict.fromkeys(fact_ids[x] for x in labels if x in fact_ids))

    touched: set[str] = set()
    for item in answer["delete"]:
        target = shown.get(item["observation_id"])
        if target is not None and str(target.id) not in touched:
            touched.add(str(target.id))
            plan.deletes.append(target)
    for item in answer["update"]:
        target = shown.get(item["observation_id"])
        text = item["text"].replace("\x00", "").strip()
        if target is None or not text or str(target.id) in touched:
            continue
        touched.add(str(target.id))
        plan.updates.append((target, text, sources(item["source_fact_ids"])))
    for item in answer["create"]:
        text = item["text"].replace("\x00", "").strip()
        cited = sources(item["source_fact_ids"])
        if text and cited:
            plan.creates.append((text, cited))
    return plan


def consolidation_round(*, bank_id: str, job: Job | None, touched: Touched) -> bool:
    """Consolidate one batch of pending facts; False when there was none (no LLM request)."""
    facts = _pending_facts(bank_id, settings.HINDSIGHT.consolidation_batch_size)
    if not facts:
        return False
    groups: dict[tuple[str, ...], list[MemoryUnit]] = {}
    for fact in facts:
        groups.setdefault(tuple(sorted(set(fact.tags or []))), []).append(fact)
    plans = [_plan_group(bank_id, tags, group) for tags, group in sorted(groups.items())]
    texts = [text for p in plans for text, _ in p.creates] + [
        text for p in plans for _, text, _ in p.updates
    ]
    vectors = iter(get_embedder().embed(texts) if texts else [])

    with transaction.atomic():
        if job is not None:
            job.check_fence()
        stamp = hold_bank_write_lock(bank_id)
        created = [
            MemoryUnit(bank_id=bank_id, text=text, fact_type=FactType.OBSERVATION, tags=list(p.tags),
                       source_memory_ids=cited, embedding=next(vectors), created_at=stamp,
                       updated_at=stamp, consolidated_at=stamp)
            for p in plans for text, cited in p.creates
        ]
        MemoryUnit.objects.bulk_create(created)
        for p in plans:
            for target, text, cited in p.updates:
                merged = list(dict.fromkeys([*map(str, target.source_memory_ids), *cited]))
                MemoryUnit.objects.filter(id=target.id).update(
                    text=text, embedding=next(vectors), source_memory_ids=merged,
                    updated_at=stamp, consolidated_at=stamp,
                )
        deleted_ids = [t.id for p in plans for t in p.deletes]
        if deleted_ids:
            MemoryUnit.objects.filter(id__in=deleted_ids, fact_type=FactType.OBSERVATION).delete()
        # Only consolidated_at: a fact's updated_at is when it was written, not consolidated.
        MemoryUnit.objects.filter(
            id__in=[f.id for f in facts], consolidated_at__isnull=True
        ).update(consolidated_at=ClockTimestamp())

    touched.rounds += 1
    touched.facts += len(facts)
    touched.created += len(created)
    touched.updated += sum(len(p.updates) for p in plans)
    touched.deleted += len(deleted_ids)
    for fact in facts:
        touched.scopes.add((tuple(sorted(set(fact.tags or []))), fact.fact_type))
    for p in plans:
        if p.creates or p.updates or p.deletes:
            touched.scopes.add((p.tags, FactType.OBSERVATION))
    log.info("consolidation of %s: round %d, %d facts, %d observations created, %d updated, "
             "%d deleted", bank_id, touched.rounds, len(facts), len(created),
             sum(len(p.updates) for p in plans), len(deleted_ids))
    return True


# ---------------------------------------------------------------------------------------------
# The chain (the operation)


def consolidation_run(*, job: Job) -> Touched:
    """Run rounds until nothing is pending (or the round cap), then complete the operation and
    tell the listeners, once, what the chain touched — in the completion's transaction."""
    bank_id = job.bank_id
    touched = Touched.from_metadata(job.result_metadata)
    more = False
    for index in range(settings.HINDSIGHT.consolidation_max_rounds):
        if index and bank_budget_spent(bank_id=bank_id) is not None:
            # The bank spent its token budget during the chain: the rounds done stand, the
            # rest is the continuation's, which the engine parks until the budget frees.
            more = True
            break
        # Progress so far is what a failed attempt records, and what its retry resumes from.
        job.result_metadata = {**job.result_metadata, "consolidation": touched.as_metadata()}
        more = consolidation_round(bank_id=bank_id, job=job, touched=touched)
        if not more:
            break
    job.result_metadata = {**job.result_metadata, "consolidation": touched.as_metadata()}
    # No ``details``: upstream's typed details exist for refreshes only (clients parse them).
    with job.finishing():
        if more:
            # The cap was reached with facts left: the continuation queues behind this one.
            consolidation_submit(bank_id=bank_id, automatic=job.automatic)
        if touched.scopes:
            consolidation_completed_notify(
                ConsolidationCompleted(
                    bank_id=bank_id, operation_id=job.id, scopes=frozenset(touched.scopes)
                )
            )
        consolidation_event(bank_id=bank_id, operation_id=job.id, counts={  # webhooks
            "observations_created": touched.created, "observations_updated": touched.updated,
            "observations_deleted": touched.deleted})
    return touched
