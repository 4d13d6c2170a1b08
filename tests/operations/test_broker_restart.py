"""A broker (Redis-protocol server owned by this test, on a random port) dies and comes back
mid-load: every operation still completes — messages lost with it are re-sent by recovery,
submits made while it was down are sent by recovery once it is back. A worker whose broker
stays away keeps retrying, further apart each time, without a bound, and serves again once the
broker returns.

A broker that dies while a worker holds a message it has not acknowledged (a task running
with ``acks_late``, or one prefetched) does not end the worker either. Celery 5.7 "collects"
the lost connection, which drops its transport's settings, and a later acknowledgement or the
restore of unacknowledged messages in the close built a Redis client from them: an
AttributeError, which the worker took for an "Unrecoverable error" (seen in the chaos run's
broker restarts). The worker's consumer (``hindsight.project.consumer``) keeps the settings, so
those fail as connection errors do; the last three tests show the crash and its absence on a
real connection."""

from __future__ import annotations

import logging
import re
import socket
import time
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from hindsight.devstack.servers import EmbeddedValkey, free_port
from hindsight.project.celery import app
from hindsight.project.consumer import Consumer, collect_keeping_settings
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


def _restart(broker: EmbeddedValkey) -> None:
    restarted = EmbeddedValkey(broker.data_dir, broker.port, durable=False)
    restarted.start()
    broker.process = restarted.process  # the fixture stops whichever runs


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
            _restart(own_broker)
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

        _restart(own_broker)
        returned = time.time()
        op = submit_job(key="after-outage", effect=True)
        wait_until(lambda: Operation.objects.get(id=op.id).status == COMPLETED, timeout=60,
                   interval=0.5, message="the job sent once the broker is back")
        assert worker.alive()
        wait_until(lambda: heartbeat.stat().st_mtime > returned, timeout=30, interval=0.2,
                   message="the heartbeat to resume")
        assert probe_check(directory, node=None, max_age=5).alive


def _delivered_then_lost(broker: EmbeddedValkey) -> tuple[Connection, Any]:
    """A connection holding a delivered, unacknowledged message (a task running with
    ``acks_late``) when its broker dies; and that message."""
    connection = Connection(broker.url)
    channel = connection.default_channel
    queue = Queue("jobs", Exchange("jobs"), "jobs", channel=channel)
    queue.declare()
    connection.Producer().publish({"job": 1}, exchange=queue.exchange, routing_key="jobs")
    delivered: list[Any] = []
    consumer = connection.Consumer([queue], callbacks=[lambda body, m: delivered.append(m)],
                                   channel=channel)
    consumer.qos(prefetch_count=1)
    consumer.consume()
    connection.drain_events(timeout=5)
    assert delivered and channel.qos._delivered  # delivered, not acknowledged
    # kombu also restores at interpreter exit what a channel still holds: this process would
    # then print that restore's traceback on a broker long gone. The test's own close and ack
    # calls are unaffected.
    channel.qos._on_collect.cancel()  # type: ignore[attr-defined]
    broker.kill()
    return connection, delivered[0]


def test_the_worker_uses_the_guarded_consumer() -> None:
    assert app.conf.worker_consumer == "hindsight.project.consumer:Consumer"
    assert "on_connection_error_after_connected" in vars(Consumer)


def _collect_stopping_early(connection: Connection) -> None:
    """Make ``connection.collect()`` leave what the worker's crash traces show a collect left
    behind on the dead broker: the channel's client pool released, then (the close failing
    there, which Celery ignores) the transport's settings dropped, the channel not closed."""
    channel = connection.default_channel

    def collect(*args: Any, **kwargs: Any) -> None:
        channel._disconnect_pools()  # type: ignore[attr-defined]  # the Redis channel's
        connection._do_close_transport()

    connection.collect = collect  # type: ignore[method-assign]


def test_a_task_finishing_after_its_broker_was_lost_acknowledges_without_a_crash(
        own_broker) -> None:
    errors = Connection(own_broker.url).connection_errors  # what Celery's ack ignores
    connection, message = _delivered_then_lost(own_broker)
    _collect_stopping_early(connection)
    connection.collect(socket_timeout=0.1)  # as Celery does with a lost connection
    with pytest.raises(AttributeError, match="hostname"):  # the worker's "Unrecoverable error"
        message.ack_log_error(logging.getLogger("test"), errors)

    _restart(own_broker)
    connection, message = _delivered_then_lost(own_broker)
    _collect_stopping_early(connection)
    collect_keeping_settings(connection)
    connection.collect(socket_timeout=0.1)
    message.ack_log_error(logging.getLogger("test"), errors)  # a connection error, logged


def test_closing_a_lost_connection_that_still_holds_the_message_does_not_crash(
        own_broker) -> None:
    connection, _ = _delivered_then_lost(own_broker)
    _collect_stopping_early(connection)
    connection.collect(socket_timeout=0.1)
    with pytest.raises(AttributeError, match="hostname"):  # restoring the message: the crash
        ignore_errors(connection, connection.close)

    _restart(own_broker)
    connection, _ = _delivered_then_lost(own_broker)
    _collect_stopping_early(connection)
    collect_keeping_settings(connection)
    connection.collect(socket_timeout=0.1)
    ignore_errors(connection, connection.close)  # the restore fails as a connection error
