"""A broker (Redis-protocol server owned by this test, on a random port) dies and comes back
mid-load: every operation still completes — messages lost with it are re-sent by recovery,
submits made while it was down are sent by recovery once it is back. A worker whose broker
stays away keeps retrying, further apart each time, without a bound, and serves again once the
broker returns."""

from __future__ import annotations

import re
import socket
import time

import pytest

from hindsight.devstack.servers import EmbeddedValkey, free_port
from operations.models import COMPLETED, PENDING, Operation
from operations.probe import heartbeat_path, probe_check
from tests.operations.helpers import job_log, statuses, submit_job
from tests.workers import use_broker, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def own_broker(tmp_path):
    server = EmbeddedValkey(tmp_path / "broker", free_port(), durable=False)
    server.start()
    yield server
    server.stop()


def test_every_operation_completes_across_a_broker_restart(
    worker_factory, own_broker, settings
) -> None:
    worker_factory.redis_url = own_broker.url
    with use_broker(settings, own_broker.url):
        from tests.workers import BeatThread

        worker_factory(concurrency=2)
        beat = BeatThread(interval=0.25)
        beat.start()
        try:
            before = [submit_job(key=f"b{i}", sleep=0.25, effect=True) for i in range(12)]
            # Some done, some running, some queued in the broker when it dies.
            wait_until(lambda: list(statuses([op.id for op in before]).values()).count(
                COMPLETED) >= 2, timeout=30, interval=0.05, message="two jobs completed")
            own_broker.kill()
            during = [submit_job(key=f"d{i}", sleep=0.1, effect=True) for i in range(5)]
            # Their publish failed (the broker is down): only recovery can send them. (Not read
            # from dispatched_at: the beat's recovery stamps it while it tries, then clears it.)
            assert all(
                Operation.objects.get(id=op.id).status == PENDING for op in during
            )
            time.sleep(1.0)
            restarted = EmbeddedValkey(own_broker.data_dir, own_broker.port, durable=False)
            restarted.start()
            own_broker.process = restarted.process  # the fixture stops whichever runs
            after = [submit_job(key=f"a{i}", sleep=0.1, effect=True) for i in range(5)]
            ops = [op.id for op in before + during + after]

            def all_completed() -> bool:
                current = statuses(ops)
                return all(current.get(str(i)) == COMPLETED for i in ops)

            wait_until(all_completed, timeout=90, interval=0.5,
                       message=f"every operation completed: {statuses(ops)}")
        finally:
            beat.stop()
    from tests.operations.helpers import effects

    assert len(effects(ops)) == len(ops)  # each effect exactly once
    completed_runs = [r for r in job_log(ops) if r["outcome"] == "completed"]
    assert len(completed_runs) == len(ops)


def test_a_worker_whose_broker_stays_away_keeps_retrying_and_serves_again_when_it_returns(
    worker_factory, own_broker, settings, tmp_path
) -> None:
    """And its probe says so (docs/operating.md, Probes): the event loop waits on the broker's
    reconnection, so the heartbeat stops while the broker is away and resumes with it."""
    worker_factory.redis_url = own_broker.url
    directory = tmp_path / "probe"
    with use_broker(settings, own_broker.url):
        worker = worker_factory(concurrency=1,
                                env={"HINDSIGHT_API_WORKER_PROBE_DIR": str(directory)})
        heartbeat = heartbeat_path(directory, f"{worker.name}@{socket.gethostname()}")
        wait_until(heartbeat.exists, timeout=30, interval=0.1, message="the first heartbeat")
        own_broker.kill()

        def retries() -> list[tuple[float, str]]:
            return [(float(wait), bound) for wait, bound in re.findall(
                r"Trying again in ([\d.]+) seconds\.*\s*\(\d+/(\w+)\)", worker.log())]

        # Three retries: the waits grow twice (Celery's are 2, 4, 6 s, …). The broker comes
        # back during the third wait; each retry more would cost the test a longer wait.
        wait_until(lambda: len(retries()) >= 3, timeout=60, interval=0.2,
                   message=f"three connection retries: {worker.log()[-2000:]}")
        assert worker.alive(), worker.log()[-3000:]
        waits = [wait for wait, _ in retries()]
        assert len(waits) == 3 and waits[0] < waits[1] < waits[2], waits  # backoff
        # No bound: Celery's default (100) ends the worker with an "Unrecoverable error".
        assert {bound for _, bound in retries()} == {"None"}
        assert "Unrecoverable error" not in worker.log()
        # The first two waits (2 + 4 s) passed: no beat since the broker went.
        assert time.time() - heartbeat.stat().st_mtime > 5
        assert not probe_check(directory, node=None, max_age=5).alive

        restarted = EmbeddedValkey(own_broker.data_dir, own_broker.port, durable=False)
        restarted.start()
        own_broker.process = restarted.process  # the fixture stops whichever runs
        returned = time.time()
        op = submit_job(key="after-outage", effect=True)
        wait_until(lambda: Operation.objects.get(id=op.id).status == COMPLETED, timeout=60,
                   interval=0.5, message="the job sent once the broker is back")
        assert worker.alive()
        wait_until(lambda: heartbeat.stat().st_mtime > returned, timeout=30, interval=0.2,
                   message="the heartbeat to resume")
        assert probe_check(directory, node=None, max_age=5).alive
