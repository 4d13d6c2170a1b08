"""The engine with real Celery worker processes: completion, serialization per key with the
lock TTL shorter than the job, fencing, retries, parking, crash recovery."""

from __future__ import annotations

import time
import uuid

import pytest

from hindsight.banks.services import bank_ensure
from operations.models import COMPLETED, Operation
from tests.operations.helpers import job_log, statuses, submit_job
from tests.workers import wait_until

pytestmark = pytest.mark.integration


def _all_done(op_ids, status=COMPLETED):
    def check():
        current = statuses(op_ids)
        return len(current) == len(op_ids) and all(s == status for s in current.values())
    return check


def _everything_had_its_chance(beat) -> None:
    """Until whatever could still run has had its chance, however slow the machine: two beat
    runs from now (a parked attempt that was due is released, a stale claim recovered), then a
    job submitted after them completed (the worker's one slot took every message before it)."""
    beat.wait_ticks(2)
    sentinel = submit_job(key=f"sentinel-{uuid.uuid4().hex[:8]}")
    wait_until(_all_done([sentinel.id]), timeout=30, message="the sentinel job")


def test_worker_runs_a_submitted_job_to_completion(worker_factory) -> None:
    worker_factory()
    op = submit_job(key="k1", effect=True)
    wait_until(_all_done([op.id]), timeout=20, message="completion")
    done = Operation.objects.get(id=op.id)
    assert done.fence == 1 and done.completed_at is not None
    assert [r["outcome"] for r in job_log([op.id])] == ["completed"]


def test_jobs_of_one_key_never_overlap_while_jobs_of_different_keys_do(
    worker_factory, settings
) -> None:
    from operations.dispatch import operation_send
    from tests.workers import apply_test_settings

    # The lock's TTL (1 s) is shorter than every job (1.5 s): only the heartbeat keeps it.
    apply_test_settings(settings, lock_ttl_seconds=1.0, heartbeat_seconds=0.3)
    worker_factory(concurrency=2)
    worker_factory(concurrency=2)
    keys = ["ka", "kb", "kc"]
    submitted: dict[str, set] = {key: set() for key in keys}
    # A request joins its key's pending operation; the next one is queued once that is claimed.
    # Three of each key: two hand-overs from a running job to the next, however slow the machine.
    deadline = time.monotonic() + 30
    while min(len(ids) for ids in submitted.values()) < 3:
        assert time.monotonic() < deadline, "the jobs of a key were never claimed one by one"
        for key in keys:
            op = submit_job(key=key, sleep=1.5)
            submitted[key].add(op.id)
            operation_send(operation_id=op.id)  # duplicate messages: CAS must absorb them
        time.sleep(0.3)
    ops = [op_id for ids in submitted.values() for op_id in ids]
    wait_until(_all_done(ops), timeout=60, message="every job completed")
    log = job_log(ops)
    assert {r["outcome"] for r in log} == {"completed"}
    assert len(log) == len(ops)  # each operation ran exactly once
    by_key: dict[str, list] = {}
    for row in log:
        by_key.setdefault(row["key"], []).append(row)
    assert set(by_key) == set(keys)
    for key, rows in by_key.items():
        assert len(rows) >= 2, f"{key} ran only {len(rows)} job(s)"
        rows.sort(key=lambda r: r["started_at"])
        for earlier, later in zip(rows, rows[1:]):
            assert earlier["ended_at"] <= later["started_at"], f"jobs of {key} overlapped"
    overlaps_across_keys = any(
        a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]
        for a in log for b in log if a["key"] != b["key"]
    )
    assert overlaps_across_keys, "jobs of different keys never ran in parallel"
    fences = [r["fence"] for r in sorted(by_key["ka"], key=lambda r: r["started_at"])]
    assert fences == sorted(fences) and len(set(fences)) == len(fences)


def test_heartbeat_keeps_the_lock_alive_past_its_ttl(worker_factory, settings) -> None:
    from operations.locks import LOCK_PREFIX, redis_client
    from tests.workers import apply_test_settings

    apply_test_settings(settings, lock_ttl_seconds=1.0, heartbeat_seconds=0.3)
    worker_factory(concurrency=2)  # the workers of the test above, as they are
    op = submit_job(key="long", sleep=3.0)
    wait_until(lambda: job_log([op.id]), timeout=20, message="job start")
    time.sleep(2.0)  # twice the TTL
    assert redis_client().pttl(LOCK_PREFIX + "long") > 0
    running = Operation.objects.get(id=op.id)
    assert running.status == "processing"
    started = job_log([op.id])[0]["started_at"]
    assert (running.heartbeat_at - started).total_seconds() > 1.0
    wait_until(_all_done([op.id]), timeout=20, message="completion")
    # Released at the end: just after the completion commits (the row reads completed first).
    wait_until(lambda: redis_client().exists(LOCK_PREFIX + "long") == 0, timeout=10,
               interval=0.05, message="the lock released after the completion")


