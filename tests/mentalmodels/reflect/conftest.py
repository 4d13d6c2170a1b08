"""Factories for reflect tests: banks, memories (embedded by the scripted server), mental models.

Every reflect test embeds with the scripted server's pseudo-embeddings (texts sharing words are
closer), so rankings are deterministic and no local model is loaded.
"""

from __future__ import annotations

from typing import Any

import pytest

from hindsight.banks.models import Bank, MemoryUnit
from mentalmodels.models import MentalModel
from tests.factories import make_memory, make_mental_model


@pytest.fixture(autouse=True)
def _embed_with_scripted_server(openai_embeddings):
    return openai_embeddings


@pytest.fixture
def bank_id() -> str:
    return "reflect-bank"


@pytest.fixture
def bank_fields() -> dict[str, str]:
    return {"name": "Reflect bank"}


def add_memory(bank: Bank, text: str, **fields: Any) -> MemoryUnit:
    """Reflect's preset of ``make_memory``: every memory is embedded."""
    return make_memory(bank, text, embed=True, **fields)


def add_model(
    bank: Bank,
    mental_model_id: str,
    *,
    name: str,
    content: str,
    fresh: bool = True,
    source_query: str | None = None,
    **fields: Any,
) -> MentalModel:
    """Reflect's preset of ``make_mental_model``: fresh (watermark past every memory written so
    far) unless told otherwise, and a source query naming the model."""
    return make_mental_model(
        bank, mental_model_id, name=name, content=content, fresh=fresh,
        source_query=source_query or f"What about {name}?", **fields,
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
