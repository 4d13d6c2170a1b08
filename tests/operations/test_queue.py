"""The queue's database rules, in process: coalescing, folding, parking, claim, fencing,
failure and the follower merge, release on database time, recovery, cancel/retry/delete."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from hindsight.banks.models import Bank
from hindsight.infra.errors import Conflict
from operations.actions import operation_cancel, operation_delete, operation_retry
from operations.leases import BUSY, backoff_seconds, operation_claim, operation_record_failure
from operations.models import CANCELLED, FAILED, PENDING, PROCESSING, Lease, Operation
from operations.queue import (
    operation_release,
    operation_submit,
    operations_cancel_parked,
    operations_release_due,
)
from operations.recovery import operations_recover

pytestmark = pytest.mark.django_db

KEY = "mm:b1:m1"


@pytest.fixture
def bank_id() -> str:
    return "b1"


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _submit(**kwargs):
    defaults = dict(bank_id="b1", operation_type="refresh_mental_model", dedupe_key=KEY,
                    mental_model_id="m1")
    return operation_submit(**{**defaults, **kwargs})


# --- coalescing and folding -------------------------------------------------------------------


def test_second_submit_for_a_key_returns_the_pending_operation(bank, sent) -> None:
    first = _submit()
    second = _submit()
    assert first.created and not second.created
    assert second.operation.id == first.operation.id
    assert Operation.objects.filter(dedupe_key=KEY, status=PENDING).count() == 1
    assert sent == [str(first.operation.id)]  # the fold sent nothing more


def test_raw_second_pending_insert_for_a_key_raises_integrity_error(bank) -> None:
    Operation.objects.create(bank=bank, operation_type="x", dedupe_key=KEY)
    with pytest.raises(IntegrityError), transaction.atomic():
        Operation.objects.create(bank=bank, operation_type="x", dedupe_key=KEY)


def test_second_processing_operation_for_a_key_raises_integrity_error(bank) -> None:
    Operation.objects.create(bank=bank, operation_type="x", dedupe_key=KEY, status=PROCESSING)
    with pytest.raises(IntegrityError), transaction.atomic():
        Operation.objects.create(bank=bank, operation_type="x", dedupe_key=KEY,
                                 status=PROCESSING)


def test_submit_never_folds_into_a_processing_operation(bank, sent) -> None:
    running = _submit().operation
    assert operation_claim(operation_id=running.id, holder="t") is not None
    queued = _submit()
    assert queued.created and queued.operation.id != running.id
    assert queued.operation.status == PENDING


def test_fold_merges_payload_key_by_key_non_null_values_winning(bank, sent) -> None:
    _submit(payload={"mode": None, "a": 1, "b": 2})
    folded = _submit(payload={"mode": "full", "a": None, "c": 3}).operation
    assert folded.payload == {"mode": "full", "a": 1, "b": 2, "c": 3}


def test_automatic_submit_with_future_not_before_is_parked_and_not_sent(bank, sent) -> None:
    later = _db_now() + timedelta(hours=1)
    result = _submit(automatic=True, not_before=later)
    assert result.operation.next_retry_at == later
    assert result.operation.is_parked
    assert sent == []


def test_manual_submit_ignores_not_before(bank, sent) -> None:
    result = _submit(automatic=False, not_before=_db_now() + timedelta(hours=1))
    assert result.operation.next_retry_at is None
    assert sent == [str(result.operation.id)]


def test_automatic_request_folding_into_parked_one_leaves_it_parked(bank, sent) -> None:
    later = _db_now() + timedelta(hours=1)
    parked = _submit(automatic=True, not_before=later).operation
    again = _submit(automatic=True, not_before=later + timedelta(hours=1)).operation
    assert again.id == parked.id and again.next_retry_at == later and again.automatic
    assert sent == []


def test_manual_request_folding_into_parked_automatic_makes_it_manual_and_sends_it(
    bank, sent
) -> None:
    parked = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1)).operation
    folded = _submit(automatic=False, payload={"mode": "full"}).operation
    assert folded.id == parked.id
    assert folded.automatic is False
    assert folded.next_retry_at is None
    assert folded.payload["mode"] == "full"
    assert sent == [str(parked.id)]


def test_submit_with_operation_id_is_idempotent(bank, sent) -> None:
    op_id = uuid.uuid4()
    first = operation_submit(bank_id="b1", operation_type="retain", operation_id=op_id,
                             payload={"items": []})
    again = operation_submit(bank_id="b1", operation_type="retain", operation_id=op_id,
                             payload={"items": []})
    assert first.created and not again.created and again.operation.id == op_id
    with pytest.raises(Conflict):
        operation_submit(bank_id="b1", operation_type="consolidation", operation_id=op_id)


# --- claim and fencing --------------------------------------------------------------------------


def test_claim_moves_pending_to_processing_and_increments_the_lease_fence(bank, sent) -> None:
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w1")
    assert claimed.status == PROCESSING and claimed.fence == 1
    assert Lease.objects.get(key=KEY).fence == 1
    assert operation_claim(operation_id=op.id, holder="w2") is None  # CAS: already taken
    nxt = _submit().operation
    assert operation_claim(operation_id=nxt.id, holder="w3") == BUSY  # index: one running


def test_claim_refuses_a_parked_operation(bank, sent) -> None:
    op = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1)).operation
    assert operation_claim(operation_id=op.id, holder="w") is None
    assert Operation.objects.get(id=op.id).status == PENDING


# --- failures, retries and the merge rule -----------------------------------------------------


def test_failed_attempt_goes_back_to_pending_with_backoff(bank, sent, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=2,
                                             worker_retry_backoff_seconds=100.0)
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    before = _db_now()
    record = operation_record_failure(operation_id=op.id, fence=claimed.fence, message="boom")
    assert record is not None and record.final is False and record.retried_as == op.id
    again = Operation.objects.get(id=op.id)
    assert again.status == PENDING and again.retry_count == 1 and again.error_message == "boom"
    assert before + timedelta(seconds=49) < again.next_retry_at < before + timedelta(seconds=101)


def test_failure_at_the_retry_cap_is_final(bank, sent, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=1,
                                             worker_retry_backoff_seconds=0.0)
    op = _submit().operation
    for attempt in range(2):
        claimed = operation_claim(operation_id=op.id, holder="w")
        record = operation_record_failure(operation_id=op.id, fence=claimed.fence, message="x")
    assert record.final is True
    final = Operation.objects.get(id=op.id)
    assert final.status == FAILED and final.retry_count == 1 and final.completed_at


def test_non_retryable_failure_is_final_at_once(bank, sent) -> None:
    op = _submit().operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    record = operation_record_failure(operation_id=op.id, fence=claimed.fence, message="bad",
                                      retryable=False)
    assert record.final and Operation.objects.get(id=op.id).status == FAILED


def test_failed_attempt_with_a_queued_follower_hands_the_retry_to_the_follower(
    bank, sent, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3,
                                             worker_retry_backoff_seconds=60.0)
    running = _submit(automatic=False, payload={"a": 1}).operation
    claimed = operation_claim(operation_id=running.id, holder="w")
    follower = _submit(automatic=True, payload={"b": 2}).operation
    before = _db_now()
    record = operation_record_failure(operation_id=running.id, fence=claimed.fence,
                                      message="boom")
    assert record.final is False and record.retried_as == follower.id
    closed = Operation.objects.get(id=running.id)
    assert closed.status == FAILED
    assert str(follower.id) in closed.error_message
    carried = Operation.objects.get(id=follower.id)
    assert carried.status == PENDING
    assert carried.retry_count == 1
    assert carried.automatic is False  # manual wins
    assert carried.payload == {"a": 1, "b": 2}
    assert carried.next_retry_at >= before + timedelta(seconds=29)


def test_backoff_grows_and_is_capped(settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_retry_backoff_seconds=10,
                                             worker_retry_backoff_max_seconds=50)
    for _ in range(50):
        delays = [backoff_seconds(n) for n in range(6)]
        assert delays == sorted(delays)
        assert 5 <= delays[0] <= 10 and 10 <= delays[1] <= 20 and 20 <= delays[2] <= 40
        assert all(d <= 50 for d in delays) and delays[5] >= 25


# --- parking and release on database time -------------------------------------------------------


def test_release_due_sends_exactly_the_due_parked_operations(bank, sent) -> None:
    now = _db_now()
    ops = {}
    for name, offset in (("past", -5), ("just", -0.001), ("future", 3600)):
        ops[name] = operation_submit(
            bank_id="b1", operation_type="x", dedupe_key=f"k:{name}", automatic=True,
            not_before=now + timedelta(hours=1),
        ).operation
        Operation.objects.filter(id=ops[name].id).update(
            next_retry_at=now + timedelta(seconds=offset))
    processing = _submit().operation
    operation_claim(operation_id=processing.id, holder="w")
    sent.clear()
    released = operations_release_due()
    assert sorted(map(str, released)) == sorted([str(ops["past"].id), str(ops["just"].id)])
    assert sorted(sent) == sorted(map(str, released))
    assert Operation.objects.get(id=ops["past"].id).next_retry_at is None
    assert Operation.objects.get(id=ops["future"].id).next_retry_at is not None
    assert operations_release_due() == []


def test_release_clears_the_park_and_sends_now(bank, sent) -> None:
    op = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1)).operation
    assert operation_release(operation_id=op.id) is True
    assert Operation.objects.get(id=op.id).next_retry_at is None
    assert sent == [str(op.id)]


def test_cancel_parked_cancels_only_parked_automatic_operations_of_the_key(bank, sent) -> None:
    parked = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1)).operation
    other = operation_submit(bank_id="b1", operation_type="x", dedupe_key="other",
                             automatic=False).operation
    assert operations_cancel_parked(dedupe_key=KEY) == [parked.id]
    assert Operation.objects.get(id=parked.id).status == CANCELLED
    assert Operation.objects.get(id=other.id).status == PENDING
    manual = _submit(automatic=False).operation
    assert operations_cancel_parked(dedupe_key=KEY) == []
    assert Operation.objects.get(id=manual.id).status == PENDING


# --- recovery -----------------------------------------------------------------------------------


def test_recover_returns_silent_processing_operations_to_pending_counting_an_attempt(
    bank, sent, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    silent = _submit().operation
    claimed = operation_claim(operation_id=silent.id, holder="w")
    alive = operation_submit(bank_id="b1", operation_type="x", dedupe_key="alive").operation
    operation_claim(operation_id=alive.id, holder="w")
    Operation.objects.filter(id=silent.id).update(heartbeat_at=_db_now() - timedelta(seconds=31))
    report = operations_recover()
    assert [r.operation.id for r in report.recovered] == [silent.id]
    back = Operation.objects.get(id=silent.id)
    assert back.status == PENDING and back.retry_count == 1 and back.next_retry_at is None
    assert "worker lost" in back.error_message
    assert Lease.objects.get(key=KEY).fence == claimed.fence + 1  # the silent worker is fenced out
    assert Operation.objects.get(id=alive.id).status == PROCESSING
    assert str(silent.id) in sent


def test_recover_with_a_queued_follower_applies_the_merge_rule(bank, sent, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    silent = _submit().operation
    operation_claim(operation_id=silent.id, holder="w")
    follower = _submit().operation
    Operation.objects.filter(id=silent.id).update(heartbeat_at=_db_now() - timedelta(seconds=60))
    operations_recover()
    assert Operation.objects.get(id=silent.id).status == FAILED
    carried = Operation.objects.get(id=follower.id)
    assert carried.status == PENDING and carried.retry_count == 1


def test_recover_resends_lost_pending_messages_but_not_those_waiting_behind_a_running_job(
    bank, sent, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, redispatch_after_seconds=10)
    lost = operation_submit(bank_id="b1", operation_type="x", dedupe_key="lost").operation
    fresh = operation_submit(bank_id="b1", operation_type="x", dedupe_key="fresh").operation
    running = _submit().operation
    operation_claim(operation_id=running.id, holder="w")
    waiting = _submit().operation
    old = _db_now() - timedelta(seconds=11)
    Operation.objects.filter(id__in=[lost.id, waiting.id]).update(dispatched_at=old)
    Operation.objects.filter(id=fresh.id).update(dispatched_at=_db_now())
    sent.clear()
    report = operations_recover()
    assert report.redispatched == [lost.id]


# --- API actions ------------------------------------------------------------------------------


def test_cancel_only_pending_operations(bank, sent) -> None:
    op = _submit().operation
    assert operation_cancel(bank_id="b1", operation_id=op.id).status == CANCELLED
    with pytest.raises(Conflict):
        operation_cancel(bank_id="b1", operation_id=op.id)


def test_retry_requeues_failed_and_cancelled_and_refuses_others(bank, sent) -> None:
    op = _submit().operation
    with pytest.raises(Conflict):
        operation_retry(bank_id="b1", operation_id=op.id)
    operation_cancel(bank_id="b1", operation_id=op.id)
    again, _ = operation_retry(bank_id="b1", operation_id=op.id)
    assert again.id == op.id and again.status == PENDING and again.retry_count == 0


def test_retry_of_a_failed_operation_folds_into_a_pending_one_of_its_key(bank, sent) -> None:
    op = _submit().operation
    operation_cancel(bank_id="b1", operation_id=op.id)
    pending = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1)).operation
    runs, message = operation_retry(bank_id="b1", operation_id=op.id)
    assert runs.id == pending.id and runs.next_retry_at is None and not runs.automatic
    assert str(pending.id) in message


def test_delete_removes_only_finished_operations(bank, sent) -> None:
    op = _submit().operation
    with pytest.raises(Conflict):
        operation_delete(bank_id="b1", operation_id=op.id)
    operation_cancel(bank_id="b1", operation_id=op.id)
    operation_delete(bank_id="b1", operation_id=op.id)
    assert not Operation.objects.filter(id=op.id).exists()


def test_task_options_make_delivery_at_least_once(settings) -> None:
    from hindsight.project.celery import app
    from operations.tasks import recover, release_due, run_operation

    assert run_operation.name == "operations.run"
    assert run_operation.acks_late is True and run_operation.reject_on_worker_lost is True
    assert {release_due.name, recover.name} == {"operations.release_due", "operations.recover"}
    assert app.conf.worker_prefetch_multiplier == 1
    cfg = settings.HINDSIGHT
    assert (cfg.reflect_wall_timeout_seconds < app.conf.task_soft_time_limit
            < app.conf.task_time_limit < app.conf.broker_transport_options["visibility_timeout"])


@pytest.mark.django_db(transaction=True)
def test_a_fresh_submit_is_one_statement_and_a_fold_one_short_transaction(sent) -> None:
    Bank.objects.create(id="b1")
    with CaptureQueriesContext(connection) as fresh:
        first = operation_submit(bank_id="b1", operation_type="x", dedupe_key=KEY).operation
    with CaptureQueriesContext(connection) as folded:
        again = operation_submit(bank_id="b1", operation_type="x", dedupe_key=KEY).operation
    assert again.id == first.id and sent == [str(first.id)]
    # The insert (RETURNING the row) in autocommit: no BEGIN/COMMIT, no re-read.
    assert [q["sql"].split()[0] for q in fresh.captured_queries] == ["INSERT"]
    # Conflict: the insert did nothing, then the pending row is locked and folded into.
    assert [q["sql"].split()[0] for q in folded.captured_queries] == [
        "INSERT", "BEGIN", "SELECT", "UPDATE", "SELECT", "COMMIT"]
