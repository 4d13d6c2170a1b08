"""mode=merge: an archive's documents written into a bank that exists, stamped as new writes;
a document already there is skipped, replaced or given a new id (document_conflict); nothing
but the memories comes along."""

from __future__ import annotations

import dataclasses

import pytest

from hindsight.banks.models import MemoryUnit
from mentalmodels.models import MentalModel
from mentalmodels.transfer.importer import ImportRequest, bank_import
from tests.factories import make_bank, make_memory
from tests.transfer.archives import upstream_archive

pytestmark = pytest.mark.django_db


@pytest.fixture
def archive(tmp_path) -> str:
    path = tmp_path / "a.zip"
    path.write_bytes(upstream_archive())
    return str(path)


@pytest.fixture(autouse=True)
def _bank(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, transfer_dir=str(tmp_path / "t"))
    make_bank("live")
    make_memory("live", "Our own note about languages.", document_id="doc-lang")


def merge(archive: str, rule: str) -> dict:
    return bank_import(path=archive, request=ImportRequest(
        mode="merge", target_bank_id="live", document_conflict=rule))


def texts(document_id: str) -> list[str]:
    return sorted(MemoryUnit.objects.filter(bank_id="live", document_id=document_id)
                  .values_list("text", flat=True))


def test_skip_keeps_the_document_already_there(archive: str) -> None:
    before = MemoryUnit.objects.get(bank_id="live").updated_at
    counts = merge(archive, "skip")
    assert texts("doc-lang") == ["Our own note about languages."]
    assert texts("doc-db") == ["The team stores data in PostgreSQL with pgvector."]
    assert counts["documents_skipped"] == 1 and counts["documents_imported"] == 2
    # The observation citing the skipped document's fact cannot come; the other one does.
    assert counts["observations_imported"] == 1 and counts["observations_skipped"] == 1
    # New writes of a live bank: stamped after everything it held.
    assert all(m.updated_at > before for m in MemoryUnit.objects.filter(bank_id="live")
               if m.text != "Our own note about languages.")
    assert not MentalModel.objects.filter(bank_id="live").exists()


def test_replace_swaps_the_document(archive: str) -> None:
    merge(archive, "replace")
    assert texts("doc-lang") == ["The team writes its services in Python."]


def test_new_id_keeps_both(archive: str) -> None:
    merge(archive, "new-id")
    assert texts("doc-lang") == ["Our own note about languages."]
    moved = MemoryUnit.objects.get(bank_id="live", text="The team writes its services in Python.")
    assert moved.document_id not in (None, "doc-lang")
    assert MemoryUnit.objects.filter(bank_id="live", fact_type="observation").count() == 2
