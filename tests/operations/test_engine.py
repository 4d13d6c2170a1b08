"""``operations.engine``: running one operation in process (lock, claim, handler, finish, hand
the key on), the wall timeout, the hooks, and the beat entry points."""

from __future__ import annotations

import dataclasses
import time
import uuid
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from operations import engine, registry
from operations.actions import operation_cancel
from operations.engine import operation_execute, recover
from operations.errors import FenceLost, OperationFailure
from operations.hooks import call_on_cancelled
from operations.jobs import Job
from operations.leases import operation_claim
from operations.models import CANCELLED, COMPLETED, FAILED, PENDING, Operation
from operations.queue import operation_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank_id() -> str:
    return "b1"


# --- the engine in process ---------------------------------------------------------------------


class _Recorder:
    operation_type = "test.inproc"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.failures: list[tuple[str, bool]] = []
        self.raise_exc: Exception | None = None

    def run(self, job: Job) -> None:
        self.calls.append(job.id)
        if self.raise_exc is not None:
            raise self.raise_exc

    def on_attempt_failed(self, job: Job, exc: Exception, *, final: bool) -> None:
        self.failures.append((type(exc).__name__, final))


@pytest.fixture
def recorder():
    handler = _Recorder()
    registry.register(handler)
    yield handler
    registry.unregister(handler.operation_type)


def test_engine_runs_a_handler_and_completes_the_operation(bank, sent, recorder) -> None:
    op = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "completed"
    assert recorder.calls == [str(op.id)]
    assert Operation.objects.get(id=op.id).status == COMPLETED
    # A redelivered message finds nothing to do.
    assert operation_execute(operation_id=str(op.id), holder="t") == "skipped"
    assert recorder.calls == [str(op.id)]


def test_engine_records_failure_and_calls_the_attempt_hook(bank, sent, recorder, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    recorder.raise_exc = ValueError("nope")
    op = operation_submit(bank_id="b1", operation_type="test.inproc").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    failed = Operation.objects.get(id=op.id)
    assert failed.status == FAILED and "ValueError: nope" in failed.error_message
    assert recorder.failures == [("ValueError", True)]


def test_engine_ends_a_superseded_job_cancelled(bank, sent, recorder) -> None:
    op = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    recorder.raise_exc = FenceLost("bumped")
    assert operation_execute(operation_id=str(op.id), holder="t") == "superseded"
    done = Operation.objects.get(id=op.id)
    assert done.status == CANCELLED and "superseded" in done.error_message


def test_engine_leaves_the_operation_pending_while_its_key_lock_is_held(
    bank, sent, recorder
) -> None:
    from operations.locks import key_lock

    op = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="held").operation
    lock = key_lock("held")
    assert lock.acquire(blocking=False)
    try:
        assert operation_execute(operation_id=str(op.id), holder="t") == "locked"
        assert Operation.objects.get(id=op.id).status == PENDING
    finally:
        lock.release()
    assert operation_execute(operation_id=str(op.id), holder="t") == "completed"


def test_engine_fails_an_operation_without_handler_without_retries(bank, sent) -> None:
    op = operation_submit(bank_id="b1", operation_type="no.such.type").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    assert "no handler" in Operation.objects.get(id=op.id).error_message


def test_engine_dispatches_the_next_pending_operation_of_the_key_after_finishing(
    bank, sent, recorder
) -> None:
    first = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    operation_claim(operation_id=first.id, holder="x")  # pretend it is running
    second = operation_submit(bank_id="b1", operation_type="test.inproc",
                              dedupe_key="k").operation
    Operation.objects.filter(id=first.id).update(status=COMPLETED)
    sent.clear()
    assert operation_execute(operation_id=str(second.id), holder="t") == "completed"
    third = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    assert str(third.id) in sent


