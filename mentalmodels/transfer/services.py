"""Submitting a bank transfer: the checks a caller gets answered at once (a 4xx), then the
operation (``mentalmodels.transfer.handlers``) that does the work.

The operation is recorded against the bank in the path, which must exist (upstream's rule); a
restore's target must not. An uploaded archive is opened and its manifest checked before it is
accepted, then kept in the transfer storage for the worker, which may run on another machine.
"""

from __future__ import annotations

from typing import Any

from hindsight.banks.models import Bank
from hindsight.banks.services import bank_id_validate
from hindsight.infra.errors import BadRequest, FieldError, NotFound
from mentalmodels.transfer import storage
from mentalmodels.transfer.exporter import Scope
from mentalmodels.transfer.handlers import CLONE_BANK, EXPORT_BANK, IMPORT_BANK
from mentalmodels.transfer.importer import (
    RESTORE,
    ImportRequest,
    TargetExists,
    archive_open,
    target_exists_message,
)
from operations.models import Operation
from operations.queue import operation_submit


def _bank_required(bank_id: str) -> None:
    if not Bank.objects.filter(id=bank_id).exists():
        raise NotFound(f"Bank '{bank_id}' not found")


def _scope_payload(scope: Scope) -> dict[str, bool]:
    if not (scope.data or scope.bank_config or scope.history):
        raise BadRequest("Nothing to transfer: set at least one of include_data, "
                         "include_bank_config, include_history")
    return {"include_data": scope.data, "include_bank_config": scope.bank_config,
            "include_history": scope.history}


def _new_target(target_bank_id: str) -> None:
    bank_id_validate(target_bank_id, loc=("query", "target_bank_id"))
    if Bank.objects.filter(id=target_bank_id).exists():
        raise TargetExists(target_exists_message(target_bank_id))


def bank_export_submit(*, bank_id: str, scope: Scope) -> Operation:
    _bank_required(bank_id)
    payload = _scope_payload(scope)
    return operation_submit(bank_id=bank_id, operation_type=EXPORT_BANK, payload=payload).operation


def bank_clone_submit(*, bank_id: str, target_bank_id: str, scope: Scope) -> Operation:
    _bank_required(bank_id)
    payload = _scope_payload(scope)
    if target_bank_id == bank_id:
        raise FieldError(("query", "target_bank_id"), "must name another bank than the source")
    _new_target(target_bank_id)
    return operation_submit(bank_id=bank_id, operation_type=CLONE_BANK,
                            payload={**payload, "target_bank_id": target_bank_id}).operation


def bank_import_submit(*, bank_id: str, archive_path: str, request: ImportRequest) -> Operation:
    """Check the uploaded archive at ``archive_path`` (a local file) and queue its import."""
    _bank_required(bank_id)
    payload: dict[str, Any] = {"mode": request.mode,
                               "document_conflict": request.document_conflict,
                               **_scope_payload(request.scope)}
    with archive_open(archive_path, mode=request.mode) as reader:
        source = reader.manifest["source_bank_id"]
    if request.mode == RESTORE:
        target = request.target_bank_id or source
        _new_target(target)
        payload["target_bank_id"] = target
    else:
        payload["target_bank_id"] = bank_id
    key = storage.upload_key(bank_id=bank_id)
    storage.archive_save(key=key, path=archive_path)
    try:
        return operation_submit(bank_id=bank_id, operation_type=IMPORT_BANK,
                                payload={**payload, "storage_key": key}).operation
    except BaseException:
        storage.archive_delete(key)
        raise
