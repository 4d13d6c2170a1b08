"""``operations.jobs.Job``: the claimed operation a handler receives, its fence check and the
fenced finish (``finishing`` / ``complete_in_transaction``)."""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from hindsight.banks.models import Bank
from operations.errors import FenceLost
from operations.jobs import Job
from operations.leases import lease_bump, operation_claim
from operations.models import CANCELLED, COMPLETED, PROCESSING, Lease, Operation
from operations.queue import operation_submit

pytestmark = pytest.mark.django_db

KEY = "mm:b1:m1"


@pytest.fixture
def bank_id() -> str:
    return "b1"


def _submit(**kwargs):
    defaults = dict(bank_id="b1", operation_type="refresh_mental_model", dedupe_key=KEY,
                    mental_model_id="m1")
    return operation_submit(**{**defaults, **kwargs})


def _claimed_job(**kwargs) -> Job:
    op = _submit(**kwargs).operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    assert isinstance(claimed, Operation)
    return Job(claimed, fence=claimed.fence, key=claimed.lease_key)


def test_job_whose_fence_was_bumped_is_refused_and_writes_nothing(bank, sent) -> None:
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    job = Job(claimed, fence=claimed.fence, key=KEY)
    lease_bump(key=KEY)
    with pytest.raises(FenceLost), job.finishing():
        Bank.objects.create(id="written-by-stale-job")
    assert not Bank.objects.filter(id="written-by-stale-job").exists()
    assert Operation.objects.get(id=op.id).status == PROCESSING


def test_finishing_completes_the_operation_with_its_metadata_in_one_transaction(
    bank, sent
) -> None:
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    job = Job(claimed, fence=claimed.fence, key=KEY)
    job.result_metadata["outcome"] = "content_written"
    job.details = {"operation_type": "refresh_mental_model", "outcome": "content_written"}
    with job.finishing():
        Bank.objects.create(id="written-by-job")
    done = Operation.objects.get(id=op.id)
    assert done.status == COMPLETED and done.completed_at is not None
    assert done.result_metadata["outcome"] == "content_written"
    assert done.details["outcome"] == "content_written"


def test_check_fence_outside_a_transaction_is_an_error(bank, sent) -> None:
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    job = Job(claimed, fence=claimed.fence, key=KEY)
    # pytest-django's db fixture wraps the test in a transaction: leave it to check the guard.
    connection.in_atomic_block, saved = False, connection.in_atomic_block
    try:
        with pytest.raises(RuntimeError):
            job.check_fence()
    finally:
        connection.in_atomic_block = saved


# --- the job's views of its snapshot -------------------------------------------------------------


def test_job_views_its_operation_and_counts_attempts_from_one(bank, sent) -> None:
    job = _claimed_job(automatic=True)
    assert job.id == str(job.operation.id) and isinstance(job.id, str)
    assert job.bank_id == "b1"
    assert job.operation_type == "refresh_mental_model"
    assert job.automatic is True
    assert job.attempt == 1
    job.operation.retry_count = 2
    assert job.attempt == 3
    assert repr(job) == f"<Job refresh_mental_model {job.id} key={KEY} fence={job.fence}>"


def test_job_payload_and_metadata_are_copies_not_the_operation_s_own(bank, sent) -> None:
    job = _claimed_job(payload={"a": 1})
    job.payload["a"] = 2
    job.result_metadata["x"] = 1
    job.details["y"] = 1
    assert job.operation.payload == {"a": 1}
    assert job.operation.result_metadata in (None, {})
    assert job.operation.details in (None, {})


# --- the fenced finish --------------------------------------------------------------------------


def test_finishing_disarms_the_wall_timeout_before_the_final_write(bank, sent) -> None:
    job = _claimed_job()
    with job.under_wall_timeout(0.3), job.finishing():
        time.sleep(0.6)  # past the wall timeout: the commit is not cut short
    assert Operation.objects.get(id=job.id).status == COMPLETED


def test_the_completion_stores_the_llm_tally_of_the_job(bank, sent) -> None:
    job = _claimed_job()
    with job.llm_accounting() as tally:
        tally.add(input_tokens=3, output_tokens=2, error=False)
    with job.finishing():
        pass
    assert Operation.objects.get(id=job.id).result_metadata["llm"] == {
        "requests": 1, "errors": 0, "input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def test_finished_is_set_only_once_the_completion_commits(
    bank, sent, django_capture_on_commit_callbacks
) -> None:
    job = _claimed_job()
    with django_capture_on_commit_callbacks(execute=True):
        with job.finishing():
            pass
        assert job.finished is False
    assert job.finished is True


def test_complete_in_transaction_after_the_operation_stopped_processing_is_fence_lost(
    bank, sent
) -> None:
    job = _claimed_job()
    Operation.objects.filter(id=job.operation.id).update(status=CANCELLED)
    with pytest.raises(FenceLost), transaction.atomic():
        job.complete_in_transaction()
    assert Operation.objects.get(id=job.operation.id).status == CANCELLED


def test_completing_an_operation_of_its_own_key_deletes_that_key_s_lease(bank, sent) -> None:
    op = operation_submit(bank_id="b1", operation_type="x").operation  # no dedupe key
    claimed = operation_claim(operation_id=op.id, holder="w")
    job = Job(claimed, fence=claimed.fence, key=claimed.lease_key)
    assert job.key.startswith("op:") and Lease.objects.filter(key=job.key).exists()
    with job.finishing():
        pass
    assert Operation.objects.get(id=op.id).status == COMPLETED
    assert not Lease.objects.filter(key=job.key).exists()


def test_completing_an_operation_of_a_shared_key_keeps_the_lease_and_its_fence(bank, sent) -> None:
    job = _claimed_job()
    with job.finishing():
        pass
    assert Lease.objects.get(key=KEY).fence == job.fence


def test_a_failed_write_inside_finishing_completes_nothing(bank, sent) -> None:
    job = _claimed_job()
    with pytest.raises(RuntimeError, match="write failed"), job.finishing():
        Bank.objects.create(id="half-written")
        raise RuntimeError("write failed")
    assert not Bank.objects.filter(id="half-written").exists()
    assert Operation.objects.get(id=job.operation.id).status == PROCESSING
    assert job.finished is False
