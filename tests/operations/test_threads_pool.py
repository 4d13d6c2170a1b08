"""Every guarantee of the engine in a ``threads``-pool worker (the default pool of `make run`):
many jobs in flight in one process, each in a thread.

One running job per key (racing in one process and across two), the wall timeout firing in one
slot while its neighbours carry on, a killed worker process recovered by its peer's liveness
watch within seconds (no beat, slow paths off), fencing refusing a stale write, heartbeats kept
for slots that wait on the LLM, and the database connections of the slots bounded by the pool.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from django.db import connection

from fakes.extraction import InFlight
from fakes.llm_server import Reply
from operations.leases import lease_bump
from operations.liveness import BEACON_STALE_SECONDS
from operations.models import CANCELLED, COMPLETED, PROCESSING, Operation
from tests.operations.helpers import effects, job_log, statuses, submit_job
from tests.workers import apply_test_settings, wait_until

pytestmark = pytest.mark.integration

THREADS = "threads"


def _all(op_ids, status=COMPLETED):
    def check():
        current = statuses(op_ids)
        return len(current) == len(op_ids) and all(s == status for s in current.values())
    return check


def _assert_no_overlap_per_key(log) -> None:
    by_key: dict[str, list] = {}
    for row in log:
        by_key.setdefault(row["key"], []).append(row)
    for key, rows in by_key.items():
        rows.sort(key=lambda r: r["started_at"])
        for earlier, later in zip(rows, rows[1:]):
            assert earlier["ended_at"] <= later["started_at"], f"jobs of {key} overlapped"
        fences = [r["fence"] for r in rows]
        assert fences == sorted(set(fences)), f"fences of {key} not strictly increasing"


def test_jobs_of_one_key_never_overlap_in_one_process_or_across_two(
    worker_factory, settings
) -> None:
    from operations.dispatch import operation_send

    # The lock's TTL (1 s) is shorter than every job: only the heartbeat keeps it.
    apply_test_settings(settings, lock_ttl_seconds=1.0, heartbeat_seconds=0.3)
    first = worker_factory(concurrency=16, pool=THREADS)
    second = worker_factory(concurrency=16, pool=THREADS)
    keys = ["one", "two"]
    submitted = []
    for _ in range(6):
        for key in keys:
            op = submit_job(key=key, sleep=0.6)
            submitted.append(op.id)
            for _ in range(3):  # duplicate messages: many slots race for the same job
                operation_send(operation_id=op.id)
        spread = submit_job(key=None, sleep=0.6)  # keys of their own: free to run in parallel
        submitted.append(spread.id)
        time.sleep(0.2)
    submitted = list(dict.fromkeys(submitted))  # a request behind a pending one joins it
    wait_until(_all(submitted), timeout=90, message="every job completed")
    log = job_log(submitted)
    assert len(log) == len(submitted)  # each operation ran exactly once
    _assert_no_overlap_per_key([r for r in log if r["key"] in keys])
    pids = {r["pid"] for r in log}
    assert pids == {first.pid, second.pid}, "both processes took jobs"
    in_one = [r for r in log if r["pid"] == first.pid]
    assert any(a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]
               for a in in_one for b in in_one if a is not b), "no two jobs ran at once in a process"


def test_the_wall_timeout_ends_one_slot_while_the_others_run_on(worker_factory, settings) -> None:
    apply_test_settings(settings, worker_max_retries=0)
    worker = worker_factory(concurrency=4, pool=THREADS)
    neighbours = [submit_job(key=f"n{i}", sleep=3.0, effect=True) for i in range(3)]
    wait_until(lambda: len(job_log([n.id for n in neighbours])) == 3, timeout=20,
               message="the neighbours started")
    slow = submit_job(key="slow", sleep=30, wall=0.5)
    wait_until(_all([slow.id], status="failed"), timeout=15, message="the slot timed out")
    failed = Operation.objects.get(id=slow.id)
    assert "wall timeout of 0.5s exceeded" in failed.error_message
    assert (failed.completed_at - failed.created_at).total_seconds() < 6
    assert set(statuses([n.id for n in neighbours]).values()) <= {PROCESSING, COMPLETED}
    wait_until(_all([n.id for n in neighbours]), timeout=20, message="the neighbours completed")
    assert len(effects([n.id for n in neighbours])) == 3
    [record] = job_log([slow.id])
    assert record["pid"] == worker.pid and worker.alive()  # one slot failed, the process lives
    follow_up = submit_job(key="slow")
    wait_until(_all([follow_up.id]), timeout=15, message="the slot is free again")


def test_a_killed_threads_worker_is_recovered_by_its_peer_within_seconds(
    scripted_llm, worker_factory, settings
) -> None:
    # Far above the bound: a recovery inside it cannot be the sweep's (and no beat runs).
    apply_test_settings(settings, recovery_threshold_seconds=600.0,
                        redispatch_after_seconds=600.0, lock_ttl_seconds=20.0)
    held, hold = Reply.hold(Reply.text("first answer"))
    scripted_llm.script(held, Reply.text("second answer"))
    # Two alike, started side by side: the one that takes the job is killed, the other is its peer.
    workers = [worker_factory(concurrency=8, pool=THREADS, env=scripted_llm.env, wait=False)
               for _ in range(2)]
    for worker in workers:
        worker.wait_ready()
    op = submit_job(key="crash", llm="think", effect=True)
    assert hold.wait_received(timeout=30), "the job never reached the held LLM request"
    [first] = job_log([op.id])
    [doomed] = [w for w in workers if w.pid == first["pid"]]
    [peer] = [w for w in workers if w is not doomed]
    killed_at = time.monotonic()
    doomed.kill()  # SIGKILL: the whole process, every slot in it
    hold.release()
    bound = BEACON_STALE_SECONDS + 5.0

    def second_attempt():
        return next((r for r in job_log([op.id]) if r["attempt"] == 2), None)

    second = wait_until(second_attempt, timeout=bound, interval=0.05,
                        message="the recovered claim")
    elapsed = time.monotonic() - killed_at
    # Any live threads worker's watch may recover it (no beat runs, the sweep is off).
    assert elapsed < bound and second["pid"] != first["pid"] and second["fence"] > first["fence"]
    wait_until(_all([op.id]), timeout=20, message="completion")
    assert Operation.objects.get(id=op.id).retry_count == 1
    assert len(effects([op.id])) == 1
    assert peer.alive()
    print(f"\nkill -> recovered claim by the peer: {elapsed:.2f}s")


def test_a_killed_cpu_queue_worker_is_recovered_by_the_other_and_its_retry_routed_back(
    scripted_llm, worker_factory, settings
) -> None:
    # make run's two workers: one on the task queue, one on the CPU queue. Their watch over peers
    # is keyed by the task queue, which both have: the refresh worker recovers the killed CPU
    # worker's job, and the retry goes to the CPU queue again, never to the refresh worker.
    from operations.testing_handlers import TEST_CPU_JOB

    apply_test_settings(settings, recovery_threshold_seconds=600.0,
                        redispatch_after_seconds=600.0, lock_ttl_seconds=20.0)
    cpu_queue = f"{settings.HINDSIGHT.task_queue}.cpu"
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, cpu_queue=cpu_queue)
    held, hold = Reply.hold(Reply.text("first answer"))
    scripted_llm.script(held, Reply.text("second answer"))
    refresh_worker = worker_factory(concurrency=4, pool=THREADS, env=scripted_llm.env, wait=False)
    doomed = worker_factory(concurrency=4, pool=THREADS, env=scripted_llm.env, queue=cpu_queue,
                            wait=False)
    for worker in (refresh_worker, doomed):  # started side by side
        worker.wait_ready()
    op = submit_job(key="cpu-crash", operation_type=TEST_CPU_JOB, llm="think", effect=True)
    assert hold.wait_received(timeout=30), "the job never reached the held LLM request"
    [first] = job_log([op.id])
    assert first["pid"] == doomed.pid
    doomed.kill()
    hold.release()
    wait_until(lambda: Operation.objects.get(id=op.id).retry_count == 1,
               timeout=BEACON_STALE_SECONDS + 5.0, message="the refresh worker's recovery")
    # A retry sent to the task queue instead would be the refresh worker's (no other consumes
    # it): attempt 2's process tells where it went.
    again = worker_factory(concurrency=4, pool=THREADS, env=scripted_llm.env, queue=cpu_queue)
    wait_until(_all([op.id]), timeout=30, message="completion on the CPU queue's new worker")
    [second] = [r for r in job_log([op.id]) if r["attempt"] == 2]
    assert second["pid"] != refresh_worker.pid, "the retry reached the refresh worker's queue"
    assert second["pid"] == again.pid and second["fence"] > first["fence"]
    assert len(effects([op.id])) == 1 and refresh_worker.alive()


def test_fencing_refuses_the_write_of_a_slot_superseded_while_it_waited_on_the_llm(
    scripted_llm, worker_factory, settings
) -> None:
    held, hold = Reply.hold(Reply.text("late answer"))
    scripted_llm.script(held)
    worker_factory(concurrency=4, pool=THREADS, env=scripted_llm.env)
    op = submit_job(key="fenced", llm="think", effect=True)
    assert hold.wait_received(timeout=30)
    from django.db import transaction

    with transaction.atomic():
        lease_bump(key="fenced")  # what an edit does to the running job of its key
    hold.release()
    wait_until(_all([op.id], status=CANCELLED), timeout=20, message="the stale job cancelled")
    assert effects([op.id]) == []  # its write was refused
    assert [r["outcome"] for r in job_log([op.id])] == ["fence_lost"]


def _worker_connections(worker) -> int:
    """The worker's connections (``application_name`` names its node, ``name@host``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name LIKE %s", [f"hindsight-worker {worker.name}@%"])
        return int(cursor.fetchone()[0])


