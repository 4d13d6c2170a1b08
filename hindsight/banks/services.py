"""Writes of the banks app: banks, their configuration, and retain.

Every memory write holds the bank's shared write lock (``writeclock``) in the transaction that
inserts, and lets the database stamp ``updated_at``/``created_at`` (``clock_timestamp()``), so
no write commits at or below a refresh cutoff taken earlier. LLM and embedder calls happen
before that transaction opens, never inside it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Value
from django.db.models.functions import Cast
from django.utils import timezone

from hindsight.banks import bankconfig
from hindsight.banks.budget import (
    BUDGET_KEY,
    PARKED_BY_BUDGET,
    bank_budget_require,
    bank_budget_spent,
    budget_parked_by,
    budget_parked_release,
)
from hindsight.banks.consolidation import consolidation_submit, consolidation_submit_after_retain
from hindsight.banks.documentrows import document_memories_replace, documents_record
from hindsight.banks.events import retain_completed
from hindsight.banks.extraction import ExtractedFact, facts_extract_many, uses_llm
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.operation_types import BankOperationType
from hindsight.banks.retaintypes import RetainItem, RetainQueued, RetainResult, Usage
from hindsight.banks.selectors import bank_disposition, bank_mission
from hindsight.banks.serializers import parse_datetime_value
from hindsight.banks.tokens import count_tokens_to_store
from hindsight.banks.writeclock import WRITE_LOCK_CLASS
from hindsight.infra.db import ClockTimestamp, vector_literal
from hindsight.infra.embeddings import EmbeddingError, get_embedder
from hindsight.infra.errors import (
    DomainError,
    FieldError,
    LLMNotConfigured,
    NotFound,
    Unavailable,
    UpstreamFailed,
)
from hindsight.infra.llm import Deadline, LLMTimeout
from hindsight.infra.vocabulary import iso
from operations.leases import lease_bump
from operations.models import CANCELLED, PARKED_BY, PENDING, PROCESSING, Operation
from operations.queue import operation_submit

BANK_ID_MAX = 255
DEFAULT_DISPOSITION = {"skepticism": 3, "literalism": 3, "empathy": 3}
# Bank fields that are configuration upstream (CreateBankRequest carries them for old clients).
_CONFIG_FIELDS_IN_BANK_BODY = (
    "retain_mission", "retain_extraction_mode", "retain_custom_instructions",
    "retain_chunk_size", "retain_structured_chunk_size", "retain_max_attachments_per_chunk",
    "enable_observations", "observations_mission", "enable_text_search",
    "enable_temporal_retrieval", "enable_graph_retrieval", "enable_reranking",
)


class ExtractionFailed(UpstreamFailed):
    """The LLM could not extract facts from a retain item."""


class RetainTimedOut(DomainError):
    """A sync retain's extraction ran past ``HINDSIGHT_API_RETAIN_SYNC_TIMEOUT``."""

    status_code = 504


