"""The official hindsight-client 1.1.0's operation calls against our server (live_server + a
real worker): async retain → get/list; cancel, retry, delete; unknown id → not_found."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async

from hindsight.banks.models import MemoryUnit
from operations.queue import operation_submit
from operations.testing_handlers import TEST_JOB
from tests.workers import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _worker(worker_factory) -> None:
    worker_factory()


def _status(client: Hindsight, bank: str, op_id: str):
    return _run_async(client.operations.get_operation_status(bank, op_id))


def test_async_retain_runs_as_an_operation_the_client_can_follow(client: Hindsight) -> None:
    bank = "compat-ops"
    client.create_bank(bank, name="Ops")
    response = client.retain(bank, "Dana waters the office plants on Mondays.",
                             tags=["office"], retain_async=True)
    assert response.var_async is True and response.operation_id
    op_id = response.operation_id

    done = wait_until(
        lambda: (s := _status(client, bank, op_id)).status == "completed" and s,
        timeout=60, interval=0.3, message="async retain completed",
    )
    assert done.operation_type == "retain" and done.task_type == "retain"
    assert done.completed_at is not None and done.retry_count == 0 and done.details is None
    texts = list(MemoryUnit.objects.filter(bank_id=bank).values_list("text", flat=True))
    assert texts == ["Dana waters the office plants on Mondays."]

    listed = _run_async(client.operations.list_operations(bank, type="retain"))
    assert listed.total == 1 and listed.operations[0].id == op_id
    assert listed.operations[0].items_count == 1 and listed.operations[0].status == "completed"


def test_cancel_retry_delete_and_unknown_through_the_client(client: Hindsight) -> None:
    bank = "compat-ops2"
    client.create_bank(bank, name="Ops 2")
    parked = operation_submit(
        bank_id=bank, operation_type=TEST_JOB, dedupe_key="compat:parked", automatic=True,
        not_before=timezone.now() + timedelta(hours=1),
    ).operation
    op_id = str(parked.id)
    pending = _status(client, bank, op_id)
    assert pending.status == "pending" and pending.next_retry_at is not None

    cancelled = _run_async(client.operations.cancel_operation(bank, op_id))
    assert cancelled.success is True and cancelled.operation_id == op_id
    assert _status(client, bank, op_id).status == "cancelled"
    listed = _run_async(client.operations.list_operations(bank, status="cancelled"))
    assert [o.id for o in listed.operations] == [op_id]

    retried = _run_async(client.operations.retry_operation(bank, op_id))
    assert retried.success is True
    wait_until(lambda: _status(client, bank, op_id).status == "completed", timeout=30,
               interval=0.3, message="retried operation completed")

    deleted = _run_async(client.operations.delete_operation(bank, op_id))
    assert deleted.success is True
    gone = _status(client, bank, op_id)
    assert gone.status == "not_found" and gone.operation_type is None
    unknown = _status(client, bank, "00000000-0000-0000-0000-000000000000")
    assert unknown.status == "not_found"
