"""Operation ids that follow the work: an attempt merged into the operation queued behind it
(or a retry folded into the pending one) records ``superseded_by``, and every read — GET, the
list and its status filter, the counts — reports the status of the work it asked for."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from hindsight.banks.models import Bank
from operations.actions import operation_retry
from operations.jobs import Job
from operations.leases import operation_claim, operation_record_failure
from operations.models import COMPLETED, FAILED, PENDING, PROCESSING, Operation
from operations.queue import operation_submit
from operations.recovery import operations_recover
from operations.selectors import operation_counts, operation_report, operations_list

pytestmark = pytest.mark.django_db

BANK = "sup"
KEY = "mm:sup:m1"
URL = f"/v1/default/banks/{BANK}/operations"


@pytest.fixture
def bank_id() -> str:
    return BANK


@pytest.fixture
def bank(bank, monkeypatch, settings) -> Bank:  # the shared bank, with publishing patched out
    monkeypatch.setattr("operations.dispatch.operation_send", lambda **kw: True)
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: None)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3,
                                             worker_retry_backoff_seconds=0.0)
    return bank


def _submit(key: str = KEY) -> Operation:
    return operation_submit(bank_id=BANK, operation_type="x", dedupe_key=key).operation


def _merge_running_into_follower(key: str = KEY) -> tuple[Operation, Operation]:
    """A running attempt fails while another request of its key is queued behind it."""
    first = _submit(key)
    claimed = operation_claim(operation_id=first.id, holder="w")
    follower = _submit(key)
    record = operation_record_failure(operation_id=first.id, fence=claimed.fence, message="boom")
    assert record is not None and record.retried_as == follower.id
    return first, follower


def _complete(op: Operation) -> None:
    claimed = operation_claim(operation_id=op.id, holder="w")
    job = Job(claimed, fence=claimed.fence, key=claimed.lease_key)
    job.result_metadata = {"answer": 42}
    with job.finishing():
        pass


def test_merged_attempt_records_its_follower_and_reads_follow_the_follower(bank) -> None:
    first, follower = _merge_running_into_follower()
    row = Operation.objects.get(id=first.id)
    assert row.status == FAILED and row.result_metadata["superseded_by"] == str(follower.id)
    api = APIClient()

    body = api.get(f"{URL}/{first.id}").json()
    assert body["status"] == PENDING and body["operation_id"] == str(first.id)
    assert body["result_metadata"]["superseded_by"] == str(follower.id)
    assert body["result_metadata"]["carried_by"] == str(follower.id)
    assert body["retry_count"] == 1 and body["completed_at"] is None

    operation_claim(operation_id=follower.id, holder="w2")
    assert api.get(f"{URL}/{first.id}").json()["status"] == PROCESSING
    Operation.objects.filter(id=follower.id).update(status=PENDING)  # undo the bare claim

    _complete(follower)
    body = api.get(f"{URL}/{first.id}").json()
    assert body["status"] == COMPLETED and body["error_message"] is None
    assert body["completed_at"] is not None
    assert body["result_metadata"] == {"answer": 42, "superseded_by": str(follower.id),
                                       "carried_by": str(follower.id)}
    listed = api.get(URL).json()
    assert {o["id"]: o["status"] for o in listed["operations"]} == {
        str(first.id): COMPLETED, str(follower.id): COMPLETED}
    assert api.get(URL, {"status": "failed"}).json()["total"] == 0
    assert api.get(URL, {"status": "completed"}).json()["total"] == 2
    assert operation_counts(bank_id=BANK)[FAILED] == 0
    assert operation_counts(bank_id=BANK)[COMPLETED] == 2


def test_a_chain_of_merges_resolves_to_its_end_and_fails_only_when_the_work_failed(
    bank, settings
) -> None:
    first, second = _merge_running_into_follower()
    claimed = operation_claim(operation_id=second.id, holder="w")
    third = _submit()
    operation_record_failure(operation_id=second.id, fence=claimed.fence, message="again")
    report = operation_report(bank_id=BANK, operation_id=first.id)
    assert report is not None and report.carrier.id == third.id and report.status == PENDING
    assert report.superseded_by == str(second.id)

    # The work itself fails: only now does the first id report failed.
    claimed = operation_claim(operation_id=third.id, holder="w")
    operation_record_failure(operation_id=third.id, fence=claimed.fence, message="fatal",
                             retryable=False)
    body = APIClient().get(f"{URL}/{first.id}").json()
    assert body["status"] == FAILED and body["error_message"] == "fatal"
    assert body["result_metadata"]["carried_by"] == str(third.id)
    total, page = operations_list(bank_id=BANK, status=FAILED)
    assert total == 3 and {r.operation.id for r in page} == {first.id, second.id, third.id}


def test_a_recovered_attempt_merged_into_its_follower_reports_the_follower(bank, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=1)
    first = _submit()
    operation_claim(operation_id=first.id, holder="gone")
    follower = _submit()
    Operation.objects.filter(id=first.id).update(
        heartbeat_at=timezone.now() - timedelta(hours=1))
    [record] = operations_recover().recovered
    assert record.retried_as == follower.id
    report = operation_report(bank_id=BANK, operation_id=first.id)
    assert report.carrier.id == follower.id and report.status == PENDING


def test_a_retry_folded_into_the_pending_operation_follows_it_and_a_requeue_forgets_it(
    bank,
) -> None:
    first = _submit()
    claimed = operation_claim(operation_id=first.id, holder="w")
    operation_record_failure(operation_id=first.id, fence=claimed.fence, message="x",
                             retryable=False)
    pending = _submit()
    carrier, message = operation_retry(bank_id=BANK, operation_id=first.id)
    assert carrier.id == pending.id and "folded" in message
    assert operation_report(bank_id=BANK, operation_id=first.id).status == PENDING
    assert Operation.objects.get(id=first.id).result_metadata["superseded_by"] == str(pending.id)

    # The carrier fails for good; the first id's own retry runs it again, carrying its own
    # work once more.
    claimed = operation_claim(operation_id=pending.id, holder="w")
    operation_record_failure(operation_id=pending.id, fence=claimed.fence, message="y",
                             retryable=False)
    assert operation_report(bank_id=BANK, operation_id=first.id).status == FAILED
    again, _ = operation_retry(bank_id=BANK, operation_id=first.id)
    assert again.id == first.id and "superseded_by" not in again.result_metadata
    report = operation_report(bank_id=BANK, operation_id=first.id)
    assert not report.carried and report.status == PENDING


def test_a_deleted_carrier_leaves_the_last_operation_of_the_chain(bank) -> None:
    first, follower = _merge_running_into_follower()
    follower.delete()
    report = operation_report(bank_id=BANK, operation_id=first.id)
    assert report is not None and not report.carried and report.status == FAILED
    assert APIClient().get(f"{URL}/{first.id}").json()["status"] == FAILED


def test_a_non_uuid_superseded_by_written_by_a_handler_is_ignored(bank) -> None:
    op = _submit()
    Operation.objects.filter(id=op.id).update(result_metadata={"superseded_by": "not-an-id"},
                                              status=COMPLETED)
    assert APIClient().get(f"{URL}/{op.id}").json()["status"] == COMPLETED
    assert APIClient().get(URL, {"status": "completed"}).json()["total"] == 1


def test_cancel_and_retry_of_a_carried_operation_name_the_carrier(bank) -> None:
    first, follower = _merge_running_into_follower()
    api = APIClient()
    cancelled = api.delete(f"{URL}/{first.id}")
    assert cancelled.status_code == 409
    assert f"carried by operation {follower.id} (pending)" in cancelled.json()["detail"]
    retried = api.post(f"{URL}/{first.id}/retry")
    assert retried.status_code == 409 and str(follower.id) in retried.json()["detail"]
    assert Operation.objects.get(id=follower.id).status == PENDING  # untouched

    # The carrier fails for good: now the work failed, and the first id may be retried.
    claimed = operation_claim(operation_id=follower.id, holder="w")
    operation_record_failure(operation_id=follower.id, fence=claimed.fence, message="fatal",
                             retryable=False)
    assert api.post(f"{URL}/{first.id}/retry").status_code == 200
    assert operation_report(bank_id=BANK, operation_id=first.id).status == PENDING
