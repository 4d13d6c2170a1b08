"""What an export writes: memories without a document ride in synthetic documents of 500 and come
back without one; an observation whose source fact is gone is left out and counted."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.db import transaction

from hindsight.banks.curation import memory_update
from hindsight.banks.models import Bank, InvalidatedMemoryUnit, MemoryUnit
from hindsight.banks.writeclock import hold_bank_write_lock
from mentalmodels.models import MentalModel
from mentalmodels.transfer.exporter import Scope, bank_export
from mentalmodels.transfer.importer import ImportRequest, bank_import
from tests.transfer.archives import entry
from tests.transfer.conftest import build_bank

pytestmark = pytest.mark.django_db


def test_undocumented_memories_travel_in_groups_and_come_back_without_a_document(tmp_path) -> None:
    build_bank("source")
    with transaction.atomic():
        hold_bank_write_lock("source")
        MemoryUnit.objects.bulk_create(MemoryUnit(bank_id="source", text=f"Loose fact {i}.")
                                       for i in range(600))
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        manifest = bank_export(bank_id="source", scope=Scope(), out=out)
    names = zipfile.ZipFile(io.BytesIO(path.read_bytes())).namelist()
    assert manifest["document_count"] == 3  # doc-lang, then 601 loose facts in 500 + 101
    assert sum(n.startswith("documents/") for n in names) == 3
    bank_import(path=str(path), request=ImportRequest(target_bank_id="copy"))
    assert MemoryUnit.objects.filter(bank_id="copy", document_id__isnull=True).count() == 602
    assert not MemoryUnit.objects.filter(bank_id="copy", document_id__startswith="hindsight-").exists()


def test_an_observation_whose_source_is_gone_is_left_out(tmp_path) -> None:
    build_bank("source")
    MemoryUnit.objects.filter(bank_id="source", text="The team stores data in PostgreSQL.").delete()
    with (tmp_path / "a.zip").open("wb") as out:
        manifest = bank_export(bank_id="source", scope=Scope(), out=out)
    assert manifest["observation_count"] == 0 and manifest["observations_skipped"] == 1


def test_a_restore_without_data_brings_the_config_and_directives_only(tmp_path) -> None:
    build_bank("source")
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        bank_export(bank_id="source", scope=Scope(), out=out)
    counts = bank_import(path=str(path), request=ImportRequest(
        target_bank_id="bare", scope=Scope(data=False)))
    assert counts["directives_imported"] == 2 and "memories_embedded" not in counts
    assert Bank.objects.get(id="bare").config["reflect_mission"] == "Answer about the team."
    assert not MemoryUnit.objects.filter(bank_id="bare").exists()
    assert not MentalModel.objects.filter(bank_id="bare").exists()


def test_invalidated_memories_travel_in_upstreams_entry_and_can_be_reverted_after(
        tmp_path, openai_embeddings) -> None:
    build_bank("source")
    fact = MemoryUnit.objects.filter(bank_id="source").exclude(fact_type="observation").first()
    assert fact is not None
    memory_update(bank_id="source", memory_id=str(fact.id), edits={}, state="invalidated",
                  reason="superseded")
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        manifest = bank_export(bank_id="source", scope=Scope(), out=out)
    assert manifest["invalidated_memory_count"] == 1
    [row] = entry(path.read_bytes(), "data/invalidated_memory_units.json")
    assert row["text"] == fact.text and row["invalidation_reason"] == "superseded"
    assert "id" not in row and "embedding" not in row

    counts = bank_import(path=str(path), request=ImportRequest(target_bank_id="copy"))
    assert counts["invalidated_memories_imported"] == 1
    archived = InvalidatedMemoryUnit.objects.get(bank_id="copy")
    assert (archived.text, archived.tags, archived.invalidation_reason) == (
        fact.text, fact.tags, "superseded")
    assert archived.id != fact.id
    assert not MemoryUnit.objects.filter(bank_id="copy", text=fact.text).exists()
    memory_update(bank_id="copy", memory_id=str(archived.id), edits={}, state="valid")
    assert MemoryUnit.objects.get(bank_id="copy", id=archived.id).embedding is not None
