"""The official hindsight-client 1.1.0's remaining bank, config, stats, tags and memory-list
calls against our server (live_server): each works, and its response model parses our body."""

from __future__ import annotations

from datetime import UTC

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.models import (
    BankListResponse,
    BankProfileResponse,
    BankStatsResponse,
    CreateBankRequest,
    DispositionTraits,
    ListMemoryUnitsResponse,
    ListTagsResponse,
    UpdateDispositionRequest,
)

from hindsight.banks.models import Bank, MemoryUnit

pytestmark = pytest.mark.django_db(transaction=True)

BANK = "compat-calls"


@pytest.fixture
def seeded(client: Hindsight) -> str:
    client.create_bank(BANK, name="Calls", mission="Keep notes")
    client.retain_batch(BANK, [
        {"content": "Alice likes tea.", "tags": ["user:alice", "drinks"]},
        {"content": "Bob likes coffee.", "tags": ["user:bob", "drinks"]},
    ])
    return BANK


def test_get_bank_profile_and_update_bank_disposition(client: Hindsight, seeded: str) -> None:
    profile = _run_async(client.banks.get_bank_profile(seeded))
    assert isinstance(profile, BankProfileResponse)
    assert profile.bank_id == seeded and profile.name == "Calls" and profile.mission == "Keep notes"

    updated = _run_async(client.banks.update_bank_disposition(
        seeded, UpdateDispositionRequest(
            disposition=DispositionTraits(skepticism=5, literalism=1, empathy=4))
    ))
    assert (updated.disposition.skepticism, updated.disposition.literalism,
            updated.disposition.empathy) == (5, 1, 4)
    assert Bank.objects.get(id=seeded).disposition == {
        "skepticism": 5, "literalism": 1, "empathy": 4}
    again = _run_async(client.banks.get_bank_profile(seeded))
    assert again.disposition.skepticism == 5 and again.name == "Calls"


def test_update_bank_list_banks_stats_and_delete_bank(client: Hindsight, seeded: str) -> None:
    patched = _run_async(client.banks.update_bank(seeded, CreateBankRequest(name="Renamed")))
    assert patched.name == "Renamed" and patched.mission == "Keep notes"

    listed = _run_async(client.banks.list_banks(q="compat-calls"))
    assert isinstance(listed, BankListResponse)
    (bank,) = listed.banks
    assert bank.bank_id == seeded and bank.name == "Renamed"

    stats = _run_async(client.banks.get_agent_stats(seeded, refresh=True))
    assert isinstance(stats, BankStatsResponse)
    assert stats.total_nodes == 2 and stats.nodes_by_fact_type == {"world": 2}
    newest = max(MemoryUnit.objects.filter(bank_id=seeded).values_list("updated_at", flat=True))
    assert stats.last_memory_write_at == newest.isoformat()

    client.delete_bank(seeded)
    assert not Bank.objects.filter(id=seeded).exists()
    assert not MemoryUnit.objects.filter(bank_id=seeded).exists()


def test_list_tags_and_list_memories_filters(client: Hindsight, seeded: str) -> None:
    tags = _run_async(client.memory.list_tags(seeded, q="user:*"))
    assert isinstance(tags, ListTagsResponse)
    assert {(t.tag, t.count) for t in tags.items} == {("user:alice", 1), ("user:bob", 1)}
    assert tags.total == 2

    listed = client.list_memories(seeded, tags=["user:alice"], tags_match="any_strict",
                                  state="valid", consolidation_state="pending")
    assert isinstance(listed, ListMemoryUnitsResponse)
    assert [m.text for m in listed.items] == ["Alice likes tea."]
    assert client.list_memories(seeded, state="invalidated").total == 0


def test_bank_config_calls_accept_every_key_the_client_sends(client: Hindsight, seeded: str) -> None:
    config = client.get_bank_config(seeded)
    # The mission create_bank sent lives in the config (reflect_mission), as upstream keeps it.
    assert config["bank_id"] == seeded and config["overrides"] == {"reflect_mission": "Keep notes"}

    updated = client.update_bank_config(
        seeded, retain_mission="Only durable facts", mental_model_min_refresh_interval_seconds=60,
        recall_max_tokens=2048, recall_budget_function="fixed", recall_budget_adaptive_mid=0.5,
        enable_auto_consolidation=False, mcp_enabled_tools=["recall"],
        entity_labels=[{"key": "role", "type": "value", "values": ["admin"]}],
        reflect_default_options={"budget": "low"},
    )
    assert updated["overrides"]["retain_mission"] == "Only durable facts"
    assert updated["overrides"]["recall_max_tokens"] == 2048
    assert updated["config"]["mental_model_min_refresh_interval_seconds"] == 60
    assert Bank.objects.get(id=seeded).config["recall_budget_adaptive_mid"] == 0.5

    reset = client.reset_bank_config(seeded)
    assert reset["overrides"] == {}


def test_recall_with_every_option_the_client_offers(client: Hindsight, seeded: str) -> None:
    from datetime import datetime

    response = client.recall(
        seeded, "Who likes tea?", types=["world", "observation"], max_tokens=512, budget="high",
        trace=True, query_timestamp="2026-01-05T09:00:00", include_entities=True,
        include_chunks=True, include_source_facts=True, tags=["drinks"],
        tags_match="all_strict", prefer_observations=True,
        min_scores={"semantic": -1.0, "final": 0.0},
        temporal_window={"start": datetime(2020, 1, 1, tzinfo=UTC),
                         "end": "2030-01-01T00:00:00Z"},
    )
    assert {r.text for r in response.results} == {"Alice likes tea.", "Bob likes coffee."}
    assert response.trace["num_results"] == 2


def test_async_retain_with_an_operation_id_is_idempotent(client: Hindsight, seeded: str) -> None:
    import uuid

    operation_id = str(uuid.uuid4())
    first = client.retain(seeded, "Carol likes juice.", retain_async=True,
                          operation_id=operation_id)
    again = client.retain(seeded, "Carol likes juice.", retain_async=True,
                          operation_id=operation_id)
    assert first.var_async is True and first.operation_id == again.operation_id == operation_id
    from operations.models import Operation

    assert Operation.objects.filter(id=operation_id, bank_id=seeded).count() == 1
