"""The admin lists banks and memories (read-only memories) for a staff user."""

from __future__ import annotations

import pytest
from django.test import Client

from hindsight.banks.models import Bank, MemoryUnit

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