def test_job_whose_lease_was_taken_over_is_refused_at_write_time(worker_factory) -> None:
    from operations.leases import lease_bump
    from tests.operations.helpers import effects

    worker_factory()
    op = submit_job(key="fenced", sleep=1.5, effect=True)
    wait_until(lambda: job_log([op.id]), timeout=20, message="job start")
    lease_bump(key="fenced")
    wait_until(_all_done([op.id], status="cancelled"), timeout=20, message="superseded")
    assert effects([op.id]) == []
    assert "superseded" in Operation.objects.get(id=op.id).error_message
    assert [r["outcome"] for r in job_log([op.id])] == ["fence_lost"]


def test_always_failing_job_reaches_the_handler_one_plus_max_retries_times(
    worker_factory, beat, settings
) -> None:
    from tests.workers import apply_test_settings

    apply_test_settings(settings, worker_max_retries=3, worker_retry_backoff_seconds=0.5,
                        worker_retry_backoff_max_seconds=10.0)
    worker_factory()
    op = submit_job(key="doomed", fail="always")
    wait_until(_all_done([op.id], status="failed"), timeout=40, message="final failure")
    _everything_had_its_chance(beat)  # nothing more may run
    attempts = job_log([op.id])
    assert [r["attempt"] for r in attempts] == [1, 2, 3, 4]
    failed = Operation.objects.get(id=op.id)
    assert failed.retry_count == 3 and "attempt 4" in failed.error_message
    starts = [r["started_at"] for r in attempts]
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:])]
    assert gaps[0] >= 0.25 and gaps[2] >= 1.0 and gaps[2] > gaps[0], gaps


def test_non_retryable_failure_reaches_the_handler_once(worker_factory, beat) -> None:
    worker_factory()
    op = submit_job(fail="always", retryable=False)
    wait_until(_all_done([op.id], status="failed"), timeout=20, message="failure")
    _everything_had_its_chance(beat)
    assert len(job_log([op.id])) == 1


def test_parked_job_runs_after_its_time_and_a_released_one_at_once(
    worker_factory, beat
) -> None:
    from datetime import timedelta

    from django.db import connection

    from operations.queue import operation_release, operation_submit
    from operations.testing_handlers import TEST_JOB

    worker_factory()
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        now = cursor.fetchone()[0]
    due = now + timedelta(seconds=1)
    bank_ensure(bank_id="ops-bank")
    parked = operation_submit(bank_id="ops-bank", operation_type=TEST_JOB, dedupe_key="p1",
                              automatic=True, not_before=due).operation
    far = operation_submit(bank_id="ops-bank", operation_type=TEST_JOB, dedupe_key="p2",
                           automatic=True, not_before=now + timedelta(hours=1)).operation
    assert parked.next_retry_at == due
    _everything_had_its_chance(beat)
    assert job_log([far.id]) == []
    assert all(r["started_at"] >= due for r in job_log([parked.id]))  # not before its time
    assert operation_release(operation_id=far.id)
    wait_until(_all_done([parked.id, far.id]), timeout=20, message="both ran")
    log = {str(r["op_id"]): r for r in job_log([parked.id, far.id])}
    assert log[str(parked.id)]["started_at"] >= due
    assert log[str(far.id)]["started_at"] < now + timedelta(seconds=10)
    assert Operation.objects.get(id=parked.id).retry_count == 0  # parking is not an attempt


def test_killed_worker_job_is_recovered_and_its_effect_written_exactly_once(
    scripted_llm, worker_factory, beat
) -> None:
    from fakes.llm_server import Reply
    from tests.operations.helpers import effects

    held, hold = Reply.hold(Reply.text("first answer"))
    scripted_llm.script(held, Reply.text("second answer"))
    doomed = worker_factory(env=scripted_llm.env)
    op = submit_job(key="crash", llm="think", effect=True)
    assert hold.wait_received(timeout=30), "the job never reached the held LLM request"
    doomed.kill()  # SIGKILL, mid-request, inside the job
    hold.release()
    assert Operation.objects.get(id=op.id).status == "processing"
    worker_factory(env=scripted_llm.env)
    wait_until(_all_done([op.id]), timeout=40, message="recovered completion")
    done = Operation.objects.get(id=op.id)
    assert done.retry_count == 1
    assert len(effects([op.id])) == 1
    attempts = job_log([op.id])
    assert [r["attempt"] for r in attempts] == [1, 2]
    assert attempts[0]["ended_at"] is None and attempts[1]["outcome"] == "completed"
    assert attempts[1]["fence"] > attempts[0]["fence"]
    assert len(scripted_llm.requests) == 2


