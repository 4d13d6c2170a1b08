"""Factories for mental-model tests: banks, memories written through the write clock, models."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock
from mentalmodels.models import MentalModel
from mentalmodels.triggers import trigger_normalize


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def bank(db) -> Bank:
    return Bank.objects.create(id="mm-bank", name="Mental model bank")


def add_memory(
    bank: Bank | str,
    text: str,
    *,
    fact_type: str = "world",
    tags: Iterable[str] = (),
    context: str = "",
    embed: bool = False,
) -> MemoryUnit:
    """One memory, stamped by the write clock like every real write."""
    bank_id = bank if isinstance(bank, str) else bank.id
    vector = None
    if embed:
        from hindsight.embeddings import get_embedder

        [vector] = get_embedder().embed([text])
    with transaction.atomic():
        hold_bank_write_lock(bank_id)
        unit = MemoryUnit.objects.create(
            bank_id=bank_id, text=text, fact_type=fact_type, tags=list(tags), context=context,
            embedding=vector,
        )
    unit.refresh_from_db()
    return unit


def add_model(
    bank: Bank | str,
    mental_model_id: str = "team",
    *,
    name: str = "Team",
    source_query: str = "How does the team work?",
    content: str = "",
    tags: Iterable[str] = (),
    trigger: dict | None = None,
    **fields,
) -> MentalModel:
    bank_id = bank if isinstance(bank, str) else bank.id
    model = MentalModel.objects.create(
        bank_id=bank_id,
        mental_model_id=mental_model_id,
        name=name,
        source_query=source_query,
        content=content,
        tags=list(tags),
        trigger=trigger_normalize(trigger or {}),
        **fields,
    )
    model.refresh_from_db()
    return model