def test_slots_waiting_on_the_llm_keep_their_heartbeats_and_hold_no_connection(
    scripted_llm, worker_factory, beat, settings
) -> None:
    # A 2 s silence is recovered by the sweep (beat runs); the jobs wait on the LLM for 4 s.
    apply_test_settings(settings, recovery_threshold_seconds=2.0, lock_ttl_seconds=1.0,
                        heartbeat_seconds=0.3, redispatch_after_seconds=600.0)
    waiting = 12
    scripted_llm.script(*[Reply.delay(4.0, Reply.text(f"answer {i}")) for i in range(waiting)])
    worker = worker_factory(concurrency=waiting, pool=THREADS,
                            env={**scripted_llm.env, "HINDSIGHT_API_WORKER_DB_POOL_SIZE": "3"})
    ops = [submit_job(key=f"wait{i}", llm="think", effect=True) for i in range(waiting)]
    assert scripted_llm.wait_for_requests(waiting, timeout=30), "not every slot reached the LLM"
    peak = 0
    for _ in range(10):  # while all of them wait on the LLM
        peak = max(peak, _worker_connections(worker))
        time.sleep(0.2)
    assert 1 <= peak <= 3, f"{waiting} slots waiting on the LLM held {peak} database connections"
    assert statuses([o.id for o in ops]) == {str(o.id): PROCESSING for o in ops}
    wait_until(_all([o.id for o in ops]), timeout=40, message="every waiting job completed")
    assert {Operation.objects.get(id=o.id).retry_count for o in ops} == {0}  # none recovered
    assert len(effects([o.id for o in ops])) == waiting