class EmbeddingUnavailable(Unavailable):
    """The embedder could not embed (a retain's facts or a recall's query)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def bank_id_validate(bank_id: str, *, loc: tuple[str, ...] = ("path", "bank_id")) -> str:
    if not bank_id or len(bank_id) > BANK_ID_MAX or _CONTROL.search(bank_id):
        raise FieldError(loc, f"a bank id is 1..{BANK_ID_MAX} printable characters")
    return bank_id


def bank_ensure(*, bank_id: str) -> None:
    """Create the bank if it does not exist (lazy creation by any bank-scoped write).

    Race-free: ``INSERT … ON CONFLICT DO NOTHING``. Safe inside a caller's transaction.
    """
    bank_id_validate(bank_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO banks_bank (id, name, mission, disposition, config) "
            "VALUES (%s, '', '', %s::jsonb, '{}'::jsonb) ON CONFLICT (id) DO NOTHING",
            [bank_id, '{"skepticism": 3, "literalism": 3, "empathy": 3}'],
        )


def _apply_bank_fields(bank: Bank, data: dict[str, Any]) -> None:
    if data.get("name") is not None:
        bank.name = data["name"]
    config = dict(bank.config or {})
    # reflect_mission is the current name of mission, background an older one; its home is the
    # config's reflect_mission (what the client's update_bank_config writes).
    for key in ("background", "mission", "reflect_mission"):
        if data.get(key) is not None:
            config["reflect_mission"] = data[key]
    # The disposition's one home is the config (disposition_* keys, what the client's
    # update_bank_config writes); the bank body's traits are written there too.
    traits = dict(data.get("disposition") or {})
    for trait in DEFAULT_DISPOSITION:
        if data.get(f"disposition_{trait}") is not None:
            traits[trait] = data[f"disposition_{trait}"]
    for trait, value in traits.items():
        config[f"disposition_{trait}"] = value
    for key in _CONFIG_FIELDS_IN_BANK_BODY:
        if data.get(key) is not None:
            config[key] = data[key]
    if config:
        bankconfig.validate_updates(config, loc=("body",))
    bank.config = config
    _mirror_disposition(bank)


def _mirror_disposition(bank: Bank) -> None:
    """Keep ``Bank.disposition`` and ``Bank.mission`` (the admin shows them) equal to what the
    config says."""
    bank.disposition = bank_disposition(bank=bank)
    bank.mission = bank_mission(bank=bank)


@transaction.atomic
def bank_upsert(*, bank_id: str, data: dict[str, Any]) -> Bank:
    """PUT and PATCH: create the bank if needed, then apply the fields that were sent."""
    bank_ensure(bank_id=bank_id)
    bank = Bank.objects.select_for_update().get(id=bank_id)
    _apply_bank_fields(bank, data)
    bank.updated_at = ClockTimestamp()
    bank.save()
    bank.refresh_from_db()
    return bank


def bank_delete(*, bank_id: str) -> int:
    """Delete the bank and everything in it (memories, mental models, operations cascade).

    First, in a transaction of its own, the leases of the bank's unfinished operations are
    bumped (in the engine's lock order: leases, sorted, then the operation rows, whose pending
    ones are cancelled so no worker claims them meanwhile). A job in the middle of its fenced
    write holds its lease row, so the bump waits for it to commit; every later fence check of a
    running job fails, so no job holds a model row when the cascade below locks the bank and
    then the rows, and none writes into the deleted bank afterwards (its writes roll back).
    Without this, a refresh holding its lease and model row and a cascade holding the
    operation rows wait for each other: a deadlock, and a 500.
    """
    if not Bank.objects.filter(id=bank_id).exists():
        raise NotFound(f"Bank '{bank_id}' not found")
    _bank_fence_running_jobs(bank_id=bank_id)
    return _bank_delete_rows(bank_id=bank_id)


def _bank_fence_running_jobs(*, bank_id: str) -> None:
    with transaction.atomic():
        unfinished = Operation.objects.filter(bank_id=bank_id, status__in=(PENDING, PROCESSING))
        keys = sorted({op.lease_key for op in unfinished.only("id", "dedupe_key")})
        for key in keys:
            lease_bump(key=key)
        Operation.objects.filter(bank_id=bank_id, status=PENDING).update(
            status=CANCELLED, completed_at=ClockTimestamp(), updated_at=ClockTimestamp(),
            error_message="cancelled: the bank is being deleted",
        )


@transaction.atomic
def _bank_delete_rows(*, bank_id: str) -> int:
    bank = Bank.objects.select_for_update().filter(id=bank_id).first()
    if bank is None:
        raise NotFound(f"Bank '{bank_id}' not found")
    count = MemoryUnit.objects.filter(bank_id=bank_id).count()
    bank.delete()
    return count


@transaction.atomic
def bank_config_update(*, bank_id: str, updates: dict[str, Any]) -> Bank:
    clean = bankconfig.validate_updates(updates)
    bank_ensure(bank_id=bank_id)
    bank = Bank.objects.select_for_update().get(id=bank_id)
    config = dict(bank.config or {})
    budget_before = config.get(BUDGET_KEY)
    for key, value in clean.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    bank.config = config
    _mirror_disposition(bank)
    bank.updated_at = ClockTimestamp()
    bank.save(update_fields=["config", "disposition", "mission", "updated_at"])
    if config.get(BUDGET_KEY) != budget_before:
        budget_parked_release(bank_id=bank_id)
    return bank


@transaction.atomic
def bank_config_reset(*, bank_id: str) -> Bank:
    bank = Bank.objects.select_for_update().filter(id=bank_id).first()
    if bank is None:
        raise NotFound(f"Bank '{bank_id}' not found")
    had_budget = (bank.config or {}).get(BUDGET_KEY) is not None
    bank.config = {}
    bank.disposition = dict(DEFAULT_DISPOSITION)
    bank.mission = ""
    bank.updated_at = ClockTimestamp()
    bank.save(update_fields=["config", "disposition", "mission", "updated_at"])
    if had_budget:
        budget_parked_release(bank_id=bank_id)
    return bank


# --- retain ----------------------------------------------------------------------------------


def _parse_iso(value: str | None) -> datetime | None:
    if value is None:
        return None

    return parse_datetime_value(value)


def memories_retain_sync(
    *, bank_id: str, items: Sequence[RetainItem]
) -> RetainResult | RetainQueued:
    """``POST …/memories`` without ``async``: ``memories_retain`` within the request's time.

    A batch with more items to extract by the LLM than
    ``HINDSIGHT_API_RETAIN_SYNC_MAX_LLM_ITEMS`` is refused at once (422 on ``body.items``,
    pointing to ``async: true``) rather than left to run past any client's timeout; the
    extraction of a batch under the bound is cut at ``HINDSIGHT_API_RETAIN_SYNC_TIMEOUT``
    (504, nothing stored). A batch the LLM would extract from while the bank has spent its
    token budget is queued parked instead, the whole batch kept in the operation
    (docs/behaviour.md#over-budget-nothing-is-lost).
    """
    cfg = settings.HINDSIGHT
    llm_items = sum(1 for item in items if uses_llm(item))
    if llm_items > cfg.retain_sync_max_llm_items:
        raise FieldError(
            ("body", "items"),
            f"a sync retain extracts at most {cfg.retain_sync_max_llm_items} items with the LLM "
            f"(HINDSIGHT_API_RETAIN_SYNC_MAX_LLM_ITEMS); this one has {llm_items}: send it with "
            '"async": true, or in smaller batches',
            "too_long",
        )
    if llm_items and bank_budget_spent(bank_id=bank_id) is not None:
        return retain_submit_async(bank_id=bank_id, items=items)
    try:
        return memories_retain(
            bank_id=bank_id, items=items, deadline=Deadline(cfg.retain_sync_timeout_seconds)
        )
    except LLMTimeout as exc:
        raise RetainTimedOut(
            f"fact extraction did not finish within {cfg.retain_sync_timeout_seconds:g} s "
            f'(HINDSIGHT_API_RETAIN_SYNC_TIMEOUT); nothing was stored: send it with "async": true'
        ) from exc


def memories_retain(
    *,
    bank_id: str,
    items: Sequence[RetainItem],
    document_tags: Sequence[str] | None = None,
    before_commit: Callable[[], None] | None = None,
    deadline: Deadline | None = None,
    operation_id: str | None = None,
) -> RetainResult:
    """Store the facts of ``items`` — all of them or none.

    Extraction (LLM calls, concurrent up to ``HINDSIGHT_API_RETAIN_EXTRACTION_CONCURRENCY``,
    bounded by ``deadline``) and one batched embedding run first, outside any transaction; then
    one transaction takes the bank's shared write lock, creates the bank if needed, replaces
    the documents being re-sent (``update_mode: replace``), inserts every fact in one
    statement, and calls ``before_commit`` (the operations engine's fence check for async
    retain) before committing.
    """
    bank_id_validate(bank_id)
    extra_tags = list(document_tags or [])
    usage = Usage()
    planned: list[tuple[RetainItem, ExtractedFact]] = []
    try:
        extracted = facts_extract_many(items=items, bank_id=bank_id, deadline=deadline)
    except DomainError:
        raise
    except Exception as exc:
        if isinstance(exc, LLMTimeout) and deadline is not None and deadline.expired:
            raise  # the caller's time is up, not a failed extraction
        raise ExtractionFailed(f"fact extraction failed: {exc}") from exc
    for item, (facts, item_usage) in zip(items, extracted, strict=True):
        usage = usage + item_usage
        planned.extend((item, fact) for fact in facts)

    vectors: list[list[float]] = []
    if planned:
        try:
            vectors = get_embedder().embed([fact.text for _, fact in planned])
        except EmbeddingError as exc:
            raise EmbeddingUnavailable(f"embedding failed: {exc}") from exc

    # Counted once here, so recall's token budget reads the count instead of tokenizing hits.
    token_counts = count_tokens_to_store([fact.text for _, fact in planned])
    now = timezone.now()
    units = []
    for (item, fact), vector, tokens in zip(planned, vectors, token_counts, strict=True):
        tags = list(dict.fromkeys([*item.tags, *extra_tags]))
        # mentioned_at: when the content was said; "now" when not given, none when 'unset'.
        mentioned = None if item.timestamp_unset else (_parse_iso(item.timestamp) or now)
        units.append(
            MemoryUnit(
                bank_id=bank_id,
                text=fact.text,
                context=item.context,
                fact_type=fact.fact_type,
                tags=tags,
                document_id=item.document_id,
                metadata=dict(item.metadata),
                entities=list(item.entities),
                occurred_start=fact.occurred_start,
                occurred_end=fact.occurred_end,
                mentioned_at=mentioned,
                embedding=_vector_value(vector),
                text_tokens=tokens,
            )
        )

    replaced_documents = sorted(
        {i.document_id for i in items if i.document_id and i.update_mode == "replace"}
    )
    with transaction.atomic():
        stamp, config = _retain_begin(bank_id)
        for unit in units:
            unit.created_at = unit.updated_at = stamp
        # Re-sent documents replace what they stored before; each document's row is written.
        removed = document_memories_replace(bank_id=bank_id, document_ids=replaced_documents,
                                            stamp=stamp) if replaced_documents else {}
        created = MemoryUnit.objects.bulk_create(units)
        added = Counter(unit.document_id for unit in created if unit.document_id)
        documents_record(bank_id=bank_id, items=items, added=added, removed=removed,
                         stamp=stamp, operation_id=operation_id)
        if created and auto_consolidation_enabled(bank_id=bank_id, config=config):
            # In the same transaction: the facts and the job that consolidates them commit
            # together (a crash in between cannot leave facts nothing will pick up).
            consolidation_submit_after_retain(bank_id=bank_id)
        retain_completed(bank_id=bank_id, items=items, operation_id=operation_id)  # webhooks
        if before_commit is not None:
            before_commit()
    return RetainResult(
        bank_id=bank_id,
        items_count=len(items),
        memory_ids=[str(u.id) for u in created],
        usage=usage,
    )


def _vector_value(vector: list[float]) -> Cast:
    """The embedding as a ``vector`` literal (``hindsight.infra.db.vector_literal``): pgvector would
    write each component with ``str(float)``, ~0.3 ms a vector in Python."""
    field = MemoryUnit._meta.get_field("embedding")
    return Cast(Value(vector_literal(vector)), output_field=field)


def _retain_begin(bank_id: str) -> tuple[datetime, dict[str, Any]]:
    """In a retain's transaction, in one round trip: create the bank if needed (as
    ``bank_ensure``), take its shared write lock (as ``writeclock.hold_bank_write_lock``), then
    read the write stamp — ``clock_timestamp()`` once the lock is granted — and the bank's config.

    The statements run in order on the server (one simple-protocol query string), so the stamp
    is read after the lock, exactly as in two round trips.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("_retain_begin must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO banks_bank (id, name, mission, disposition, config) "
            "VALUES (%s, '', '', %s::jsonb, '{}'::jsonb) ON CONFLICT (id) DO NOTHING; "
            "SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s)); "
            "SELECT clock_timestamp(), config FROM banks_bank WHERE id = %s",
            [bank_id, '{"skepticism": 3, "literalism": 3, "empathy": 3}', WRITE_LOCK_CLASS,
             bank_id, bank_id],
        )
        while cursor.nextset():
            pass
        stamp, config = cursor.fetchone()
    return stamp, _json_config(config)


