"""Where bank archives are kept, and the download keys that name them.

The storage is a Django storage: the folder ``HINDSIGHT_API_TRANSFER_DIR`` (``.devdata/transfer``
under the project by default), or the backend ``HINDSIGHT_API_TRANSFER_STORAGE`` names (any
django-storages class, with ``HINDSIGHT_API_TRANSFER_STORAGE_OPTIONS``), built through Django's
``storages`` API from the settings as they are at call time.

A key is upstream's shape — ``tenants/{tenant}/banks/{bank}/exports/{expiry}-{id}/{bank}.zip``
— with two rules of this server's: the tenant is the one the request's API key names (a key
written under another key's tenant is not found), and the key carries the instant it expires
(past it the download is refused and the archive deleted). The expiry is part of the name, so
it cannot be moved without naming a file that does not exist.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages

from hindsight.infra.errors import NotFound

DOWNLOAD_PREFIX = "/v1/default/files/download/"
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_EXPORT_DIR = re.compile(r"^(\d{1,12})-([0-9a-f]{32})$")

_cache: dict[tuple[str, str, str], Storage] = {}


def transfer_storage() -> Storage:
    config = settings.HINDSIGHT
    folder = config.transfer_dir or str(Path(settings.BASE_DIR) / ".devdata" / "transfer")
    cache_key = (config.transfer_storage, config.transfer_storage_options, folder)
    storage = _cache.get(cache_key)
    if storage is None:
        if config.transfer_storage:
            params: dict[str, Any] = {"BACKEND": config.transfer_storage,
                                      "OPTIONS": json.loads(config.transfer_storage_options)}
        else:
            params = {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": folder}}
        storage = _cache[cache_key] = storages.create_storage(params)
    return storage


def tenant_id() -> str:
    """The tenant a request acts for: the deployment's API key names it (no key: ``default``)."""
    key = settings.HINDSIGHT.tenant_api_key
    return "t" + hashlib.sha256(key.encode()).hexdigest()[:16] if key else "default"


def _bank_segment(bank_id: str) -> str:
    # A bank id may hold any printable character ('/', '%'): the key uses it only when it is a
    # plain path segment, and a digest of it otherwise.
    if _PLAIN.match(bank_id):
        return bank_id
    return "b-" + hashlib.sha256(bank_id.encode()).hexdigest()[:24]


def export_key(*, bank_id: str) -> str:
    expires = int(time.time()) + settings.HINDSIGHT.transfer_download_ttl_seconds
    bank = _bank_segment(bank_id)
    return f"tenants/{tenant_id()}/banks/{bank}/exports/{expires}-{uuid.uuid4().hex}/{bank}.zip"


def upload_key(*, bank_id: str) -> str:
    return f"tenants/{tenant_id()}/banks/{_bank_segment(bank_id)}/imports/{uuid.uuid4().hex}.zip"


def download_url(key: str) -> str:
    return DOWNLOAD_PREFIX + key


def archive_save(*, key: str, path: str) -> int:
    """Store the local file at ``path`` under ``key`` (streamed by the storage); its size."""
    with open(path, "rb") as source:
        saved = transfer_storage().save(key, File(source))
    if saved != key:  # keys carry a fresh uuid: a renamed save means the storage disagrees
        transfer_storage().delete(saved)
        raise RuntimeError(f"the transfer storage stored {key!r} as {saved!r}")
    return Path(path).stat().st_size


def archive_copy_to(*, key: str, out: IO[bytes]) -> None:
    """Copy the stored archive into ``out`` (a local file the reader can seek in)."""
    with transfer_storage().open(key, "rb") as stored:
        while chunk := stored.read(1 << 20):
            out.write(chunk)


def archive_delete(key: str) -> None:
    transfer_storage().delete(key)


@dataclass(frozen=True)
class Download:
    file: IO[bytes]
    size: int | None
    filename: str


def _not_found() -> NotFound:
    return NotFound("File not found")


def download_open(key: str) -> Download:
    """The export archive ``key`` names, if it is one of this tenant's and has not expired.

    Every refusal is the same 404 (a key of another tenant, of no export, expired, gone), so a
    key cannot be used to learn what another tenant stored. An expired archive is deleted."""
    parts = key.split("/")
    if (len(parts) != 7 or parts[0] != "tenants" or parts[1] != tenant_id()
            or parts[2] != "banks" or parts[4] != "exports" or ".." in parts):
        raise _not_found()
    match = _EXPORT_DIR.match(parts[5])
    if match is None or parts[6] != f"{parts[3]}.zip":
        raise _not_found()
    storage = transfer_storage()
    if int(match.group(1)) < time.time():
        storage.delete(key)
        raise _not_found()
    try:
        size: int | None = storage.size(key)
        handle = storage.open(key, "rb")
    except (FileNotFoundError, OSError):
        raise _not_found() from None
    return Download(file=handle, size=size, filename=parts[6])


def expired_exports_purge(*, bank_id: str) -> int:
    """Delete this tenant's expired export archives of ``bank_id``; how many. Run before each
    export, so a bank's old archives do not pile up between downloads."""
    storage = transfer_storage()
    folder = f"tenants/{tenant_id()}/banks/{_bank_segment(bank_id)}/exports"
    try:
        directories, _ = storage.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    removed = 0
    now = time.time()
    for directory in directories:
        match = _EXPORT_DIR.match(directory)
        if match and int(match.group(1)) < now:
            for name in storage.listdir(f"{folder}/{directory}")[1]:
                storage.delete(f"{folder}/{directory}/{name}")
                removed += 1
    return removed