def test_recover_calls_the_attempt_hook_with_worker_lost(bank, sent, recorder, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=1)
    op = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    operation_claim(operation_id=op.id, holder="x")
    Operation.objects.filter(id=op.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    recover()
    assert recorder.failures == [("WorkerLost", False)]


# --- wall timeout -------------------------------------------------------------------------------


@pytest.fixture
def test_job_handler(db):
    import operations.testing_handlers as testing_handlers

    testing_handlers.ensure_tables()
    return testing_handlers


def test_job_past_its_wall_timeout_is_a_failed_retryable_attempt(bank, sent, test_job_handler,
                                                                 settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=1)
    op = operation_submit(bank_id="b1", operation_type="test.job",
                          payload={"sleep": 30, "wall": 0.3}).operation
    started = timezone.now()
    assert operation_execute(operation_id=str(op.id), holder="t") == "retrying"
    # Cut at 0.3 s, not run to its end at 30 s.
    assert (timezone.now() - started).total_seconds() < 10
    after = Operation.objects.get(id=op.id)
    assert after.status == PENDING and after.retry_count == 1
    assert "wall timeout of 0.3s exceeded" in after.error_message


def test_wall_timeout_does_not_cut_the_final_write(bank, sent, test_job_handler) -> None:
    op = operation_submit(bank_id="b1", operation_type="test.job",
                          payload={"finish_sleep": 0.6, "wall": 0.3, "effect": True}).operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "completed"
    assert Operation.objects.get(id=op.id).status == COMPLETED


# --- what a message finds ------------------------------------------------------------------------


def test_a_message_that_is_not_an_operation_id_is_invalid(bank, sent) -> None:
    assert operation_execute(operation_id="not-a-uuid", holder="t") == "invalid"


def test_a_message_for_an_unknown_operation_is_skipped(bank, sent) -> None:
    assert operation_execute(operation_id=str(uuid.uuid4()), holder="t") == "skipped"


def test_an_unreachable_lock_leaves_the_operation_pending_for_recovery(
    bank, sent, recorder, monkeypatch
) -> None:
    class NoRedis:
        def __init__(self, key: str) -> None:
            self.key = key

        def acquire(self, blocking: bool = False, token: str | None = None) -> bool:
            raise redis.ConnectionError("redis down")

    monkeypatch.setattr(engine, "key_lock", NoRedis)
    op = operation_submit(bank_id="b1", operation_type="test.inproc", dedupe_key="k").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "lock-unavailable"
    assert recorder.calls == []
    assert Operation.objects.get(id=op.id).status == PENDING


def test_an_operation_of_its_own_key_hands_nothing_on(bank, sent, recorder) -> None:
    op = operation_submit(bank_id="b1", operation_type="test.inproc").operation
    sent.clear()
    assert operation_execute(operation_id=str(op.id), holder="t") == "completed"
    assert sent == []


# --- how an attempt ends --------------------------------------------------------------------------


def test_a_non_retryable_operation_failure_fails_at_once_with_its_message_and_details(
    bank, sent, recorder, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3)
    recorder.raise_exc = OperationFailure("no such model", retryable=False,
                                          details={"failure_reason": "gone"})
    op = operation_submit(bank_id="b1", operation_type="test.inproc").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    failed = Operation.objects.get(id=op.id)
    assert failed.status == FAILED and failed.error_message == "no such model"
    assert failed.details == {"failure_reason": "gone"}
    assert recorder.failures == [("OperationFailure", True)]


def test_a_retryable_failure_below_the_cap_is_retrying(bank, sent, recorder, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=1,
                                             worker_retry_backoff_seconds=0.0)
    recorder.raise_exc = RuntimeError("flaky")
    op = operation_submit(bank_id="b1", operation_type="test.inproc").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "retrying"
    assert recorder.failures == [("RuntimeError", False)]


def test_a_failing_hook_does_not_undo_the_recorded_failure(bank, sent, recorder, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)

    def broken_hook(job: Job, exc: Exception, *, final: bool) -> None:
        raise RuntimeError("hook broke")

    recorder.on_attempt_failed = broken_hook  # type: ignore[method-assign]
    recorder.raise_exc = ValueError("nope")
    op = operation_submit(bank_id="b1", operation_type="test.inproc").operation
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    assert Operation.objects.get(id=op.id).status == FAILED


class _Sleeper:
    """Sleeps past a wall timeout given as a method of the job."""

    operation_type = "test.sleeper"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def wall_timeout_seconds(self, job: Job) -> float:
        self.asked.append(job.id)
        return float(job.payload["wall"])

    def run(self, job: Job) -> None:
        time.sleep(30)


@pytest.fixture
def sleeper():
    handler = _Sleeper()
    registry.register(handler)
    yield handler
    registry.unregister(handler.operation_type)


def test_a_wall_timeout_given_as_a_method_of_the_job_bounds_the_handler(
    bank, sent, sleeper, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    op = operation_submit(bank_id="b1", operation_type="test.sleeper",
                          payload={"wall": 0.2}).operation
    started = time.monotonic()
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    assert time.monotonic() - started < 10  # cut at 0.2 s, not slept to 30 s
    assert sleeper.asked == [str(op.id)]
    assert "wall timeout of 0.2s exceeded" in Operation.objects.get(id=op.id).error_message


# --- hooks outside a running job ------------------------------------------------------------------


class _Cancellable:
    operation_type = "test.cancellable"

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def run(self, job: Job) -> None:
        pass

    def on_cancelled(self, job: Job) -> None:
        self.cancelled.append(job.id)


@pytest.fixture
def cancellable():
    handler = _Cancellable()
    registry.register(handler)
    yield handler
    registry.unregister(handler.operation_type)


def test_call_on_cancelled_runs_the_handler_s_hook_for_that_operation(
    bank, sent, cancellable
) -> None:
    op = operation_submit(bank_id="b1", operation_type="test.cancellable").operation
    operation_cancel(bank_id="b1", operation_id=op.id)
    assert Operation.objects.get(id=op.id).status == CANCELLED
    call_on_cancelled(operation_id=op.id)
    assert cancellable.cancelled == [str(op.id)]


def test_call_on_cancelled_of_an_unknown_operation_or_type_does_nothing(
    bank, sent, cancellable
) -> None:
    call_on_cancelled(operation_id=uuid.uuid4())
    op = operation_submit(bank_id="b1", operation_type="no.such.type").operation
    call_on_cancelled(operation_id=op.id)
    assert cancellable.cancelled == []
