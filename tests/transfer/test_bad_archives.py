"""Every bad import is refused naming the problem, and nothing is written: a file that is no ZIP,
a cut-short one, a foreign ZIP, a ZIP bomb, entries that climb out, a newer schema, a restore
onto an existing bank (that bank untouched), a failure half-way through the write (no half
bank); a download key of another tenant, or expired, is not found."""

from __future__ import annotations

import dataclasses
import io
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank, MemoryUnit
from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.models import MentalModel
from mentalmodels.transfer import storage
from mentalmodels.transfer.archive import ArchiveInvalid
from mentalmodels.transfer.importer import ImportRequest, bank_import
from operations.models import Operation
from tests.factories import make_bank, make_memory, make_mental_model
from tests.transfer.archives import entry, rewritten, upstream_archive, zip_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def post_archive(api: APIClient, archive: bytes, *, bank: str = "host", **query: str) -> Any:
    upload = io.BytesIO(archive)
    upload.name = "bank.zip"
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return api.post(f"/v1/default/banks/{bank}/transfer/import?{params}", {"file": upload},
                    format="multipart")


def refused(response: Any, *needles: str) -> None:
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    for needle in needles:
        assert needle in detail, detail
    # Nothing written: no new bank, no operation, no upload kept.
    assert list(Bank.objects.values_list("id", flat=True)) == ["host"]
    assert not Operation.objects.exists()


@pytest.fixture(autouse=True)
def _host(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, transfer_dir=str(tmp_path / "t"))
    make_bank("host")


def test_a_file_that_is_no_zip_is_refused(api: APIClient) -> None:
    refused(post_archive(api, b"not a zip at all" * 100), "not a readable ZIP archive")