def test_real_celery_beat_releases_a_parked_job_through_the_declared_schedule(
    worker_factory,
) -> None:
    from datetime import timedelta

    from django.db import connection

    from operations.queue import operation_submit
    from operations.schedules import ensure_beat_schedules
    from operations.testing_handlers import TEST_JOB

    ensure_beat_schedules()  # the rows now carry this test's 0.5 s → 1 s interval
    worker_factory()
    # Beat with the settings `make run` and the compose file give it (django-celery-beat only).
    worker_factory.start_beat({"DJANGO_SETTINGS_MODULE": "hindsight.project.settings_beat"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        now = cursor.fetchone()[0]
    due = now + timedelta(seconds=1)
    bank_ensure(bank_id="ops-bank")
    op = operation_submit(bank_id="ops-bank", operation_type=TEST_JOB, dedupe_key="beat",
                          automatic=True, not_before=due).operation
    wait_until(_all_done([op.id]), timeout=30, message="beat released the parked job")
    assert job_log([op.id])[0]["started_at"] >= due


def test_database_keeps_one_running_job_per_key_when_redis_loses_the_lock(
    worker_factory,
) -> None:
    from operations.locks import LOCK_PREFIX, redis_client

    # A configuration whose queue this one worker alone consumes: the refusal is read from its
    # log (the two-slot workers of the overlap test above share a queue, and either could take
    # the second job).
    worker = worker_factory(concurrency=2)
    first = submit_job(key="guard", sleep=2.0)
    wait_until(lambda: job_log([first.id]), timeout=20, message="first job start")
    assert redis_client().delete(LOCK_PREFIX + "guard") == 1  # Redis "forgot" the lock
    second = submit_job(key="guard", sleep=0.1)
    # Its worker got the Redis lock, but the database refused the claim (the index).
    wait_until(lambda: "'busy'" in worker.log(), timeout=20, message="the claim refused")
    assert Operation.objects.get(id=second.id).status == "pending"
    assert "succeeded" in worker.log()
    wait_until(_all_done([first.id, second.id]), timeout=30, message="both completed")
    a, b = sorted(job_log([first.id, second.id]), key=lambda r: r["started_at"])
    assert a["op_id"] == first.id and a["ended_at"] <= b["started_at"]


def test_wall_timeout_ends_a_job_in_a_real_worker_as_a_recorded_failure(
    worker_factory, settings
) -> None:
    from tests.workers import apply_test_settings

    apply_test_settings(settings, worker_max_retries=0)
    worker = worker_factory()
    op = submit_job(key="slow", sleep=10, wall=0.5)
    wait_until(_all_done([op.id], status="failed"), timeout=15, message="timed out")
    failed = Operation.objects.get(id=op.id)
    assert "wall timeout of 0.5s exceeded" in failed.error_message
    assert (failed.completed_at - failed.created_at).total_seconds() < 5
    assert worker.alive()  # a recorded failure, not a crash
    follow_up = submit_job(key="slow")
    wait_until(_all_done([follow_up.id]), timeout=15, message="the worker carries on")


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_worker_session_idle_inside_a_transaction_is_ended_and_frees_the_key_lease(
    worker_factory, settings, pool
) -> None:
    # A worker cut off mid-transaction looks like this to PostgreSQL: a session idle inside a
    # transaction holding the key's lease row (here the test job sleeps inside its fenced
    # completion until the test wakes it). Past the sweep's silence threshold the server ends
    # it, so the sweep and the model's edits are not held behind it (hindsight.project.celery).
    from django.db import connection, transaction

    from operations.locks import redis_client
    from tests.workers import apply_test_settings

    apply_test_settings(settings, worker_max_retries=0)
    threshold = settings.HINDSIGHT.recovery_threshold_seconds
    # The configurations of the wall-timeout tests' workers (a threads worker has four slots
    # there): they serve this test as they are.
    worker = worker_factory(pool=pool, concurrency=4 if pool == "threads" else 1)
    wake = f"test-job-wake:{uuid.uuid4().hex}"
    # It sleeps until the test wakes it (the cap only bounds a test that failed before).
    op = submit_job(key="idle-tx", finish_sleep=60, finish_wake=wake, effect=True)
    wait_until(lambda: job_log([op.id]), timeout=20, message="the job's start")
    key = Operation.objects.get(id=op.id).dedupe_key

    def lease_free() -> bool:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '100ms'")
            try:
                cursor.execute("SELECT 1 FROM operations_lease WHERE key = %s FOR UPDATE", [key])
            except Exception:  # noqa: BLE001 - still locked
                return False
            return True

    started = time.monotonic()
    wait_until(lambda: not lease_free(), timeout=10, message="the completion holding the lease")
    wait_until(lease_free, timeout=threshold + 4, interval=0.2,
               message="the idle session ended and its lease lock freed")
    freed_after = time.monotonic() - started
    assert freed_after < threshold + 4  # by the server: the job still sleeps
    redis_client().set(wake, 1, ex=60)  # it wakes to a connection the server closed
    wait_until(_all_done([op.id], status="failed"), timeout=30, message="the attempt failed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_job_effect WHERE op_id = %s", [op.id])
        assert cursor.fetchone()[0] == 0  # its transaction never committed
    assert worker.alive()
