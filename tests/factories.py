"""Rows for tests: banks, memories, mental models, operations (plain functions, keyword args).

Every factory writes through the same path a real write takes where that matters: a memory
is stamped by the bank's write clock (``hold_bank_write_lock`` in its own transaction), a
mental model's trigger is normalized, a "fresh" model's watermark is the bank's cutoff.
A ``bank`` argument is a ``Bank`` or its id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock, take_cutoff
from hindsight.infra.embeddings import get_embedder
from mentalmodels.models import MentalModel
from mentalmodels.triggers import trigger_normalize
from operations.models import Operation

__all__ = ["make_bank", "make_memory", "make_mental_model", "make_operation"]

DEFAULT_SOURCE_QUERY = "How does the team work?"


def _bank_id(bank: Bank | str) -> str:
    return bank if isinstance(bank, str) else bank.id


def make_bank(id: str = "bank", **fields: Any) -> Bank:  # noqa: A002 - the model's field name
    """A bank row (``name`` and the other fields keep the model's defaults unless given)."""
    return Bank.objects.create(id=id, **fields)


def make_memory(
    bank: Bank | str,
    text: str,
    *,
    fact_type: str = "world",
    tags: Iterable[str] = (),
    context: str = "",
    embed: bool = False,
    **fields: Any,
) -> MemoryUnit:
    """One memory, stamped by the write clock like every real write; ``embed`` computes its
    vector with the configured embedder (otherwise it has none)."""
    bank_id = _bank_id(bank)
    vector = None
    if embed:
        [vector] = get_embedder().embed([text])
    with transaction.atomic():
        hold_bank_write_lock(bank_id)
        unit = MemoryUnit.objects.create(
            bank_id=bank_id, text=text, fact_type=fact_type, tags=list(tags), context=context,
            embedding=vector, **fields,
        )
    unit.refresh_from_db()
    return unit


def make_mental_model(
    bank: Bank | str,
    mental_model_id: str = "team",
    *,
    name: str = "Team",
    source_query: str | None = None,
    content: str = "",
    tags: Iterable[str] = (),
    trigger: dict | None = None,
    fresh: bool = False,
    **fields: Any,
) -> MentalModel:
    """A mental model; ``fresh`` sets its watermark (``last_refreshed_at`` and
    ``last_memory_seen_at``) to the bank's cutoff, past every memory written so far."""
    bank_id = _bank_id(bank)
    if fresh:
        watermark = take_cutoff(bank_id)
        fields.setdefault("last_refreshed_at", watermark)
        fields.setdefault("last_memory_seen_at", watermark)
    model = MentalModel.objects.create(
        bank_id=bank_id,
        mental_model_id=mental_model_id,
        name=name,
        source_query=DEFAULT_SOURCE_QUERY if source_query is None else source_query,
        content=content,
        tags=list(tags),
        trigger=trigger_normalize(trigger or {}),
        **fields,
    )
    model.refresh_from_db()
    return model


def make_operation(
    *,
    bank_id: str = "bank",
    operation_type: str = "refresh_mental_model",
    **fields: Any,
) -> Operation:
    """An operation row as it is stored, not submitted (no coalescing, nothing published)."""
    return Operation.objects.create(bank_id=bank_id, operation_type=operation_type, **fields)
