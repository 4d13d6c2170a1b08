"""Fault paths of the engine, in process and bounded: a message delivered twice at once, a
worker killed between its commit and its lock release, Redis failing at release, the recovery
sweep racing a slow but alive worker, a heartbeat whose connection broke, parked operations
(never an attempt), and the retry merge rule in both directions (manual/automatic)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from datetime import timedelta

import pytest
import redis
from django.db import connection

from hindsight.banks.models import Bank
from operations import engine, registry
from operations.engine import _Heartbeat, operation_execute
from operations.jobs import Job
from operations.leases import operation_claim, operation_heartbeat, operation_record_failure
from operations.locks import key_lock
from operations.models import COMPLETED, FAILED, PENDING, Lease, Operation
from operations.queue import operation_submit, operations_release_due
from operations.recovery import operations_recover
from tests.workers import wait_until

KEY = "fp:key"
WAIT = 10.0


@pytest.fixture(autouse=True)
def _free_key_lock():
    """A test that leaves the key's Redis lock held (a "dead" worker) must not leak it."""
    from operations.locks import LOCK_PREFIX, redis_client

    redis_client().delete(LOCK_PREFIX + KEY)
    yield
    redis_client().delete(LOCK_PREFIX + KEY)


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


class Recorder:
    """A handler that records each attempt; optional sleep, a hook run inside the attempt."""

    operation_type = "test.faults"

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int, int]] = []
        self.failures: list[tuple[str, bool]] = []
        self.cancelled: list[str] = []
        self.sleep = 0.0
        self.during: object = None  # callable(job) run before finishing
        self.lock = threading.Lock()

    def run(self, job: Job) -> None:
        with self.lock:
            self.attempts.append((job.id, job.attempt, job.fence))
        if self.sleep:
            time.sleep(self.sleep)
        if callable(self.during):
            self.during(job)
        with job.finishing():
            Bank.objects.get_or_create(id=f"effect-{job.id}-{job.fence}")

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        self.failures.append((type(exc).__name__, final))

    def on_cancelled(self, job: Job) -> None:
        self.cancelled.append(job.id)


@pytest.fixture
def recorder():
    handler = Recorder()
    registry.register(handler)
    yield handler
    registry.unregister(handler.operation_type)


def _submit(key: str | None = KEY, **kwargs) -> Operation:
    return operation_submit(bank_id="fp", operation_type="test.faults", dedupe_key=key,
                            **kwargs).operation


def _effects(op: Operation) -> int:
    return Bank.objects.filter(id__startswith=f"effect-{op.id}-").count()


def _threads_running(*targets):
    results: dict[int, object] = {}

    def wrap(index, fn):
        try:
            results[index] = fn()
        except BaseException as exc:  # noqa: BLE001
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=wrap, args=(i, fn), daemon=True)
               for i, fn in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    return [results[i] for i in range(len(targets))]


# --- the same message twice at once -----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_same_message_delivered_twice_at_once_runs_the_job_once(sent, recorder) -> None:
    Bank.objects.create(id="fp")
    recorder.sleep = 0.5
    op = _submit()
    outcomes = _threads_running(
        lambda: operation_execute(operation_id=str(op.id), holder="w1"),
        lambda: operation_execute(operation_id=str(op.id), holder="w2"),
    )
    assert sorted(outcomes) in (["completed", "locked"], ["completed", "skipped"])
    assert len(recorder.attempts) == 1 and _effects(op) == 1
    assert Operation.objects.get(id=op.id).status == COMPLETED


@pytest.mark.django_db(transaction=True)
def test_without_the_redis_lock_the_database_claim_alone_runs_a_double_delivery_once(
    sent, recorder, monkeypatch
) -> None:
    # Redis lost the lock (restart, expiry): each delivery gets a lock of its own.
    counter = iter(range(1000))
    monkeypatch.setattr(engine, "key_lock", lambda key: key_lock(f"{key}:{next(counter)}"))
    Bank.objects.create(id="fp")
    recorder.sleep = 0.5
    op = _submit()
    outcomes = _threads_running(
        lambda: operation_execute(operation_id=str(op.id), holder="w1"),
        lambda: operation_execute(operation_id=str(op.id), holder="w2"),
    )
    assert sorted(outcomes) == ["completed", "skipped"]
    assert len(recorder.attempts) == 1 and _effects(op) == 1


# --- a worker killed between its commit and its lock release; Redis down at release ---------


