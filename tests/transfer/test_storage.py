"""Archives go to the storage ``HINDSIGHT_API_TRANSFER_STORAGE`` names (any Django storage: here
Django's in-memory one, as a django-storages backend would be named), else to the folder."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from mentalmodels.transfer import storage
from tests.transfer.archives import upstream_archive

pytestmark = pytest.mark.django_db


def test_a_named_storage_backend_keeps_and_serves_the_archives(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, transfer_dir=str(tmp_path / "folder"),
        transfer_storage="django.core.files.storage.InMemoryStorage",
        transfer_storage_options='{"location": "archives"}')
    local = tmp_path / "a.zip"
    local.write_bytes(upstream_archive())
    key = storage.export_key(bank_id="bank")
    assert storage.archive_save(key=key, path=str(local)) == len(upstream_archive())
    assert type(storage.transfer_storage()).__name__ == "InMemoryStorage"
    assert not (tmp_path / "folder").exists()  # nothing went to the folder
    answer = APIClient().get(storage.download_url(key))
    assert answer.status_code == 200
    assert b"".join(answer.streaming_content) == upstream_archive()
    assert answer["Content-Disposition"] == 'attachment; filename="bank.zip"'


def test_without_a_backend_the_archives_go_to_the_folder(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             transfer_dir=str(tmp_path / "folder"))
    local = tmp_path / "a.zip"
    local.write_bytes(upstream_archive())
    key = storage.export_key(bank_id="a bank/with slashes")
    storage.archive_save(key=key, path=str(local))
    assert (tmp_path / "folder" / key).read_bytes() == upstream_archive()
    assert "/banks/b-" in key  # a bank id that is no plain path segment is named by its digest
    assert APIClient().get(storage.download_url(key)).status_code == 200
