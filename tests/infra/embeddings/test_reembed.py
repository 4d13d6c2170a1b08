"""``manage.py reembed``: rebuilds every memory vector for the configured profile and records it."""

from __future__ import annotations

import dataclasses
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from fakes.llm_server import pseudo_embedding
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.infra.embeddings import Profile
from hindsight.infra.embeddings.models import EmbeddingProfile
from hindsight.infra.embeddings.profile import (
    ProfileMismatch,
    column_dimensions,
    profile_ensure,
    profile_recorded,
)
from mentalmodels.models import MentalModel

pytestmark = pytest.mark.django_db

TEXTS = ["alice likes green tea", "bob prefers written updates", "the release is on friday"]


def seed_local_memories() -> list[MemoryUnit]:
    bank = Bank.objects.create(id="reembed-bank")
    return [
        MemoryUnit.objects.create(bank=bank, text=text, embedding=[0.5] + [0.0] * 383)
        for text in TEXTS
    ]


def record_local_profile() -> None:
    EmbeddingProfile.objects.update_or_create(
        id=1, defaults={"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384}
    )


def hnsw_index_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'memory_embedding_hnsw'")
        return cursor.fetchone() is not None


def run_reembed(**options) -> str:
    out = StringIO()
    call_command("reembed", stdout=out, **options)
    return out.getvalue()


def test_reembed_replaces_vectors_records_profile_and_keeps_updated_at(openai_embeddings) -> None:
    memories = seed_local_memories()
    stamps = {m.id: MemoryUnit.objects.get(id=m.id).updated_at for m in memories}
    bank = memories[0].bank
    model = MentalModel.objects.create(
        bank=bank, mental_model_id="mm", name="mm", source_query="q",
        embedding=[0.1] * 384, embedding_model="all-MiniLM-L6-v2", embedding_dimensions=384,
        embedding_content_hash="abc",
    )
    record_local_profile()
    with pytest.raises(ProfileMismatch):  # recorded local, configured openai
        profile_ensure()

    output = run_reembed(batch_size=2)

    assert "Re-embedded 3 memories with openai/scripted-embed (384 dims)" in output
    for memory in MemoryUnit.objects.filter(bank=bank):
        expected = pseudo_embedding(memory.text, 384)
        assert list(memory.embedding) == pytest.approx(expected, abs=1e-6)
        assert memory.updated_at == stamps[memory.id]
    assert profile_recorded() == Profile("openai", "scripted-embed", 384)
    assert profile_ensure() == Profile("openai", "scripted-embed", 384)
    model.refresh_from_db()
    assert model.embedding is None and model.embedding_content_hash == ""
    # probe + 2 batches of 2 and 1
    assert [len(r["input"]) for r in openai_embeddings.embedding_requests] == [1, 2, 1]


def test_reembed_converts_the_column_when_the_dimension_changes(
    openai_embeddings, settings
) -> None:
    seed_local_memories()
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, embeddings_dimensions=64)
    with pytest.raises(ProfileMismatch, match=r"\(64 dims\)"):
        profile_ensure()
    # The test runs inside a transaction (rolled back, so the column type comes back); the FK
    # checks of the rows inserted above are deferred, and Postgres will not ALTER a table with
    # pending ones. The command itself runs in autocommit, where nothing is pending.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    output = run_reembed()

    assert "column converted from vector(384)" in output
    assert column_dimensions("banks_memoryunit", "embedding") == 64
    assert column_dimensions("mentalmodels_mentalmodel", "embedding") == 64
    assert hnsw_index_exists()
    lengths = {len(m.embedding) for m in MemoryUnit.objects.all()}
    assert lengths == {64}
    assert profile_ensure() == Profile("openai", "scripted-embed", 64)


def test_reembed_that_cannot_embed_changes_nothing(openai_embeddings) -> None:
    memories = seed_local_memories()
    record_local_profile()
    openai_embeddings.fail_embeddings(1, status=500)
    with pytest.raises(CommandError, match="does not work"):
        run_reembed()
    assert profile_recorded() == Profile("local", "all-MiniLM-L6-v2", 384)
    assert list(MemoryUnit.objects.get(id=memories[0].id).embedding)[0] == pytest.approx(0.5)