def test_a_cut_short_archive_is_refused(api: APIClient) -> None:
    archive = upstream_archive()
    refused(post_archive(api, archive[: len(archive) // 2]), "not a readable ZIP archive")


def test_a_zip_that_is_no_bank_archive_is_refused(api: APIClient) -> None:
    refused(post_archive(api, zip_of({"notes.txt": b"hello"})), "manifest.json is missing")


def test_a_zip_bomb_is_refused_before_it_is_inflated(api: APIClient, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             transfer_max_unpacked_bytes=1024 * 1024)
    bomb = rewritten(upstream_archive(), {"padding.bin": b"\0" * (8 * 1024 * 1024)})
    assert len(bomb) < 64 * 1024
    refused(post_archive(api, bomb), "unpacks to more than 1048576 bytes",
            "HINDSIGHT_API_TRANSFER_MAX_UNPACKED_BYTES")


@pytest.mark.parametrize("name, problem", [
    ("../evil.json", "climbs out of the archive with '..'"),
    ("documents/../../evil.json", "climbs out of the archive with '..'"),
    ("/etc/evil.json", "has an absolute path"),
    ("C:/evil.json", "has an absolute path"),
])
def test_an_entry_that_climbs_out_is_refused(api: APIClient, name: str, problem: str) -> None:
    refused(post_archive(api, rewritten(upstream_archive(), {name: b"[]"})), problem)


def test_a_newer_schema_version_is_refused(api: APIClient) -> None:
    manifest = {**entry(upstream_archive(), "manifest.json"), "schema_version": 2}
    refused(post_archive(api, rewritten(upstream_archive(), {"manifest.json": manifest})),
            "schema version 2 is newer than this server reads (1)")


def test_a_documents_archive_is_no_bank_to_restore(api: APIClient) -> None:
    manifest = {**entry(upstream_archive(), "manifest.json"), "archive_type": "documents"}
    refused(post_archive(api, rewritten(upstream_archive(), {"manifest.json": manifest})),
            "archive_type is 'documents', not 'bank'")


def test_a_restore_onto_an_existing_bank_is_refused_and_leaves_it_untouched(
        api: APIClient) -> None:
    make_memory("host", "Kept as it was.", tags=["team"])
    make_mental_model("host", "team-stack", content="Ours.")
    before = (list(MemoryUnit.objects.values_list("id", "text", "updated_at")),
              list(MentalModel.objects.values_list("uid", "content", "updated_at")))
    response = post_archive(api, upstream_archive(), target_bank_id="host")
    refused(response, "target bank 'host' already exists")
    after = (list(MemoryUnit.objects.values_list("id", "text", "updated_at")),
             list(MentalModel.objects.values_list("uid", "content", "updated_at")))
    assert after == before


def test_a_restore_whose_path_bank_is_missing_is_not_found(api: APIClient) -> None:
    response = post_archive(api, upstream_archive(), bank="nowhere")
    assert response.status_code == 404 and "nowhere" in response.json()["detail"]


def test_merge_takes_no_target_or_scope(api: APIClient) -> None:
    refused(post_archive(api, upstream_archive(), mode="merge", target_bank_id="x"),
            "target_bank_id is only valid with mode=restore")
    refused(post_archive(api, upstream_archive(), mode="merge", include_data="true"),
            "apply to mode=restore")


def test_an_upload_without_a_file_is_a_422_naming_it(api: APIClient) -> None:
    response = api.post("/v1/default/banks/host/transfer/import", {}, format="multipart")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "file"]


def test_a_write_that_fails_half_way_leaves_no_bank(tmp_path) -> None:
    # Two siblings of one name: the tree refuses the second after the memories and the models
    # were written, in the same transaction.
    pages = entry(upstream_archive(), "knowledge_pages.json")
    clash = {**pages[0], "id": "kf-" + "0" * 32}
    path = tmp_path / "a.zip"
    path.write_bytes(rewritten(upstream_archive(), {"knowledge_pages.json": [*pages, clash]}))
    with pytest.raises(ArchiveInvalid, match="cannot be placed in the tree"):
        bank_import(path=str(path), request=ImportRequest(target_bank_id="half"))
    assert not Bank.objects.filter(id="half").exists()
    assert not MemoryUnit.objects.filter(bank_id="half").exists()
    assert not MentalModel.objects.filter(bank_id="half").exists()
    assert not KnowledgeNode.objects.filter(bank_id="half").exists()


def test_a_bad_trigger_names_the_model_and_the_field(tmp_path) -> None:
    models = entry(upstream_archive(), "mental_models.json")
    models[0]["trigger"] = {"refresh_cron": "not a cron"}
    path = tmp_path / "a.zip"
    path.write_bytes(rewritten(upstream_archive(), {"mental_models.json": models}))
    with pytest.raises(ArchiveInvalid, match=r"mental_models.json\[0\].trigger.refresh_cron"):
        bank_import(path=str(path), request=ImportRequest(target_bank_id="bad"))
    assert not Bank.objects.filter(id="bad").exists()


def _exported(tmp_path, *, seconds: int = 3600) -> str:
    local = tmp_path / "x.zip"
    local.write_bytes(upstream_archive())
    key = storage.export_key(bank_id="host")
    storage.archive_save(key=key, path=str(local))
    return key


def test_a_download_key_of_another_tenant_is_not_found(api: APIClient, settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key="tenant-a")
    key = _exported(tmp_path)
    api.credentials(HTTP_AUTHORIZATION="Bearer tenant-a")
    ok = api.get(storage.download_url(key))
    assert ok.status_code == 200 and b"".join(ok.streaming_content) == upstream_archive()
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key="tenant-b")
    api.credentials(HTTP_AUTHORIZATION="Bearer tenant-b")
    other = api.get(storage.download_url(key))
    assert other.status_code == 404 and other.json() == {"detail": "File not found"}
    # A key naming this tenant but another's file, or climbing out, finds nothing either.
    forged = key.replace(key.split("/")[1], storage.tenant_id())
    assert api.get(storage.download_url(forged)).status_code == 404
    assert api.get(storage.download_url(f"tenants/{storage.tenant_id()}/../x")).status_code == 404


def test_an_expired_download_key_is_not_found_and_its_archive_deleted(
        api: APIClient, settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, transfer_download_ttl_seconds=1)
    key = _exported(tmp_path)
    time.sleep(2.1)
    assert api.get(storage.download_url(key)).status_code == 404
    assert not storage.transfer_storage().exists(key)
