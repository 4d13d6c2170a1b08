"""Consolidation against a server that answers as real ones do (``fakes.llm_server.Quirks``): the
same gateway handling as retain and refresh, so the observation stored is the answer alone."""

from __future__ import annotations

import dataclasses

import pytest

from fakes.consolidation_llm import ConsolidatingLLM
from fakes.llm_server import Quirks
from hindsight.banks.consolidation import consolidation_submit
from hindsight.banks.models import MemoryUnit
from operations.engine import operation_execute
from tests.factories import make_memory

BANK = "consolidation-quirks"


@pytest.fixture
def bank_id() -> str:
    return BANK


@pytest.mark.parametrize("quirks", [
    Quirks(think=True), Quirks(orphan_think=True), Quirks(prose=True, reasoning_content=True),
    Quirks(fence=True), Quirks(cut_off=1),
], ids=["think", "orphan_think", "prose", "fence", "cut_off_once"])
def test_consolidation_stores_the_observation_whole_and_clean(quirks, bank, llm, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=2)
    fact = make_memory(bank, "Alice likes tea", embed=True)
    ConsolidatingLLM(llm)
    llm.quirks = quirks
    op = consolidation_submit(bank_id=BANK).operation
    assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    (observation,) = MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation")
    assert observation.text == "Observed: Alice likes tea"
    assert observation.source_memory_ids == [fact.id]