def _json_config(value: Any) -> dict[str, Any]:
    # A raw read hands jsonb over as text (Django's JSONField decodes it).
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value or {})


def auto_consolidation_enabled(*, bank_id: str, config: dict[str, Any] | None = None) -> bool:
    """Consolidation follows a retain when the bank's ``enable_auto_consolidation`` and
    ``enable_observations`` (both default on) say so and an LLM is configured (without one there
    is nothing to consolidate with: facts stay pending, and ``POST …/consolidate`` says why).
    ``config``: the bank's, when the caller has just read it."""
    if not settings.HINDSIGHT.llm_configured:
        return False
    if config is None:
        config = Bank.objects.filter(id=bank_id).values_list("config", flat=True).first() or {}
    return bool(config.get("enable_auto_consolidation", True)
                and config.get("enable_observations", True))


def consolidation_request(*, bank_id: str) -> tuple[str, bool]:
    """``POST …/consolidate``: queue the bank's consolidation or return the queued one.
    Returns ``(operation_id, deduplicated)``."""
    bank_id_validate(bank_id)
    if not settings.HINDSIGHT.llm_configured:
        raise LLMNotConfigured("consolidation")
    bank_budget_require(bank_id=bank_id)
    with transaction.atomic():
        bank_ensure(bank_id=bank_id)
        result = consolidation_submit(bank_id=bank_id, automatic=False)
    return str(result.operation.id), not result.created


