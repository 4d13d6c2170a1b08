"""A broker that dies while a worker holds a message it has not acknowledged (a task running
with ``acks_late``, or one prefetched) does not end the worker.

Celery 5.7 closes the lost connection after collecting it; with a message unacknowledged, the
Redis channel's close tries to put it back through a client made from the collected connection
and raises an AttributeError, which the worker took for an "Unrecoverable error" and exited (seen
in the chaos run's broker restarts). The worker's consumer (``hindsight.project.consumer``) lets
that close fail quietly; it then reconnects with backoff as for any lost broker
(``test_broker_restart.py``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from hindsight.devstack.servers import EmbeddedValkey, free_port
from hindsight.project.celery import app
from hindsight.project.consumer import Consumer, collect_keeping_settings


@pytest.fixture
def own_broker(tmp_path):
    server = EmbeddedValkey(tmp_path / "broker", free_port(), durable=False)
    server.start()
    yield server
    server.stop()


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
    broker.kill()
    return connection, delivered[0]


def _restart(broker: EmbeddedValkey) -> None:
    restarted = EmbeddedValkey(broker.data_dir, broker.port, durable=False)
    restarted.start()
    broker.process = restarted.process  # the fixture stops whichever runs


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