@pytest.mark.django_db
def test_a_worker_killed_after_its_commit_holding_the_lock_delays_the_next_job_only_until_ttl(
    sent, recorder, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, lock_ttl_seconds=1.0,
                                             redispatch_after_seconds=5)
    Bank.objects.create(id="fp")
    first = _submit()
    claimed = operation_claim(operation_id=first.id, holder="dead")
    dead_lock = key_lock(KEY)
    assert dead_lock.acquire(blocking=False)
    with Job(claimed, fence=claimed.fence, key=KEY).finishing():
        pass  # committed; then SIGKILL: the lock is never released, nothing is handed on
    follower = _submit()
    assert operation_execute(operation_id=str(follower.id), holder="w") == "locked"
    assert Operation.objects.get(id=follower.id).status == PENDING
    # The message was consumed; recovery re-sends once it is old enough.
    Operation.objects.filter(id=follower.id).update(
        dispatched_at=_db_now() - timedelta(seconds=6))
    sent.clear()
    assert operations_recover().redispatched == [follower.id]
    time.sleep(1.2)  # the dead worker's lock expires with its TTL
    assert operation_execute(operation_id=str(follower.id), holder="w") == "completed"
    assert Operation.objects.get(id=first.id).status == COMPLETED
    # The first job's redelivered message (acks_late) finds it done.
    assert operation_execute(operation_id=str(first.id), holder="w") == "skipped"


@pytest.mark.django_db
def test_redis_failing_at_lock_release_loses_neither_the_completion_nor_the_hand_on(
    sent, recorder, monkeypatch
) -> None:
    Bank.objects.create(id="fp")
    real_lock = engine.key_lock

    class BrokenRelease:
        def __init__(self, key: str):
            self.inner = real_lock(key)

        def acquire(self, **kwargs):
            return self.inner.acquire(**kwargs)

        def extend(self, *args, **kwargs):
            return self.inner.extend(*args, **kwargs)

        def release(self):
            raise redis.ConnectionError("Redis went away")

    monkeypatch.setattr(engine, "key_lock", BrokenRelease)
    op = _submit()
    queued: list[Operation] = []
    recorder.during = lambda job: queued.append(_submit())
    sent.clear()
    assert operation_execute(operation_id=str(op.id), holder="w") == "completed"
    assert Operation.objects.get(id=op.id).status == COMPLETED
    [follower] = queued
    assert str(follower.id) in sent  # handed on despite the failed release


# --- the recovery sweep racing a slow but alive worker ----------------------------------------


