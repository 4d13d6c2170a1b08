"""The official hindsight-client 1.1.0's memory curation calls against our server: get_memory,
update_memory (edit, invalidate, revert), get_observation_history, list_memories(state=…),
clear_memory_observations and clear_observations, in upstream's shapes."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models import (
    ClearMemoryObservationsResponse,
    DeleteResponse,
    ListMemoryUnitsResponse,
    UpdateMemoryRequest,
)

from hindsight.banks.models import Bank, InvalidatedMemoryUnit, MemoryUnit
from tests.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

BANK = "compat-curation"


@pytest.fixture
def fact_id(client: Hindsight) -> str:
    client.create_bank(BANK, name="Curation")
    result = client.retain(BANK, "The deploy server is db-1.", tags=["ops"],
                           metadata={"source": "chat"})
    assert result.success
    return str(MemoryUnit.objects.get(bank_id=BANK, text__contains="db-1").id)


def _update(client: Hindsight, memory_id: str, **fields: object) -> dict:
    return _run_async(client.memory.update_memory(BANK, memory_id,
                                                  UpdateMemoryRequest(**fields)))


def test_get_memory_in_upstreams_detail_shape(client: Hindsight, fact_id: str) -> None:
    memory = _run_async(client.memory.get_memory(BANK, fact_id))
    assert memory["id"] == fact_id and memory["state"] == "valid"
    assert memory["tags"] == ["ops"] and memory["metadata"] == {"source": "chat"}
    assert memory["type"] in ("world", "experience") and memory["invalidated_at"] is None
    assert {"text", "context", "date", "mentioned_at", "occurred_start", "occurred_end",
            "entities", "document_id", "chunk_id", "invalidation_reason", "edited_at",
            "consolidated_at", "consolidation_failed_at"} <= memory.keys()
    with pytest.raises(ApiException) as missing:
        _run_async(client.memory.get_memory(BANK, "00000000-0000-0000-0000-000000000000"))
    assert missing.value.status == 404
    with pytest.raises(ApiException) as malformed:
        _run_async(client.memory.get_memory(BANK, "not-a-uuid"))
    assert malformed.value.status == 400


def test_update_memory_edits_the_text_and_embeds_it_again(client: Hindsight,
                                                          fact_id: str) -> None:
    before = MemoryUnit.objects.get(id=fact_id)
    edited = _update(client, fact_id, text="The deploy server is db-2.", context="moved")
    assert edited["text"] == "The deploy server is db-2." and edited["context"] == "moved"
    assert edited["id"] == fact_id and edited["edited_at"] is not None
    after = MemoryUnit.objects.get(id=fact_id)
    assert after.updated_at > before.updated_at
    assert list(after.embedding) != list(before.embedding)
    # The recall's keyword arm finds the new text, not the old one.
    texts = [r.text for r in client.recall(BANK, "db-2").results]
    assert "The deploy server is db-2." in texts


def test_invalidate_archives_the_memory_and_revert_brings_it_back_with_its_id(
        client: Hindsight, fact_id: str) -> None:
    invalidated = _update(client, fact_id, state="invalidated", reason="server decommissioned")
    assert invalidated["state"] == "invalidated"
    assert invalidated["invalidation_reason"] == "server decommissioned"
    assert invalidated["invalidated_at"] is not None
    assert not MemoryUnit.objects.filter(id=fact_id).exists()
    assert InvalidatedMemoryUnit.objects.filter(id=fact_id).exists()
    assert client.recall(BANK, "deploy server db-1").results == []

    live = _run_async(client.memory.list_memories(BANK))
    archived = _run_async(client.memory.list_memories(BANK, state="invalidated"))
    assert isinstance(archived, ListMemoryUnitsResponse)
    assert live.total == 0 and [m.id for m in archived.items] == [fact_id]
    assert archived.items[0].state == "invalidated"
    assert archived.items[0].invalidation_reason == "server decommissioned"

    with pytest.raises(ApiException) as refused:
        _update(client, fact_id, text="edited while archived")
    assert refused.value.status == 400 and "revert it" in refused.value.body

    reverted = _update(client, fact_id, state="valid")
    assert reverted["state"] == "valid" and reverted["id"] == fact_id
    assert MemoryUnit.objects.get(id=fact_id).embedding is not None
    assert [r.id for r in client.recall(BANK, "deploy server db-1").results] == [fact_id]


def test_the_memory_history_lists_each_change_oldest_first(client: Hindsight,
                                                           fact_id: str) -> None:
    _update(client, fact_id, text="The deploy server is db-2.", tags=["ops", "infra"])
    _update(client, fact_id, state="invalidated", reason="gone")
    _update(client, fact_id, state="valid")
    history = _run_async(client.memory.get_observation_history(BANK, fact_id))
    assert [h["kind"] for h in history] == ["fact_edited", "fact_invalidated", "fact_restored"]
    assert history[0]["previous_text"] == "The deploy server is db-1."
    assert history[0]["previous_tags"] == ["ops"]
    assert history[1]["previous_text"] == "The deploy server is db-2."
    assert history[1]["reason"] == "gone"
    assert history[0]["changed_at"] < history[1]["changed_at"] < history[2]["changed_at"]


def test_observations_cannot_be_curated(client: Hindsight, fact_id: str) -> None:
    observation = make_memory(BANK, text="Ops runs one server.", fact_type="observation",
                              source_memory_ids=[fact_id])
    with pytest.raises(ApiException) as refused:
        _update(client, str(observation.id), text="edited")
    assert refused.value.status == 400 and "observation" in refused.value.body


def test_clear_memory_observations_and_the_banks_observations(client: Hindsight,
                                                              fact_id: str) -> None:
    other = make_memory(BANK, text="Ops has a staging server.")
    make_memory(BANK, text="Ops runs db-1.", fact_type="observation",
                source_memory_ids=[fact_id, str(other.id)])
    make_memory(BANK, text="Ops keeps staging.", fact_type="observation",
                source_memory_ids=[str(other.id)])
    MemoryUnit.objects.filter(bank_id=BANK).exclude(fact_type="observation").update(
        consolidated_at="2026-01-01T00:00:00Z")

    cleared = _run_async(client.memory.clear_memory_observations(BANK, fact_id))
    assert isinstance(cleared, ClearMemoryObservationsResponse) and cleared.deleted_count == 1
    # The memory and the other source of the deleted observation wait for consolidation again.
    assert MemoryUnit.objects.get(id=fact_id).consolidated_at is None
    assert MemoryUnit.objects.get(id=other.id).consolidated_at is None
    assert MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation").count() == 1

    all_cleared = _run_async(client.banks.clear_observations(BANK))
    assert isinstance(all_cleared, DeleteResponse) and all_cleared.deleted_count == 1
    assert not MemoryUnit.objects.filter(bank_id=BANK, fact_type="observation").exists()
    with pytest.raises(ApiException) as missing:
        _run_async(client.memory.clear_memory_observations(
            BANK, "00000000-0000-0000-0000-000000000000"))
    assert missing.value.status == 404


def test_clear_bank_memories_empties_the_bank_and_keeps_it(client: Hindsight,
                                                          fact_id: str) -> None:
    make_memory(BANK, "Ops runs db-1.", fact_type="observation", source_memory_ids=[fact_id])
    only = _run_async(client.memory.clear_bank_memories(BANK, type="observation"))
    assert isinstance(only, DeleteResponse) and only.deleted_count == 1
    assert MemoryUnit.objects.filter(bank_id=BANK).count() == 1
    _update(client, fact_id, state="invalidated")
    make_memory(BANK, "Another fact.")
    cleared = _run_async(client.memory.clear_bank_memories(BANK))
    assert cleared.deleted_count == 1
    assert not MemoryUnit.objects.filter(bank_id=BANK).exists()
    assert not InvalidatedMemoryUnit.objects.filter(bank_id=BANK).exists()
    assert Bank.objects.filter(id=BANK).exists()
    with pytest.raises(ApiException) as bad:
        _run_async(client.memory.clear_bank_memories(BANK, type="opinions"))
    assert bad.value.status == 422
