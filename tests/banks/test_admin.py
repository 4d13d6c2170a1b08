"""The admin for banks and memories: browsable and searchable, memories read-only, and a bank
deleted only through ``bank_delete``."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from hindsight.banks.models import Bank, InvalidatedMemoryUnit, MemoryUnit
from mentalmodels.models import MentalModel
from operations.models import Lease, Operation
from operations.queue import operation_submit
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db


def test_admin_lists_banks_and_memories_and_refuses_memory_edits(admin_client: Client) -> None:
    bank = Bank.objects.create(id="adm", name="Admin bank")
    memory = MemoryUnit.objects.create(bank=bank, text="Alice likes tea", tags=["x"])
    assert b"Admin bank" in admin_client.get("/admin/banks/bank/").content
    listing = admin_client.get("/admin/banks/memoryunit/?q=tea")
    assert listing.status_code == 200 and b"Alice likes tea" in listing.content
    detail = admin_client.get(f"/admin/banks/memoryunit/{memory.id}/change/")
    assert detail.status_code == 200
    response = admin_client.post(f"/admin/banks/memoryunit/{memory.id}/change/", {"text": "edited"})
    assert response.status_code == 403
    memory.refresh_from_db()
    assert memory.text == "Alice likes tea"
    assert admin_client.post(f"/admin/banks/memoryunit/{memory.id}/delete/",
                             {"post": "yes"}).status_code == 403
    assert MemoryUnit.objects.filter(id=memory.id).exists()


def test_memory_search_matches_a_tag_exactly_and_a_fact_type(admin_client: Client) -> None:
    bank = Bank.objects.create(id="adm")
    MemoryUnit.objects.create(bank=bank, text="Alice likes tea", tags=["team-a"])
    MemoryUnit.objects.create(bank=bank, text="Bob went hiking", fact_type="experience")
    MemoryUnit.objects.create(bank=bank, text="Carol writes Go", tags=["team-b"])

    def texts(query: str) -> set[str]:
        response = admin_client.get(f"/admin/banks/memoryunit/?q={query}")
        assert response.status_code == 200
        return {m.text for m in response.context["cl"].result_list}

    assert texts("team-a") == {"Alice likes tea"}
    assert texts("experience") == {"Bob went hiking"}
    assert texts("Go") == {"Carol writes Go"}


def test_bank_edits_are_refused(admin_client: Client) -> None:
    bank = Bank.objects.create(id="adm", name="Before")
    response = admin_client.post("/admin/banks/bank/adm/change/", {"name": "After"})
    assert response.status_code == 403
    bank.refresh_from_db()
    assert bank.name == "Before"


def test_bank_delete_goes_through_bank_delete_fencing_its_jobs_first(
    admin_client: Client, monkeypatch
) -> None:
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    bank = Bank.objects.create(id="adm")
    MemoryUnit.objects.create(bank=bank, text="fact")
    MentalModel.objects.create(bank=bank, mental_model_id="m", name="M", source_query="q")
    op = operation_submit(bank_id="adm", operation_type="refresh_mental_model",
                          dedupe_key="mm:adm:m", mental_model_id="m").operation
    assert not Lease.objects.filter(key="mm:adm:m").exists()  # never claimed

    confirm = admin_client.get("/admin/banks/bank/adm/delete/")
    assert confirm.status_code == 200  # no per-row permission blocks it (operations are read-only)
    assert "Bank adm: 1 memories, 1 mental models, 1 operations" in confirm.content.decode()
    response = admin_client.post("/admin/banks/bank/adm/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Bank.objects.filter(id="adm").exists()
    assert not Operation.objects.filter(id=op.id).exists()
    assert not MentalModel.objects.filter(bank_id="adm").exists()
    # bank_delete's first step bumped the key's lease (a plain cascade leaves none behind).
    assert Lease.objects.get(key="mm:adm:m").fence == 1


def test_the_admin_invalidates_and_restores_memories_and_shows_the_pages_that_read_them(
        admin_client: Client, openai_embeddings: Any) -> None:
    bank = Bank.objects.create(id="adm")
    fact = make_memory(bank, "The deploy server is db-1.", tags=["ops"])
    observation = make_memory(bank, "Ops runs db-1.", tags=["ops"], fact_type="observation")
    make_mental_model(bank, "ops", name="Ops runbook", tags=["ops"])
    make_mental_model(bank, "hr", name="HR handbook", tags=["hr"])

    detail = admin_client.get(f"/admin/banks/memoryunit/{fact.id}/change/").content.decode()
    assert "Ops runbook (ops)" in detail and "HR handbook" not in detail

    response = admin_client.post("/admin/banks/memoryunit/", {
        "action": "invalidate_selected", "_selected_action": [str(fact.id), str(observation.id)],
    }, follow=True)
    page = response.content.decode()
    assert "1 memories invalidated." in page and "only world/experience facts" in page
    assert not MemoryUnit.objects.filter(id=fact.id).exists()
    archived = InvalidatedMemoryUnit.objects.get(id=fact.id)
    listing = admin_client.get("/admin/banks/invalidatedmemoryunit/").content.decode()
    assert "The deploy server is db-1." in listing
    assert "Ops runbook (ops)" in admin_client.get(
        f"/admin/banks/invalidatedmemoryunit/{archived.id}/change/").content.decode()

    response = admin_client.post("/admin/banks/invalidatedmemoryunit/", {
        "action": "restore_selected", "_selected_action": [str(archived.id)]}, follow=True)
    assert "1 memories restored." in response.content.decode()
    assert MemoryUnit.objects.filter(id=fact.id).exists()
    assert not InvalidatedMemoryUnit.objects.exists()