def test_async_retains_extracting_in_threads_share_the_slots_pool_without_starving_it(
    scripted_llm, worker_factory, settings
) -> None:
    # Each retain extracts in threads that take their connections from the worker's pool. A
    # slot holding its own connection while it waited for its threads starved the pool: with
    # as many retains as connections, every thread waited for one until the pool's timeout
    # (60 s), and nothing else of the worker could claim a job meanwhile.
    from hindsight.banks.models import Bank
    from hindsight.banks.retaintypes import RetainItem
    from hindsight.banks.services import retain_submit_async

    answer = InFlight(0.3)
    scripted_llm.respond_with(answer)
    worker_factory(concurrency=4, pool=THREADS, env={
        **scripted_llm.env, "HINDSIGHT_API_WORKER_DB_POOL_SIZE": "2",
        "HINDSIGHT_API_RETAIN_EXTRACTION_CONCURRENCY": "3"})
    Bank.objects.create(id="starve", config={"enable_auto_consolidation": False})
    ops = [retain_submit_async(bank_id="starve", items=[
        RetainItem(content=f"retain {r} item {i}") for i in range(6)]).operation_id
        for r in range(3)]
    wait_until(_all(ops), timeout=30, message="every retain completed before the pool's timeout")
    assert {Operation.objects.get(id=o).retry_count for o in ops} == {0}
    assert answer.peak > 3, "the retains' extraction threads never ran side by side"
