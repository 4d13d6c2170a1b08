"""Factories for reflect tests: banks, memories (embedded by the scripted server), mental models.

Every reflect test embeds with the scripted server's pseudo-embeddings (texts sharing words are
closer), so rankings are deterministic and no local model is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import pytest
from django.db import transaction

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock, take_cutoff
from hindsight.embeddings import get_embedder
from mentalmodels.models import MentalModel


@pytest.fixture(autouse=True)
def _embed_with_scripted_server(openai_embeddings):
    return openai_embeddings


@pytest.fixture
def bank(db) -> Bank:
    return Bank.objects.create(id="reflect-bank", name="Reflect bank")


def add_memory(
    bank: Bank,
    text: str,
    *,
    fact_type: str = "world",
    tags: Iterable[str] = (),
    context: str = "",
) -> MemoryUnit:
    [vector] = get_embedder().embed([text])
    with transaction.atomic():
        hold_bank_write_lock(bank.id)
        unit = MemoryUnit.objects.create(
            bank=bank, text=text, fact_type=fact_type, tags=list(tags), context=context,
            embedding=vector,
        )
    unit.refresh_from_db()
    return unit


def add_model(
    bank: Bank,
    mental_model_id: str,
    *,
    name: str,
    content: str,
    tags: Iterable[str] = (),
    fresh: bool = True,
    source_query: str | None = None,
) -> MentalModel:
    """A mental model; ``fresh`` sets its watermark past every memory written so far."""
    watermark: datetime | None = take_cutoff(bank.id) if fresh else None
    return MentalModel.objects.create(
        bank=bank,
        mental_model_id=mental_model_id,
        name=name,
        source_query=source_query or f"What about {name}?",
        content=content,
        tags=list(tags),
        last_refreshed_at=watermark,
        last_memory_seen_at=watermark,
    )


def tool_choices(requests: list[dict]) -> list[object]:
    """What each chat request forced: a tool name, "auto", or None (no tools offered)."""
    out: list[object] = []
    for body in requests:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            out.append(choice["function"]["name"])
        else:
            out.append(choice)
    return out


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]
