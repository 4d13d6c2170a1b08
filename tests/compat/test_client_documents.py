"""The official hindsight-client 1.1.0's DocumentsApi against our server: a retain with a
document_id groups its memories; list, get, chunks (and one chunk by its id), update (tags),
history, reprocess and delete, in upstream's shapes."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models import (
    ChunkResponse,
    DeleteDocumentResponse,
    DocumentHistoryResponse,
    DocumentResponse,
    ListChunksResponse,
    ListDocumentsResponse,
    ReprocessDocumentResponse,
    UpdateDocumentRequest,
    UpdateDocumentResponse,
)

from hindsight.banks.models import MemoryChange, MemoryUnit
from operations.models import Operation
from tests.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

BANK = "compat-documents"


@pytest.fixture
def retained(client: Hindsight) -> str:
    client.create_bank(BANK, name="Documents")
    client.retain(BANK, "The deploy server is db-1.", document_id="notes/ops", tags=["ops"],
                  metadata={"source": "wiki"})
    client.retain_batch(BANK, [{"content": "Backups run nightly.", "document_id": "notes/ops",
                                "tags": ["ops"], "update_mode": "append"}])
    client.retain(BANK, "Holidays are in August.", document_id="hr", tags=["hr"])
    return "notes/ops"


def test_list_and_get_documents_in_upstreams_shapes(client: Hindsight, retained: str) -> None:
    listed = _run_async(client.documents.list_documents(BANK))
    assert isinstance(listed, ListDocumentsResponse) and listed.total == 2
    assert {d.id for d in listed.items} == {"notes/ops", "hr"}
    ops = next(d for d in listed.items if d.id == "notes/ops")
    assert ops.memory_unit_count == 2 and ops.tags == ["ops"] and ops.bank_id == BANK
    assert ops.text_length == len("The deploy server is db-1.\n\nBackups run nightly.")
    assert [d.id for d in _run_async(client.documents.list_documents(BANK, q="august")).items] \
        == ["hr"]
    assert [d.id for d in _run_async(
        client.documents.list_documents(BANK, tags=["hr"])).items] == ["hr"]

    document = _run_async(client.documents.get_document(BANK, retained))
    assert isinstance(document, DocumentResponse)
    assert document.original_text == "The deploy server is db-1.\n\nBackups run nightly."
    assert document.memory_unit_count == 2 and document.content_hash
    assert document.document_metadata == {"source": "wiki"}
    with pytest.raises(ApiException) as missing:
        _run_async(client.documents.get_document(BANK, "nope"))
    assert missing.value.status == 404


def test_chunks_list_and_one_chunk_by_its_id(client: Hindsight, retained: str) -> None:
    chunks = _run_async(client.documents.list_document_chunks(BANK, retained))
    assert isinstance(chunks, ListChunksResponse) and chunks.total == 2
    assert [c.chunk_text for c in chunks.items] == ["The deploy server is db-1.",
                                                    "Backups run nightly."]
    assert [c.chunk_index for c in chunks.items] == [0, 1]
    one = _run_async(client.documents.get_chunk(chunks.items[1].chunk_id))
    assert isinstance(one, ChunkResponse) and one.chunk_text == "Backups run nightly."
    assert one.document_id == retained and one.bank_id == BANK
    with pytest.raises(ApiException) as missing:
        _run_async(client.documents.get_chunk("nothing_here_9"))
    assert missing.value.status == 404


def test_update_retags_the_memories_and_the_history_shows_it(client: Hindsight,
                                                            retained: str) -> None:
    updated = _run_async(client.documents.update_document(
        BANK, retained, UpdateDocumentRequest(tags=["ops", "infra"])))
    assert isinstance(updated, UpdateDocumentResponse) and updated.success
    assert {tuple(m.tags) for m in MemoryUnit.objects.filter(bank_id=BANK,
                                                             document_id=retained)} == {
        ("ops", "infra")}
    # Each re-tagged memory is a change the pages of its old tags see.
    assert MemoryChange.objects.filter(bank_id=BANK, document_id=retained).count() == 2
    history = _run_async(client.documents.get_document_history(BANK, retained))
    assert isinstance(history, DocumentHistoryResponse)
    kinds = [e.kind for e in history.items]
    assert kinds[0] == "retag" and kinds.count("fact_edited") == 2
    assert kinds[-2:] == ["append", "retain"]
    assert history.items[-1].facts_added == 1
    with pytest.raises(ApiException) as empty:
        _run_async(client.documents.update_document(BANK, retained, UpdateDocumentRequest()))
    assert empty.value.status == 422


def test_a_re_sent_document_starts_over(client: Hindsight, retained: str) -> None:
    client.retain(BANK, "The deploy server is db-3.", document_id=retained, tags=["infra"])
    document = _run_async(client.documents.get_document(BANK, retained))
    assert (document.original_text, document.tags, document.memory_unit_count) == (
        "The deploy server is db-3.", ["infra"], 1)
    assert document.document_metadata is None


def test_reprocess_queues_a_retain_of_the_kept_text(client: Hindsight, retained: str) -> None:
    reprocessed = _run_async(client.documents.reprocess_document(BANK, retained))
    assert isinstance(reprocessed, ReprocessDocumentResponse) and reprocessed.items_count == 2
    operation = Operation.objects.get(id=reprocessed.operation_id)
    items = operation.payload["items"]
    assert [(i["content"], i["update_mode"]) for i in items] == [
        ("The deploy server is db-1.", "replace"), ("Backups run nightly.", "append")]
    assert all(i["document_id"] == retained and i["tags"] == ["ops"] for i in items)
    latest = _run_async(client.documents.get_document_history(BANK, retained)).items[0]
    assert (latest.kind, latest.operation_id) == ("reprocess", reprocessed.operation_id)


def test_delete_takes_the_memories_with_it(client: Hindsight, retained: str) -> None:
    deleted = _run_async(client.documents.delete_document(BANK, retained))
    assert isinstance(deleted, DeleteDocumentResponse)
    assert deleted.memory_units_deleted == 2 and deleted.document_id == retained
    assert not MemoryUnit.objects.filter(bank_id=BANK, document_id=retained).exists()
    assert MemoryChange.objects.filter(bank_id=BANK, document_id=retained,
                                       kind="fact_deleted").count() == 2
    assert [d.id for d in _run_async(client.documents.list_documents(BANK)).items] == ["hr"]
    with pytest.raises(ApiException) as missing:
        _run_async(client.documents.delete_document(BANK, retained))
    assert missing.value.status == 404


def test_a_document_only_memories_name_is_listed_and_read_without_a_text(
        client: Hindsight, retained: str) -> None:
    # A bank transfer writes memories with their document id and no document row.
    make_memory(BANK, "Imported fact.", document_id="imported")
    listed = _run_async(client.documents.list_documents(BANK))
    assert listed.total == 3 and listed.items[0].id == "imported"
    imported = listed.items[0]
    assert (imported.memory_unit_count, imported.tags, imported.text_length) == (1, [], 0)
    assert [d.id for d in _run_async(client.documents.list_documents(
        BANK, q="impo")).items] == ["imported"]
    assert "imported" not in [d.id for d in _run_async(
        client.documents.list_documents(BANK, tags=["ops"])).items]
    page = _run_async(client.documents.list_documents(BANK, limit=1, offset=1))
    assert page.total == 3 and len(page.items) == 1
    assert _run_async(client.documents.list_documents(BANK, offset=9)).total == 3
    document = _run_async(client.documents.get_document(BANK, "imported"))
    assert document.original_text is None and document.memory_unit_count == 1
    with pytest.raises(ApiException) as refused:
        _run_async(client.documents.reprocess_document(BANK, "imported"))
    assert refused.value.status == 404
