"""A broker that dies while a worker holds a message it has not acknowledged (a task running
with ``acks_late``, or one prefetched) does not end the worker.

Celery 5.7 closes the lost connection after collecting it; with a message unacknowledged, the
Redis channel's close tries to put it back through a client made from the collected connection
and raises an AttributeError, which the worker took for an "Unrecoverable error" and exited (seen
in the chaos run's broker restarts). The worker's consumer (``hindsight.project.consumer``) lets
that close fail quietly; it then reconnects with backoff as for any lost broker
(``test_broker_restart.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from hindsight.devstack.servers import EmbeddedValkey, free_port
from hindsight.project.celery import app
from hindsight.project.consumer import Consumer, closing_what_is_left


@pytest.fixture
def own_broker(tmp_path):
    server = EmbeddedValkey(tmp_path / "broker", free_port(), durable=False)
    server.start()
    yield server
    server.stop()


def _lost_with_a_message_unacknowledged(broker: EmbeddedValkey) -> Connection:
    """A connection whose default channel holds a delivered, unacknowledged message, left as
    Celery leaves it after its broker died: collected, its transport's settings dropped."""
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
    connection._do_close_transport()  # what Connection.collect() leaves behind
    return connection


def test_the_worker_uses_the_consumer_whose_lost_connection_closes_quietly(own_broker) -> None:
    assert app.conf.worker_consumer == "hindsight.project.consumer:Consumer"
    assert "on_connection_error_after_connected" in vars(Consumer)
    lost = _lost_with_a_message_unacknowledged(own_broker)
    with pytest.raises(AttributeError, match="hostname"):  # Celery's own close: the crash
        ignore_errors(lost, lost.close)

    restarted = EmbeddedValkey(own_broker.data_dir, own_broker.port, durable=False)
    restarted.start()
    own_broker.process = restarted.process
    lost = _lost_with_a_message_unacknowledged(own_broker)
    ignore_errors(lost, closing_what_is_left(lost.close))  # the worker's: no exception
