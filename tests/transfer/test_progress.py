"""An import's progress shows on its operation while the work's one transaction is still open:
the phase and the memories embedded, written on a connection of its own."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.db import connection

from hindsight.banks.models import Bank
from mentalmodels.transfer.handlers import _Progress
from mentalmodels.transfer.importer import ImportRequest, bank_import
from operations.jobs import Job
from operations.models import Operation
from tests.factories import make_bank, make_operation
from tests.transfer.archives import upstream_archive

pytestmark = pytest.mark.django_db(transaction=True)


def test_progress_is_visible_while_the_import_runs(settings, tmp_path) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, transfer_dir=str(tmp_path / "t"))
    make_bank("host")
    operation = make_operation(bank_id="host", operation_type="import_bank", status="processing",
                               fence=1)
    writer = _Progress(Job(operation, fence=1, key=f"op:{operation.id}"))
    seen: list[Any] = []

    def observed(progress: dict[str, Any]) -> None:
        writer(progress)
        if progress["phase"] == "writing":
            return
        # What another process reads now (the row, from the database).
        seen.append(Operation.objects.get(id=operation.id).result_metadata.get("progress"))

    def inside(counts: dict[str, Any]) -> None:
        writer({"phase": "almost"})
        writer.last = 0.0
        writer({"phase": "writing", "inside": True})
        assert connection.in_atomic_block
        seen.append(("inside", counts["facts_imported"]))
        raise RuntimeError("the import's transaction rolls back")

    path = tmp_path / "a.zip"
    path.write_bytes(upstream_archive())
    try:
        with pytest.raises(RuntimeError, match="rolls back"):
            bank_import(path=str(path), request=ImportRequest(target_bank_id="moved"),
                        progress=observed, before_commit=inside)
    finally:
        writer.close()
    assert {"phase": "embedding", "memories_embedded": 5, "memories_total": 5} in seen
    assert ("inside", 3) in seen
    # Written by the side connection while the import's transaction was open: kept though that
    # transaction rolled back (and the bank with it).
    assert not Bank.objects.filter(id="moved").exists()
    stored = Operation.objects.get(id=operation.id).result_metadata["progress"]
    assert stored == {"phase": "writing", "inside": True}