# --- async retain: an operation whose handler is ``hindsight.banks.handlers.RetainHandler`` ---


def retain_submit_async(
    *,
    bank_id: str,
    items: Sequence[RetainItem],
    document_tags: Sequence[str] | None = None,
    operation_id: str | None = None,
) -> RetainQueued:
    """Queue a retain as an operation: its items are kept in the operation's payload.

    The job later calls ``memories_retain`` with ``before_commit=job.complete_in_transaction``.
    When the LLM would extract from an item and the bank has spent its token budget, the
    operation is queued parked until the bank frees (a raised budget releases it sooner):
    nothing is sent to the LLM meanwhile, nothing is lost
    (docs/behaviour.md#over-budget-nothing-is-lost).
    """
    bank_id_validate(bank_id)
    spend = bank_budget_spent(bank_id=bank_id) if any(uses_llm(i) for i in items) else None
    with transaction.atomic():
        bank_ensure(bank_id=bank_id)
        result = operation_submit(
            bank_id=bank_id,
            operation_type=BankOperationType.RETAIN,
            payload={
                "items": [item.to_json() for item in items],
                "document_tags": list(document_tags or []),
            },
            operation_id=operation_id,
            not_before=spend.park_until if spend is not None else None,
            parked_by=budget_parked_by(spend) if spend is not None else None,
        )
    return RetainQueued(bank_id=bank_id, items_count=len(items),
                        operation_id=str(result.operation.id),
                        parked=_parked_by_budget(result.operation))


def _parked_by_budget(operation: Operation) -> dict[str, Any] | None:
    """What a retain's answer says of its operation when the budget holds it: the budget's
    ``parked_by`` and ``until`` (when it is sent again), else None."""
    parked_by = (operation.result_metadata or {}).get(PARKED_BY) or {}
    if (operation.status != PENDING or operation.next_retry_at is None
            or parked_by.get("reason") != PARKED_BY_BUDGET):
        return None
    return {**parked_by, "until": iso(operation.next_retry_at)}
