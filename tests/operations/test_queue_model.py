"""The queue's invariants under random sequences of submit / claim / fail / complete / cancel /
release / recover, checked against a plain-Python model after every step (hypothesis)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hindsight.banks.models import Bank
from operations.actions import operation_cancel
from operations.jobs import Job
from operations.leases import BUSY, operation_claim, operation_record_failure
from operations.models import CANCELLED, COMPLETED, FAILED, PENDING, PROCESSING, Operation
from operations.queue import operation_release, operation_submit
from operations.recovery import operations_recover

KEYS = ("k1", "k2")
MAX_RETRIES = 1

# Claims and failures weigh more, so retry chains reach the cap within a short sequence.
action = st.tuples(
    st.sampled_from(["submit", "submit", "claim", "claim", "claim", "fail", "fail", "fail",
                     "complete", "cancel", "release", "crash"]),
    st.sampled_from(KEYS),
    st.booleans(),
    st.booleans(),
)


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _one(rows: list[Operation], key: str, status: str) -> Operation | None:
    matching = [op for op in rows if op.dedupe_key == key and op.status == status]
    assert len(matching) <= 1, f"{len(matching)} {status} operations for {key}"
    return matching[0] if matching else None


@pytest.mark.django_db
@hsettings(max_examples=150, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(action, min_size=1, max_size=25))
# Always-tried sequences: a retry chain up to the cap and past it; a manual request over a
# parked one; a failure handing its retry to a queued follower; a crash with a follower.
@example(steps=[("submit", "k1", False, False), ("claim", "k1", False, False),
                ("fail", "k1", True, False), ("claim", "k1", False, False),
                ("fail", "k1", True, False), ("claim", "k1", False, False)])
@example(steps=[("submit", "k1", True, True), ("submit", "k1", False, False),
                ("claim", "k1", False, False)])
@example(steps=[("submit", "k2", False, False), ("claim", "k2", False, False),
                ("submit", "k2", True, True), ("fail", "k2", True, False),
                ("claim", "k2", False, False), ("release", "k2", False, False),
                ("claim", "k2", False, False), ("fail", "k2", True, False)])
@example(steps=[("submit", "k1", False, False), ("claim", "k1", False, False),
                ("submit", "k1", True, False), ("crash", "k1", False, False),
                ("claim", "k1", False, False), ("complete", "k1", False, False)])
def test_queue_invariants_hold_for_any_sequence_of_actions(steps, settings, sent) -> None:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, worker_max_retries=MAX_RETRIES, worker_retry_backoff_seconds=0.0,
        recovery_threshold_seconds=30.0)
    Operation.objects.all().delete()
    Bank.objects.get_or_create(id="hb")
    # Every row, read once after each step: the invariants are checked on it, and it is the
    # state the next step starts from (nothing else writes in between).
    rows = list(Operation.objects.all())

    for step in steps:
        kind, key = step[0], step[1]
        pending_before = _one(rows, key, PENDING)
        processing_before = _one(rows, key, PROCESSING)

        if kind == "submit":
            automatic, parked = step[2], step[3]
            not_before = _db_now() + timedelta(hours=1) if parked else None
            result = operation_submit(bank_id="hb", operation_type="t", dedupe_key=key,
                                      automatic=automatic, not_before=not_before)
            op = result.operation
            assert op.status == PENDING and op.dedupe_key == key
            if pending_before is not None:
                # Folds into the queued one, never into the running one.
                assert not result.created and op.id == pending_before.id
                if not automatic:
                    assert op.automatic is False and op.next_retry_at is None
                elif pending_before.next_retry_at is not None:
                    assert op.next_retry_at == pending_before.next_retry_at  # stays parked
            else:
                assert result.created
                assert (processing_before is None) or op.id != processing_before.id
                assert (op.next_retry_at is not None) == (automatic and parked)

        elif kind == "claim" and pending_before is not None:
            claimed = operation_claim(operation_id=pending_before.id, holder="h")
            if pending_before.is_parked:
                assert claimed is None  # parked: not claimable, whatever runs
            elif processing_before is not None:
                assert claimed == BUSY
            else:
                assert isinstance(claimed, Operation) and claimed.status == PROCESSING

        elif kind == "fail" and processing_before is not None:
            retryable = step[2]
            record = operation_record_failure(operation_id=processing_before.id,
                                              fence=processing_before.fence, message="x",
                                              retryable=retryable)
            assert record is not None
            should_retry = retryable and processing_before.retry_count < MAX_RETRIES
            assert record.final is (not should_retry)
            after = Operation.objects.get(id=processing_before.id)
            if should_retry and pending_before is not None:
                assert after.status == FAILED and record.retried_as == pending_before.id
                follower = Operation.objects.get(id=pending_before.id)
                assert follower.retry_count >= processing_before.retry_count + 1
            elif should_retry:
                assert after.status == PENDING
                assert after.retry_count == processing_before.retry_count + 1
            else:
                assert after.status == FAILED

        elif kind == "complete" and processing_before is not None:
            job = Job(processing_before, fence=processing_before.fence, key=key)
            with job.finishing():
                pass
            assert Operation.objects.get(id=processing_before.id).status == COMPLETED

        elif kind == "cancel" and pending_before is not None:
            operation_cancel(bank_id="hb", operation_id=pending_before.id)
            assert Operation.objects.get(id=pending_before.id).status == CANCELLED

        elif kind == "release" and pending_before is not None:
            assert operation_release(operation_id=pending_before.id)
            assert Operation.objects.get(id=pending_before.id).next_retry_at is None

        elif kind == "crash" and processing_before is not None:
            Operation.objects.filter(id=processing_before.id).update(
                heartbeat_at=_db_now() - timedelta(seconds=31))
            report = operations_recover()
            assert processing_before.id in [r.operation.id for r in report.recovered]
            assert _one(list(Operation.objects.all()), key, PROCESSING) is None

        # Invariants after every step, for every key.
        rows = list(Operation.objects.all())
        for k in KEYS:
            _one(rows, k, PENDING)
            _one(rows, k, PROCESSING)
        for op in rows:
            assert op.retry_count <= MAX_RETRIES
            if op.status in (COMPLETED, FAILED, CANCELLED):
                assert op.completed_at is not None
            if op.status == PROCESSING:
                assert op.fence >= 1
