"""One global lock order (lease row → model row → operation rows), checked with real concurrent
transactions: every path that meets another on the same key queues behind it instead of
deadlocking. Each contender runs in a thread with its own database connection; a gate (a
finishing job, or a transaction holding the lease row) lines them up on the lease before it
lets go, which is exactly where an opposite order would close a cycle."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from hindsight.banks.models import Bank
from operations.jobs import Job
from operations.leases import operation_claim, operation_heartbeat, operation_record_failure
from operations.models import COMPLETED, FAILED, PENDING, PROCESSING, Lease, Operation
from operations.queue import operation_submit
from operations.recovery import operations_recover

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "mm:lo:m1"
WAIT = 5.0  # every wait in this file is bounded


@pytest.fixture
def bank_id() -> str:
    return "lo"


@pytest.fixture
def bank(bank, sent) -> Bank:  # the shared bank, with its publishes recorded
    return bank


class Contender(threading.Thread):
    """Runs ``fn`` on its own connection; keeps its backend pid, result or exception."""

    def __init__(self, name: str, fn: Callable[[], Any]):
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.pid: int | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.started_query = threading.Event()

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.started_query.set()
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc
        finally:
            self.started_query.set()
            connection.close()


def _waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def _settle(contenders: list[Contender]) -> None:
    """Until every contender either waits on a row lock or is done (bounded)."""
    deadline = time.monotonic() + WAIT
    for c in contenders:
        assert c.started_query.wait(WAIT)
    while time.monotonic() < deadline:
        if all(not c.is_alive() or (c.pid and _waiting_on_a_lock(c.pid)) for c in contenders):
            return
        time.sleep(0.02)
    raise AssertionError("contenders neither blocked nor finished")


def _join(*threads: threading.Thread) -> None:
    for t in threads:
        t.join(WAIT * 2)
        assert not t.is_alive(), f"{t.name} is stuck"


def _no_errors(*contenders: Contender) -> None:
    errors = {c.name: repr(c.error) for c in contenders if c.error is not None}
    assert errors == {}, errors


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _claimed(**kwargs) -> Operation:
    op = operation_submit(bank_id="lo", operation_type="x", dedupe_key=KEY, **kwargs).operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    assert isinstance(claimed, Operation)
    return claimed


def _silent(op: Operation, seconds: float = 120) -> None:
    Operation.objects.filter(id=op.id).update(heartbeat_at=_db_now() - timedelta(seconds=seconds))


class _FinishingJob(threading.Thread):
    """A job inside ``job.finishing()``: holds the lease row until told to complete."""

    def __init__(self, op: Operation):
        super().__init__(name="finishing-job", daemon=True)
        self.job = Job(op, fence=op.fence, key=op.lease_key)
        self.inside = threading.Event()
        self.go = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.job.finishing():
                Bank.objects.create(id="written-by-finishing-job")
                self.inside.set()
                assert self.go.wait(WAIT)
        except BaseException as exc:  # noqa: BLE001
            self.error = exc
        finally:
            self.inside.set()
            connection.close()


def test_recovery_sweep_and_a_finishing_job_of_the_same_operation_never_deadlock(
    bank, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    op = _claimed()
    _silent(op)  # late heartbeat: the sweep considers it lost while it is in fact finishing
    finishing = _FinishingJob(op)
    finishing.start()
    assert finishing.inside.wait(WAIT)
    sweep = Contender("recovery", operations_recover)
    sweep.start()
    _settle([sweep])
    finishing.go.set()
    _join(finishing, sweep)
    assert finishing.error is None, repr(finishing.error)
    _no_errors(sweep)
    # The job that reached its fenced completion keeps it; the sweep left the key alone.
    assert sweep.result.recovered == []
    done = Operation.objects.get(id=op.id)
    assert done.status == COMPLETED and done.retry_count == 0
    assert Bank.objects.filter(id="written-by-finishing-job").exists()
    assert Lease.objects.get(key=KEY).fence == op.fence


def test_a_heartbeat_landing_during_the_jobs_own_completion_never_deadlocks(bank) -> None:
    op = _claimed()
    finishing = _FinishingJob(op)
    finishing.start()
    assert finishing.inside.wait(WAIT)
    beat = Contender(
        "heartbeat",
        lambda: operation_heartbeat(operation_id=op.id, fence=op.fence, key=KEY),
    )
    beat.start()
    _settle([beat])
    finishing.go.set()
    _join(finishing, beat)
    assert finishing.error is None, repr(finishing.error)
    _no_errors(beat)
    assert Operation.objects.get(id=op.id).status == COMPLETED


class _LeaseGate(threading.Thread):
    """A transaction holding the key's lease row (as an edit's ``lease_bump`` does), then
    rolling back, so the contenders queued behind it all start from the same state."""

    def __init__(self, key: str):
        super().__init__(name="lease-gate", daemon=True)
        self.key = key
        self.holding = threading.Event()
        self.go = threading.Event()

    def run(self) -> None:
        try:
            with transaction.atomic():
                list(Lease.objects.select_for_update().filter(key=self.key))
                self.holding.set()
                self.go.wait(WAIT)
                transaction.set_rollback(True)
        finally:
            self.holding.set()
            connection.close()


def _race_behind_the_lease(*contenders: Contender) -> None:
    gate = _LeaseGate(KEY)
    gate.start()
    assert gate.holding.wait(WAIT)
    for c in contenders:  # one at a time: the order they queue on the lease is theirs
        c.start()
        _settle([c])
    gate.go.set()
    _join(gate, *contenders)
    _no_errors(*contenders)


def test_a_failing_job_merging_into_its_follower_and_a_claim_of_that_follower_never_deadlock(
    bank, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3,
                                             worker_retry_backoff_seconds=0.0)
    running = _claimed()
    follower = operation_submit(bank_id="lo", operation_type="x", dedupe_key=KEY).operation
    failing = Contender(
        "record-failure",
        lambda: operation_record_failure(operation_id=running.id, fence=running.fence,
                                         message="boom"),
    )
    claim = Contender("claim-follower",
                      lambda: operation_claim(operation_id=follower.id, holder="w2"))
    _race_behind_the_lease(failing, claim)
    assert Operation.objects.get(id=running.id).status == FAILED
    # Whichever came first, the follower carries the retry (pending) or already runs it.
    carried = Operation.objects.get(id=follower.id)
    assert carried.status in (PENDING, PROCESSING)


def test_a_recovery_sweep_skips_a_key_whose_lease_is_held_and_recovers_it_on_the_next_sweep(
    bank, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    running = _claimed()
    _silent(running)
    follower = operation_submit(bank_id="lo", operation_type="x", dedupe_key=KEY).operation
    claim = Contender("claim-follower",
                      lambda: operation_claim(operation_id=follower.id, holder="w2"))
    sweep = Contender("recovery", operations_recover)
    # The claim queues on the lease; the sweep, finding the lease held, passes the key by
    # (it never waits on a lease while holding an operation row).
    _race_behind_the_lease(claim, sweep)
    assert sweep.result.recovered == []
    assert claim.result == "busy"  # the silent job still counts as running
    assert Operation.objects.get(id=running.id).status == PROCESSING
    again = operations_recover()
    assert [r.operation.id for r in again.recovered] == [running.id]
    assert Operation.objects.get(id=running.id).status == FAILED
    carried = Operation.objects.get(id=follower.id)
    assert carried.status == PENDING and carried.retry_count == 1


def test_recovery_and_a_heartbeat_of_the_same_job_never_deadlock(bank, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    op = _claimed()
    _silent(op)
    sweep = Contender("recovery", operations_recover)
    beat = Contender(
        "heartbeat",
        lambda: operation_heartbeat(operation_id=op.id, fence=op.fence, key=KEY),
    )
    _race_behind_the_lease(sweep, beat)
    after = Operation.objects.get(id=op.id)
    # Either the heartbeat landed first (still running) or the sweep did (back to pending);
    # never both: a recovered job's heartbeat is refused.
    if after.status == PROCESSING:
        assert beat.result is True and sweep.result.recovered == []
    else:
        assert after.status == PENDING and after.retry_count == 1 and beat.result is False