@pytest.mark.django_db
def test_a_slow_worker_recovered_meanwhile_writes_nothing_and_counts_one_attempt(
    sent, recorder, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    Bank.objects.create(id="fp")
    op = _submit()

    def sweep_while_running(job: Job) -> None:
        # The worker is alive, but its heartbeat is late: the sweep takes the key over.
        Operation.objects.filter(id=job.id).update(heartbeat_at=_db_now() - timedelta(seconds=60))
        report = engine.recover()
        assert [r.operation.id for r in report.recovered] == [op.id]
        recorder.during = None

    recorder.during = sweep_while_running
    assert operation_execute(operation_id=str(op.id), holder="slow") == "superseded"
    back = Operation.objects.get(id=op.id)
    assert back.status == PENDING and back.retry_count == 1 and _effects(op) == 0
    assert recorder.failures == [("WorkerLost", False)]  # counted once, by the sweep
    assert recorder.cancelled == []  # the slow worker's end is not a second outcome
    assert operation_heartbeat(operation_id=op.id, fence=1, key=KEY) is False
    assert operation_execute(operation_id=str(op.id), holder="w") == "completed"
    assert [a[1] for a in recorder.attempts] == [1, 2]
    assert _effects(op) == 1 and Operation.objects.get(id=op.id).retry_count == 1


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_that_learns_its_job_was_recovered_stops_holding_the_key_lock(
    sent, settings, monkeypatch
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, lock_ttl_seconds=1.0,
                                             heartbeat_seconds=0.1,
                                             recovery_threshold_seconds=30)
    # The heartbeat's stamps are held at a gate while the job is made silent and recovered:
    # a stamp landing between the two (every 0.1 s) made the sweep find nothing (seen under
    # xdist load). The heartbeat still runs; only the moment of its next stamp is chosen.
    gate, parked = threading.Event(), threading.Event()
    gate.set()
    stamp = engine.operation_heartbeat
    stamped: list[bool] = []

    def gated_stamp(**kwargs):
        if not gate.is_set():
            parked.set()
            gate.wait()
        stamped.append(stamp(**kwargs))
        return stamped[-1]

    monkeypatch.setattr(engine, "operation_heartbeat", gated_stamp)
    Bank.objects.create(id="fp")
    op = operation_submit(bank_id="fp", operation_type="x", dedupe_key=KEY).operation
    claimed = operation_claim(operation_id=op.id, holder="slow")
    lock = key_lock(KEY)
    assert lock.acquire(blocking=False)
    beat = _Heartbeat(Job(claimed, fence=claimed.fence, key=KEY), lock)
    beat.start()
    try:
        wait_until(lambda: len(stamped) >= 2, WAIT, message="the heartbeat stamping")
        gate.clear()
        assert parked.wait(WAIT)  # no stamp in flight from here until the gate opens
        Operation.objects.filter(id=op.id).update(heartbeat_at=_db_now() - timedelta(seconds=60))
        # The heartbeat cannot send before the recovery commits: what is sent from here on is
        # the recovery's own two (sent, and on commit; they meet the held lock and are
        # consumed) and the heartbeat's retry, which may come before this thread looks again.
        already = len(sent)
        assert [r.operation.id for r in operations_recover().recovered] == [op.id]
        gate.set()
        # The retry must not wait for the doomed job to end (it never ends here: the gate
        # was its only wait): the lock goes, the retry is sent.
        wait_until(lambda: not key_lock(KEY).locked(), WAIT, message="the key lock let go")
        beat.join(WAIT)
        assert beat.lease_lost and sent[already:] == [str(op.id)] * 3
    finally:
        gate.set()
        beat.stop()
        with contextlib.suppress(Exception):
            lock.release()


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_whose_connection_broke_reconnects_and_keeps_stamping(
    sent, settings, caplog
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, lock_ttl_seconds=2.0,
                                             heartbeat_seconds=0.1)
    Bank.objects.create(id="fp")
    op = operation_submit(bank_id="fp", operation_type="x", dedupe_key=KEY).operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    lock = key_lock(KEY)
    assert lock.acquire(blocking=False)
    beat = _Heartbeat(Job(claimed, fence=claimed.fence, key=KEY), lock)
    beat.start()
    try:
        # A stamp committed: the heartbeat thread holds a connection of its own to break.
        wait_until(lambda: Operation.objects.get(id=op.id).heartbeat_at > claimed.heartbeat_at,
                   WAIT, message="a first stamp")
        with connection.cursor() as cursor:
            # Every other client connection of this database: the heartbeat thread's.
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            )
        # The broken connection is really met (a stamp failed on it), and then got over.
        wait_until(lambda: any("cannot stamp" in r.getMessage() for r in caplog.records),
                   WAIT, message="a stamp failing on the broken connection")
        broke_at = _db_now()
        wait_until(lambda: Operation.objects.get(id=op.id).heartbeat_at > broke_at, WAIT,
                   message="the heartbeat coming back")
    finally:
        beat.stop()
        lock.release()


# --- parking is never an attempt --------------------------------------------------------------


@pytest.mark.django_db
def test_a_parked_operation_delivered_early_is_not_an_attempt_and_takes_no_fence(
    sent, recorder
) -> None:
    Bank.objects.create(id="fp")
    op = _submit(automatic=True, not_before=_db_now() + timedelta(hours=1))
    assert operation_execute(operation_id=str(op.id), holder="w") == "skipped"
    assert operation_claim(operation_id=op.id, holder="w") is None
    parked = Operation.objects.get(id=op.id)
    assert parked.status == PENDING and parked.retry_count == 0 and parked.fence == 0
    assert not Lease.objects.filter(key=KEY).exists()  # the refused claim's fence rolled back
    assert recorder.attempts == []
    Operation.objects.filter(id=op.id).update(next_retry_at=_db_now() - timedelta(seconds=1))
    assert operations_release_due() == [op.id]
    assert operation_execute(operation_id=str(op.id), holder="w") == "completed"
    assert recorder.attempts == [(str(op.id), 1, 1)]
    assert Operation.objects.get(id=op.id).retry_count == 0


