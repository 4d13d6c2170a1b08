"""A bank as a mental-model user has one, built through the services (no LLM): tagged memories in
documents and without, an observation, a config override, directives, two models (one with a
version history and a failure entry, one a knowledge page in a folder), the request log."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from hindsight_client import Hindsight

from hindsight.banks.models import MemoryUnit
from hindsight.banks.services import bank_config_update
from hindsight.banks.writeclock import hold_bank_write_lock, take_cutoff
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.directives.services import directive_create
from mentalmodels.knowledge.services import knowledge_folder_create, knowledge_page_create
from mentalmodels.models import HistoryKind, MentalModel, MentalModelHistory
from operations.models import Operation
from tests.factories import make_bank, make_memory, make_mental_model


@pytest.fixture
def client(live_server) -> Iterator[Hindsight]:  # type: ignore[no-untyped-def]
    hindsight = Hindsight(base_url=live_server.url, timeout=30.0, max_attempts=1)
    yield hindsight
    hindsight.close()


def build_bank(bank_id: str = "source") -> dict[str, Any]:
    make_bank(bank_id, name="Source bank")
    bank_config_update(bank_id=bank_id, updates={"reflect_mission": "Answer about the team.",
                                                 "mental_model_min_refresh_interval_seconds": 0})
    directive_create(bank_id=bank_id, name="Formal", content="Answer in formal English.",
                     priority=5)
    directive_create(bank_id=bank_id, name="Scoped", content="Name no customer.",
                     tags=["team"], is_active=False)
    python = make_memory(bank_id, "The team writes its services in Python.", tags=["team"],
                         document_id="doc-lang", embed=True, metadata={"source": "wiki"})
    postgres = make_memory(bank_id, "The team stores data in PostgreSQL.", tags=["team"],
                           document_id="doc-lang", embed=True)
    make_memory(bank_id, "Alice leads the platform group.", tags=["people"], embed=True,
                context="org chart", fact_type="experience")
    with transaction.atomic():
        hold_bank_write_lock(bank_id)
        MemoryUnit.objects.create(
            bank_id=bank_id, text="The team builds on Python and PostgreSQL.",
            fact_type="observation", tags=["team"],
            source_memory_ids=[python.id, postgres.id])
    MemoryUnit.objects.filter(bank_id=bank_id).exclude(fact_type="observation").update(
        consolidated_at=timezone.now())
    based_on = {"world": [{"id": str(python.id), "text": python.text, "type": "world"}]}
    model = make_mental_model(
        bank_id, "team-stack", name="Team stack", source_query="What stack does the team use?",
        content="## Stack\n\nPython on PostgreSQL.\n", tags=["team"],
        trigger={"refresh_after_consolidation": True, "tags_match": "any"}, fresh=True,
        reflect_response={"text": "Python on PostgreSQL.", "based_on": based_on},
        last_refresh_source_query="What stack does the team use?")
    MentalModelHistory.objects.create(model=model, kind=HistoryKind.VERSION, previous_content="")
    MentalModelHistory.objects.create(
        model=model, kind=HistoryKind.VERSION, previous_content="## Stack\n\nPython.\n",
        previous_reflect_response={"based_on": based_on})
    MentalModelHistory.objects.create(model=model, kind=HistoryKind.FAILURE,
                                      outcome="refresh_failed_error", reason="llm_error",
                                      exception="scripted outage")
    folder = knowledge_folder_create(bank_id=bank_id, name="Guides")
    # The page's creation queues its first refresh: cancelled in the same transaction, so no
    # worker can claim it (and call the LLM) while a test moves the bank.
    with transaction.atomic():
        page, first_refresh = knowledge_page_create(bank_id=bank_id, name="Onboarding",
                                                    source_query="How does a newcomer start?",
                                                    parent_id=folder.id)
        Operation.objects.filter(id=first_refresh.id).update(status="cancelled")
    cutoff = take_cutoff(bank_id)
    MentalModel.objects.filter(bank_id=bank_id).update(last_memory_seen_at=cutoff,
                                                       last_refreshed_at=cutoff)
    LLMRequest.objects.create(bank_id=bank_id, operation="refresh_mental_model", scope="gather",
                              status="success", started_at=timezone.now() - timedelta(minutes=1),
                              prompt="What stack?", response="Python.", input_tokens=10,
                              output_tokens=3)
    return {"bank_id": bank_id, "page_id": page.id, "folder_id": folder.id}
