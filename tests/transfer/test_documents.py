"""Documents travel with their text: an export carries each document's row (its chunks joined
into original_text, tags, metadata, retain parameters, times) in upstream's document entry, an
import writes the rows back in the same transaction as the memories, so GET …/documents/{id}
reads the same and reprocess retains the kept text again; upstream's archive brings its
documents' text; a document only memories name travels as before; a merge applies
document_conflict to the rows too."""

from __future__ import annotations

import dataclasses
import zipfile
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from hindsight.banks.documentrows import documents_record
from hindsight.banks.models import Bank, Document, MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.vocabulary import iso
from mentalmodels.transfer.archive import ArchiveInvalid
from mentalmodels.transfer.exporter import Scope, bank_export
from mentalmodels.transfer.importer import ImportRequest, bank_import
from operations.models import Operation
from tests.factories import make_bank, make_memory
from tests.transfer.archives import entry, rewritten, upstream_archive
from tests.transfer.conftest import build_bank

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _transfer_dir(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, transfer_dir=str(tmp_path / "t"))


def record(bank_id: str, *items: RetainItem) -> None:
    """The document rows a retain of ``items`` writes (the retain's own service)."""
    with transaction.atomic():
        stamp = hold_bank_write_lock(bank_id)
        documents_record(bank_id=bank_id, items=list(items), added={}, removed={}, stamp=stamp)