@pytest.mark.django_db
def test_a_retry_waiting_out_its_backoff_counts_the_failure_once_not_the_wait(
    sent, recorder, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3,
                                             worker_retry_backoff_seconds=600.0)
    Bank.objects.create(id="fp")
    op = _submit()
    claimed = operation_claim(operation_id=op.id, holder="w")
    operation_record_failure(operation_id=op.id, fence=claimed.fence, message="boom")
    for _ in range(3):  # early deliveries while it waits
        assert operation_execute(operation_id=str(op.id), holder="w") == "skipped"
    waiting = Operation.objects.get(id=op.id)
    assert waiting.retry_count == 1 and waiting.fence == claimed.fence
    assert Lease.objects.get(key=KEY).fence == claimed.fence


# --- the merge rule, both directions ----------------------------------------------------------


def _fail_running_with_follower(*, running_automatic: bool, follower_automatic: bool,
                                follower_parked: bool, recovery: bool = False):
    running = _submit(automatic=running_automatic)
    claimed = operation_claim(operation_id=running.id, holder="w")
    park = _db_now() + timedelta(hours=1)
    follower = _submit(automatic=follower_automatic,
                       not_before=park if follower_parked else None)
    if recovery:
        Operation.objects.filter(id=running.id).update(
            heartbeat_at=_db_now() - timedelta(seconds=120))
        [record] = operations_recover().recovered
    else:
        record = operation_record_failure(operation_id=running.id, fence=claimed.fence,
                                          message="boom")
    assert record.retried_as == follower.id
    assert Operation.objects.get(id=running.id).status == FAILED
    return Operation.objects.get(id=follower.id), park


@pytest.fixture
def merge_settings(settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=3,
                                             worker_retry_backoff_seconds=60.0,
                                             recovery_threshold_seconds=30)


@pytest.mark.django_db
def test_a_manual_refresh_failing_onto_a_parked_automatic_follower_retries_after_the_backoff(
    sent, recorder, merge_settings
) -> None:
    Bank.objects.create(id="fp")
    before = _db_now()
    carried, park = _fail_running_with_follower(running_automatic=False,
                                                follower_automatic=True, follower_parked=True)
    # The follower now carries a manual request's retry: the rate floor no longer holds it.
    assert carried.automatic is False and carried.retry_count == 1
    assert before + timedelta(seconds=29) <= carried.next_retry_at
    assert carried.next_retry_at <= before + timedelta(seconds=61)
    assert carried.next_retry_at < park


@pytest.mark.django_db
def test_an_automatic_refresh_failing_onto_a_parked_automatic_follower_keeps_the_park(
    sent, recorder, merge_settings
) -> None:
    Bank.objects.create(id="fp")
    carried, park = _fail_running_with_follower(running_automatic=True,
                                                follower_automatic=True, follower_parked=True)
    assert carried.automatic is True and carried.retry_count == 1
    assert carried.next_retry_at == park  # the later of the park and the backoff


@pytest.mark.django_db
def test_an_automatic_refresh_failing_onto_a_manual_follower_makes_it_wait_the_backoff(
    sent, recorder, merge_settings
) -> None:
    Bank.objects.create(id="fp")
    before = _db_now()
    carried, _ = _fail_running_with_follower(running_automatic=True,
                                             follower_automatic=False, follower_parked=False)
    assert carried.automatic is False and carried.retry_count == 1
    assert before + timedelta(seconds=29) <= carried.next_retry_at
    assert carried.next_retry_at <= before + timedelta(seconds=61)


@pytest.mark.django_db
def test_a_recovered_manual_job_with_a_parked_automatic_follower_releases_it_now(
    sent, recorder, merge_settings
) -> None:
    Bank.objects.create(id="fp")
    sent.clear()
    carried, _ = _fail_running_with_follower(running_automatic=False, follower_automatic=True,
                                             follower_parked=True, recovery=True)
    assert carried.automatic is False and carried.retry_count == 1
    assert carried.next_retry_at is None
    assert str(carried.id) in sent


# --- a broker that accepts connections but never answers --------------------------------------


