"""A scriptable handler for tests and benchmarks: ``test.job``. Not loaded by default.

Loaded only when named in ``HINDSIGHT_API_EXTRA_HANDLER_MODULES`` (the worker fixtures and the
benchmark do so). Every attempt records its start and end with ``clock_timestamp()`` in
``test_job_log`` (a completed attempt's end inside its completing transaction); with ``effect`` it
writes one row to ``test_job_effect`` inside the fenced completion, so a test can count effects
exactly.

Payload keys (all optional):

- ``sleep``: seconds to wait after recording the start (``walltimeout.slot_wait``: the wall
  timeout interrupts it in any pool);
- ``fail``: ``"always"`` or an int n — fail attempts 1..n;
- ``retryable``: false makes the failure final at once;
- ``llm``: a prompt sent through ``hindsight.infra.llm.get_llm().chat`` (the scripted server can hold
  it: a fixed point inside the job);
- ``wall``: the wall timeout of this job, in seconds;
- ``finish_sleep``: seconds to wait inside ``job.finishing()`` (past the wall timeout: the
  alarm is disarmed there, so the job still completes);
- ``finish_wake``: a Redis key that ends the ``finish_sleep`` wait early once it exists (a test
  lets the job go on as soon as it has seen what it waited for);
- ``effect``: write the effect row in the same transaction as the completion;
- ``raise_on_fence_lost``: default true — false makes the handler swallow ``FenceLost`` (to check
  that the engine still refuses to complete).
"""

from __future__ import annotations

import os
import time

from django.db import connection

from hindsight.infra.llm import get_llm
from operations import walltimeout
from operations.errors import FenceLost, OperationFailure
from operations.jobs import Job
from operations.locks import redis_client
from operations.registry import register

TEST_JOB = "test.job"
# The same job, declared CPU-heavy: routed to ``HINDSIGHT_API_WORKER_CPU_QUEUE`` when one is set.
TEST_CPU_JOB = "test.cpu_job"

_DDL = """
CREATE TABLE IF NOT EXISTS test_job_log (
    id bigserial PRIMARY KEY,
    op_id uuid NOT NULL,
    key text NOT NULL,
    attempt int NOT NULL,
    fence bigint NOT NULL,
    pid int NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at timestamptz,
    outcome text
);
CREATE TABLE IF NOT EXISTS test_job_effect (
    id bigserial PRIMARY KEY,
    op_id uuid NOT NULL,
    key text NOT NULL,
    fence bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


_END = "UPDATE test_job_log SET ended_at = clock_timestamp(), outcome = %s WHERE id = %s"


def ensure_tables() -> None:
    """Create the record tables (idempotent; serialized so concurrent workers do not race)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(4242)")
        try:
            cursor.execute(_DDL)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(4242)")


class TestJobHandler:
    operation_type = TEST_JOB

    def wall_timeout_seconds(self, job: Job) -> float | None:
        wall = job.payload.get("wall")
        return float(wall) if wall is not None else None

    def run(self, job: Job) -> None:
        payload = job.payload
        log_id = self._start(job)
        outcome = "error"
        try:
            if payload.get("sleep"):
                walltimeout.slot_wait(float(payload["sleep"]))  # a wall timeout interrupts it
            if payload.get("llm"):
                get_llm().chat([{"role": "user", "content": str(payload["llm"])}])
            fail = payload.get("fail")
            if fail == "always" or (isinstance(fail, int) and job.attempt <= fail):
                outcome = "failed"
                raise OperationFailure(
                    f"scripted failure on attempt {job.attempt}",
                    retryable=payload.get("retryable", True),
                )
            job.result_metadata = {**job.result_metadata, "attempt": job.attempt, "pid": os.getpid()}
            try:
                with job.finishing():
                    if payload.get("finish_sleep"):
                        _finish_wait(float(payload["finish_sleep"]), payload.get("finish_wake"))
                    if payload.get("effect"):
                        with connection.cursor() as cursor:
                            cursor.execute(
                                "INSERT INTO test_job_effect (op_id, key, fence) VALUES (%s, %s, %s)",
                                [job.id, job.key, job.fence],
                            )
                    # The job's end is its completion's commit: from there the key is free and
                    # the next job of it may run, while this thread still returns from the
                    # handler. Stamped in that transaction, a completed job's span ends before
                    # any follower's claim can begin.
                    with connection.cursor() as cursor:
                        cursor.execute(_END, ["completed", log_id])
            except FenceLost:
                outcome = "fence_lost"
                if payload.get("raise_on_fence_lost", True):
                    raise
                return
            outcome = "completed"
        finally:
            if outcome != "completed":
                self._end(log_id, outcome)

    @staticmethod
    def _start(job: Job) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO test_job_log (op_id, key, attempt, fence, pid, started_at) "
                "VALUES (%s, %s, %s, %s, %s, clock_timestamp()) RETURNING id",
                [job.id, job.key, job.attempt, job.fence, os.getpid()],
            )
            return int(cursor.fetchone()[0])

    @staticmethod
    def _end(log_id: int, outcome: str) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(_END, [outcome, log_id])
        except Exception:  # a broken connection (wall timeout) must not hide the real error
            connection.close()


def _finish_wait(seconds: float, wake: str | None) -> None:
    """Sleep ``seconds``, or until the Redis key ``wake`` exists; the database session stays
    idle inside the completion's transaction all the while."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if wake and redis_client().exists(wake):
            return
        time.sleep(min(left, 0.05))


class TestCpuJobHandler(TestJobHandler):
    operation_type = TEST_CPU_JOB
    cpu_heavy = True


register(TestJobHandler)
register(TestCpuJobHandler)
