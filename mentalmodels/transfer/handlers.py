"""The bank transfer's operations: ``export_bank``, ``import_bank``, ``clone_bank`` (upstream's
operation types), registered from ``mentalmodels.registrations``.

An export writes the archive into a local temporary file, stores it (``storage``) and completes
with ``result_metadata`` naming it: ``download_url``, ``storage_key``, ``byte_size``,
``filename`` and the manifest's counts. An import reads the stored upload into a local file (the
ZIP reader seeks) and completes inside the transaction that writes the bank, so the bank and the
operation's end commit together. A clone is an export and an import back to back, through a
local file only. Progress (``result_metadata.progress``: the phase, and how far the embedding
is) is written while the work runs, through a connection of its own, so it shows while the
import's one transaction is still open. An archive that cannot be imported fails the operation
at once, naming the problem; the embedder failing is worth another attempt.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction

from hindsight.infra.embeddings import EmbeddingError
from hindsight.infra.errors import BadRequest, Unavailable
from mentalmodels.transfer import storage
from mentalmodels.transfer.exporter import Scope, bank_export
from mentalmodels.transfer.importer import RESTORE, ImportRequest, bank_import
from operations.errors import OperationFailure
from operations.jobs import Job

EXPORT_BANK = "export_bank"
IMPORT_BANK = "import_bank"
CLONE_BANK = "clone_bank"
_PROGRESS_EVERY_SECONDS = 1.0


def scope_of(payload: dict[str, Any]) -> Scope:
    return Scope(data=bool(payload.get("include_data", True)),
                 bank_config=bool(payload.get("include_bank_config", True)),
                 history=bool(payload.get("include_history", False)))


class _Progress:
    """Writes ``result_metadata.progress`` onto the running operation, at most once a second,
    on a connection of its own (the work's transaction would hide it until it commits)."""

    def __init__(self, job: Job):
        self.job = job
        self.last = 0.0
        self.connection: Any = None

    def __call__(self, progress: dict[str, Any]) -> None:
        self.job.result_metadata = {**self.job.result_metadata, "progress": progress}
        now = time.monotonic()
        if now - self.last < _PROGRESS_EVERY_SECONDS and progress.get("phase") != "writing":
            return
        self.last = now
        if self.connection is None:
            # A connection of its own, outside any pool (a pooled worker's pool would be
            # copied, and left open, with it).
            default = connections["default"]
            settings_dict = copy.deepcopy(default.settings_dict)
            settings_dict.get("OPTIONS", {}).pop("pool", None)
            self.connection = type(default)(settings_dict, alias="transfer-progress")
        with self.connection.cursor() as cursor:
            cursor.execute(
                "UPDATE operations_operation SET result_metadata = %s::jsonb, "
                "updated_at = clock_timestamp() WHERE id = %s AND status = 'processing' "
                "AND fence = %s", [json.dumps(self.job.result_metadata), self.job.id, self.job.fence])

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


@contextmanager
def _progress(job: Job) -> Iterator[_Progress]:
    writer = _Progress(job)
    try:
        yield writer
    finally:
        writer.close()


@contextmanager
def _local_file(suffix: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="hindsight-transfer-", suffix=suffix)
    os.close(fd)
    try:
        yield path
    finally:
        os.unlink(path)


@contextmanager
def _refusals() -> Iterator[None]:
    """The archive or the request cannot be imported: fail now, naming why (no retry helps);
    the embedder failing may pass on another attempt."""
    try:
        yield
    except BadRequest as exc:
        raise OperationFailure(str(exc.detail), retryable=False) from exc
    except EmbeddingError as exc:
        raise Unavailable(f"embedding failed: {exc}") from exc


def _import_metadata(job: Job, counts: dict[str, Any]) -> None:
    metadata = {k: v for k, v in job.result_metadata.items() if k != "progress"}
    job.result_metadata = {**metadata, **counts, "progress": {"phase": "done"}}


class ExportBankHandler:
    operation_type = EXPORT_BANK
    cpu_heavy = True  # the bank serialized and deflated in this process

    def run(self, job: Job) -> None:
        storage.expired_exports_purge(bank_id=job.bank_id)
        with _progress(job) as progress, _local_file(".zip") as path:
            progress({"phase": "export"})
            with open(path, "wb") as out:
                manifest = bank_export(bank_id=job.bank_id, scope=scope_of(job.payload),
                                       out=out, progress=progress)
            progress({"phase": "storing"})
            key = storage.export_key(bank_id=job.bank_id)
            size = storage.archive_save(key=key, path=path)
        counts = {k: v for k, v in manifest.items() if k.endswith("_count") or k.endswith("_skipped")}
        job.result_metadata = {
            **{k: v for k, v in job.result_metadata.items() if k != "progress"},
            "storage_key": key, "download_url": storage.download_url(key), "byte_size": size,
            "filename": f"{job.bank_id}-bank.zip", **counts, "progress": {"phase": "done"},
        }
        try:
            with job.finishing():
                pass
        except BaseException:
            storage.archive_delete(key)  # no operation will name it
            raise


def _finisher(job: Job, *, upload_key: str | None = None) -> Any:
    """What runs last in the import's transaction: the counts recorded, the operation
    completed under its fence (and the upload deleted once that commits)."""

    def finish(counts: dict[str, Any]) -> None:
        _import_metadata(job, counts)
        job.complete_in_transaction()
        if upload_key is not None:
            transaction.on_commit(lambda: storage.archive_delete(upload_key))

    return finish


def _request(payload: dict[str, Any]) -> ImportRequest:
    return ImportRequest(mode=payload.get("mode", RESTORE),
                         target_bank_id=payload.get("target_bank_id"),
                         scope=scope_of(payload),
                         document_conflict=payload.get("document_conflict", "skip"))


class ImportBankHandler:
    operation_type = IMPORT_BANK
    cpu_heavy = True  # every memory re-embedded

    def run(self, job: Job) -> None:
        key = job.payload["storage_key"]
        with _progress(job) as progress, _local_file(".zip") as path, _refusals():
            progress({"phase": "reading"})
            with open(path, "wb") as out:
                storage.archive_copy_to(key=key, out=out)
            bank_import(path=path, request=_request(job.payload), progress=progress,
                        before_commit=_finisher(job, upload_key=key))

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        if final:  # the upload is kept only while another attempt may read it
            storage.archive_delete(job.payload["storage_key"])


class CloneBankHandler:
    operation_type = CLONE_BANK
    cpu_heavy = True

    def run(self, job: Job) -> None:
        scope = scope_of(job.payload)
        request = ImportRequest(mode=RESTORE, target_bank_id=job.payload["target_bank_id"],
                                scope=scope)
        with _progress(job) as progress, _local_file(".zip") as path, _refusals():
            progress({"phase": "export"})
            with open(path, "wb") as out:
                bank_export(bank_id=job.bank_id, scope=scope, out=out, progress=progress)
            bank_import(path=path, request=request, progress=progress,
                        before_commit=_finisher(job))
