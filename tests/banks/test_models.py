from __future__ import annotations

import pytest
from django.db import connection

from hindsight.banks.models import Bank, MemoryUnit


@pytest.mark.django_db
def test_memory_stamps_come_from_the_database_clock() -> None:
    bank = Bank.objects.create(id="b1")
    memory = MemoryUnit.objects.create(bank=bank, text="Alice likes tea", embedding=[0.1] * 384)
    memory.refresh_from_db()
    assert memory.updated_at is not None and memory.created_at is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone()[0].startswith("0.8")