@pytest.fixture
def silent_broker():
    """A TCP server that accepts every connection and never answers (a hung Redis)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.django_db
def test_a_publish_to_a_broker_that_never_answers_gives_up_in_seconds_for_recovery(
    silent_broker, settings
) -> None:
    from operations import dispatch
    from tests.workers import use_broker

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, publish_retries=0)
    Bank.objects.create(id="fp")
    op = Operation.objects.create(bank_id="fp", operation_type="x", dedupe_key=KEY)
    outcome: dict = {}

    def publish() -> None:
        started = time.monotonic()
        try:
            outcome["sent"] = dispatch.operation_send(operation_id=op.id)
        finally:
            outcome["took"] = time.monotonic() - started
            connection.close()

    with use_broker(settings, silent_broker):
        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        thread.join(40)
        hung = thread.is_alive()
    # Without socket timeouts the publish (an API request's on-commit, a finishing job's
    # hand-on, the recovery sweep) waited for an answer forever.
    assert not hung, "the publish is still waiting on the silent broker"
    assert outcome["sent"] is False and outcome["took"] < 20, outcome
    assert Operation.objects.get(id=op.id).dispatched_at is None  # recovery re-sends it


@pytest.mark.django_db
def test_claiming_a_keyless_operation_fences_its_canonical_lease_key_however_the_id_is_spelt(
    sent,
) -> None:
    Bank.objects.create(id="fp")
    op = operation_submit(bank_id="fp", operation_type="x").operation
    claimed = operation_claim(operation_id=str(op.id).upper(), holder="w")
    assert isinstance(claimed, Operation) and claimed.fence == 1
    assert Lease.objects.get(key=claimed.lease_key).fence == 1
    with Job(claimed, fence=claimed.fence, key=claimed.lease_key).finishing():
        pass  # the job's own fence check finds the fence the claim took
    assert Operation.objects.get(id=op.id).status == COMPLETED


# --- a worker lost after an edit superseded its job --------------------------------------------


@pytest.mark.django_db
def test_a_job_superseded_by_an_edit_then_lost_with_its_process_ends_cancelled_and_hands_on(
    sent, recorder
) -> None:
    from operations.leases import lease_bump

    Bank.objects.create(id="fp")
    running = _submit()
    assert isinstance(operation_claim(operation_id=running.id, holder="host:1:t"), Operation)
    follower = _submit()  # the edit's follow-up, queued behind the running job
    lease_bump(key=KEY)  # the edit: the running job may no longer write
    sent.clear()
    assert engine.operation_worker_lost(operation_id=str(running.id), holder="host:2:t",
                                        cause="another process") is None
    assert Operation.objects.get(id=running.id).status == "processing"  # not that holder's job
    record = engine.operation_worker_lost(operation_id=str(running.id), holder="host:1:t",
                                          cause="pool process 1 exited")
    assert record is not None and record.superseded
    done = Operation.objects.get(id=running.id)
    assert done.status == "cancelled" and "superseded" in done.error_message
    assert done.retry_count == 0 and recorder.failures == []  # not an attempt
    assert recorder.cancelled == [str(running.id)]
    queued = Operation.objects.get(id=follower.id)
    assert queued.status == PENDING and queued.retry_count == 0  # nothing pushed onto it
    assert sent == [str(follower.id)]  # handed on at once, not left to the sweep
    assert operation_execute(operation_id=str(follower.id), holder="w") == "completed"


@pytest.mark.django_db
def test_the_sweep_ends_a_silent_job_an_edit_superseded_cancelled_not_as_an_attempt(
    sent, recorder, settings
) -> None:
    from operations.leases import lease_bump

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, recovery_threshold_seconds=30)
    Bank.objects.create(id="fp")
    running = _submit()
    assert isinstance(operation_claim(operation_id=running.id, holder="gone:1:t"), Operation)
    follower = _submit()
    lease_bump(key=KEY)
    Operation.objects.filter(id=running.id).update(
        heartbeat_at=_db_now() - timedelta(seconds=60))
    sent.clear()
    report = engine.recover()
    assert [(r.operation.id, r.superseded) for r in report.recovered] == [(running.id, True)]
    assert Operation.objects.get(id=running.id).status == "cancelled"
    assert recorder.failures == [] and recorder.cancelled == [str(running.id)]
    assert Operation.objects.get(id=follower.id).retry_count == 0
    assert str(follower.id) in sent


@pytest.mark.django_db
def test_a_threads_workers_peers_find_its_job_an_edit_superseded_before_it_stopped_beating(
    recorder,
) -> None:
    from operations import liveness
    from operations.leases import lease_bump

    Bank.objects.create(id="fp")
    running = _submit()
    assert isinstance(operation_claim(operation_id=running.id, holder="gone:7:t"), Operation)
    lease_bump(key=KEY)  # an edit: the holder of the last claim stays named
    assert liveness.held_by(["gone:7"]) == [(str(running.id), "gone:7:t")]
    assert liveness.held_by(["other:7"]) == []