def document(api: APIClient, bank_id: str, document_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/default/banks/{bank_id}/documents/{document_id}")
    assert response.status_code == 200, response.content
    return response.json()


def chunk_texts(api: APIClient, bank_id: str, document_id: str) -> list[tuple[int, str]]:
    response = api.get(f"/v1/default/banks/{bank_id}/documents/{document_id}/chunks")
    assert response.status_code == 200, response.content
    return [(c["chunk_index"], c["chunk_text"]) for c in response.json()["items"]]


def export(bank_id: str, tmp_path) -> str:
    path = tmp_path / f"{bank_id}.zip"
    with path.open("wb") as out:
        bank_export(bank_id=bank_id, scope=Scope(), out=out)
    return str(path)


def documents_in(path: str) -> dict[str, dict[str, Any]]:
    data = open(path, "rb").read()
    names = [n for n in zipfile.ZipFile(path).namelist() if n.startswith("documents/")]
    return {doc["id"]: doc for doc in (entry(data, n) for n in names)}


def source_bank() -> None:
    """doc-lang: a row of two chunks (a retain and an append) over its two facts; doc-notes: a
    row whose text gave no fact; doc-old: facts only (retained before the table)."""
    build_bank("source")
    record("source", RetainItem(content="The team writes its services in Python.",
                                context="stack notes", tags=["team"], metadata={"source": "wiki"},
                                document_id="doc-lang", entities=["Python"]))
    record("source", RetainItem(content="The team stores data in PostgreSQL.", tags=["db"],
                                metadata={"page": "2"}, document_id="doc-lang",
                                update_mode="append"))
    record("source", RetainItem(content="Nothing worth a fact here.", tags=["misc"],
                                document_id="doc-notes"))
    make_memory("source", "The old wiki used MediaWiki.", document_id="doc-old", embed=True)


def test_a_round_trip_keeps_every_documents_text_chunks_tags_and_metadata(
        api: APIClient, tmp_path) -> None:
    source_bank()
    path = export("source", tmp_path)

    carried = documents_in(path)
    lang = carried["doc-lang"]
    assert lang["original_text"] == ("The team writes its services in Python.\n\n"
                                     "The team stores data in PostgreSQL.")
    assert lang["chunks"] == [
        {"chunk_index": 0, "chunk_text": "The team writes its services in Python."},
        {"chunk_index": 1, "chunk_text": "The team stores data in PostgreSQL."}]
    assert (lang["tags"], lang["metadata"]) == (["team", "db"], {"source": "wiki", "page": "2"})
    assert lang["retain_params"] == {"tags": ["db"], "metadata": {"page": "2"}}
    assert lang["content_hash"] == Document.objects.get(document_id="doc-lang").content_hash
    assert len(lang["facts"]) == 2
    assert carried["doc-notes"]["original_text"] == "Nothing worth a fact here."
    assert carried["doc-notes"]["facts"] == []

    counts = bank_import(path=path, request=ImportRequest(target_bank_id="copy"))
    assert counts["document_rows_imported"] == 2
    for doc in ("doc-lang", "doc-notes", "doc-old"):
        before, after = document(api, "source", doc), document(api, "copy", doc)
        assert {**after, "bank_id": "source"} == before, doc
        assert chunk_texts(api, "copy", doc) == chunk_texts(api, "source", doc)
    # A document's history starts over with the import (see docs/behaviour.md#bank-transfer).
    assert Document.objects.get(bank_id="copy", document_id="doc-lang").events == []

    reprocessed = api.post("/v1/default/banks/copy/documents/doc-lang/reprocess")
    assert reprocessed.status_code == 200, reprocessed.content
    assert reprocessed.json()["items_count"] == 2
    items = Operation.objects.get(id=reprocessed.json()["operation_id"]).payload["items"]
    assert [(i["content"], i["update_mode"], i["document_id"]) for i in items] == [
        ("The team writes its services in Python.", "replace", "doc-lang"),
        ("The team stores data in PostgreSQL.", "append", "doc-lang")]
    assert items[0]["tags"] == ["db"] and items[0]["metadata"] == {"page": "2"}


def test_a_document_only_memories_name_exports_as_before_and_gets_no_row(
        api: APIClient, tmp_path) -> None:
    source_bank()
    path = export("source", tmp_path)
    old = documents_in(path)["doc-old"]
    created = MemoryUnit.objects.get(bank_id="source", document_id="doc-old").created_at
    assert {k: v for k, v in old.items() if k != "facts"} == {
        "id": "doc-old", "original_text": None, "retain_params": None, "tags": [],
        "created_at": iso(created), "chunks": []}
    bank_import(path=path, request=ImportRequest(target_bank_id="copy"))
    assert not Document.objects.filter(bank_id="copy", document_id="doc-old").exists()
    assert document(api, "copy", "doc-old")["original_text"] is None
    refused = api.post("/v1/default/banks/copy/documents/doc-old/reprocess")
    assert refused.status_code == 404


def test_upstreams_archive_brings_its_documents_text(api: APIClient, tmp_path) -> None:
    path = tmp_path / "upstream.zip"
    path.write_bytes(upstream_archive())
    counts = bank_import(path=str(path), request=ImportRequest(target_bank_id="moved"))
    assert counts["document_rows_imported"] == 3
    lang = document(api, "moved", "doc-lang")
    assert (lang["original_text"], lang["tags"], lang["memory_unit_count"]) == (
        "The team writes its services in Python.", ["team"], 1)
    assert lang["created_at"] == "2026-12-05T08:27:24.286020+00:00"
    assert chunk_texts(api, "moved", "doc-db") == [
        (0, "The team stores data in PostgreSQL with pgvector.")]
    [alice] = [d for d in documents_in(str(path)).values() if d["id"] not in ("doc-lang", "doc-db")]
    loose = document(api, "moved", alice["id"])
    assert (loose["original_text"], loose["retain_params"]) == (
        "Alice leads the platform group.", {"context": "org chart"})
    reprocessed = api.post("/v1/default/banks/moved/documents/doc-db/reprocess")
    assert reprocessed.status_code == 200 and reprocessed.json()["items_count"] == 1


def test_chunks_that_do_not_join_into_the_text_give_way_to_it(tmp_path) -> None:
    # Upstream's chunker splits a text without a separator of ours: the text is one chunk here.
    doc = entry(upstream_archive(), "documents/000000.json")
    doc["original_text"] = "First part. Second part."
    doc["chunks"] = [{"chunk_index": 1, "chunk_text": "Second part."},
                     {"chunk_index": 0, "chunk_text": "First part. "}]
    path = tmp_path / "a.zip"
    path.write_bytes(rewritten(upstream_archive(), {"documents/000000.json": doc}))
    bank_import(path=str(path), request=ImportRequest(target_bank_id="moved"))
    assert Document.objects.get(bank_id="moved", document_id="doc-lang").chunks == [
        "First part. Second part."]


def test_a_bad_document_fails_the_import_and_leaves_no_bank(tmp_path) -> None:
    doc = entry(upstream_archive(), "documents/000001.json")
    doc["chunks"] = [{"chunk_index": "first", "chunk_text": "x"}]
    path = tmp_path / "a.zip"
    path.write_bytes(rewritten(upstream_archive(), {"documents/000001.json": doc}))
    with pytest.raises(ArchiveInvalid, match="document 'doc-db': chunks must be a list"):
        bank_import(path=str(path), request=ImportRequest(target_bank_id="half"))
    assert not Bank.objects.filter(id="half").exists()
    assert not Document.objects.filter(bank_id="half").exists()
    assert not MemoryUnit.objects.filter(bank_id="half").exists()


@pytest.fixture
def live(tmp_path) -> str:
    make_bank("live")
    make_memory("live", "Our own note about languages.", document_id="doc-lang")
    record("live", RetainItem(content="Our own note about languages.", tags=["ours"],
                              document_id="doc-lang"))
    path = tmp_path / "upstream.zip"
    path.write_bytes(upstream_archive())
    return str(path)


def merge(archive: str, rule: str) -> dict[str, Any]:
    return bank_import(path=archive, request=ImportRequest(
        mode="merge", target_bank_id="live", document_conflict=rule))


def test_merge_skip_keeps_the_document_row_already_there(live: str) -> None:
    counts = merge(live, "skip")
    assert counts["documents_skipped"] == 1 and counts["document_rows_imported"] == 2
    assert Document.objects.get(bank_id="live", document_id="doc-lang").chunks == [
        "Our own note about languages."]
    assert Document.objects.get(bank_id="live", document_id="doc-db").chunks == [
        "The team stores data in PostgreSQL with pgvector."]


def test_merge_replace_swaps_the_document_row(live: str) -> None:
    merge(live, "replace")
    row = Document.objects.get(bank_id="live", document_id="doc-lang")
    assert (row.chunks, row.tags) == (["The team writes its services in Python."], ["team"])


def test_merge_new_id_keeps_both_rows(live: str) -> None:
    merge(live, "new-id")
    ours = Document.objects.get(bank_id="live", document_id="doc-lang")
    assert ours.chunks == ["Our own note about languages."]
    moved = MemoryUnit.objects.get(bank_id="live", text="The team writes its services in Python.")
    assert Document.objects.get(bank_id="live", document_id=moved.document_id).chunks == [
        "The team writes its services in Python."]


def test_a_row_without_facts_conflicts_in_a_merge_too(tmp_path) -> None:
    make_bank("live")
    record("live", RetainItem(content="Kept text, no fact.", document_id="doc-lang"))
    path = tmp_path / "upstream.zip"
    path.write_bytes(upstream_archive())
    counts = merge(str(path), "skip")
    assert counts["documents_skipped"] == 1
    assert not MemoryUnit.objects.filter(bank_id="live", document_id="doc-lang").exists()
