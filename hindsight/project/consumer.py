"""The worker's consumer: Celery's own, with one guard for a broker lost mid-work.

When the broker connection drops, Celery 5.7 "collects" the lost connection, and kombu's collect
drops the transport's reference to the connection's settings (host, port, options). The Redis
channels of that connection live on in what still holds them — a task running with
``acks_late`` acknowledges its message when it finishes, and closing the connection puts back
the messages still unacknowledged — and each of those builds a new Redis client from those
settings. With the settings gone that raised ``AttributeError: 'NoneType' object has no
attribute 'hostname'``, which Celery took for an "Unrecoverable error": the worker exited
instead of reconnecting (the chaos run's broker restarts ended a worker in about half its runs).

The guard keeps the settings on the transport after the collect. A late acknowledgement or
restore then fails as a connection error does while the broker is away (Celery logs it and goes
on), or succeeds once it is back. Nothing is lost either way: the broker keeps an unacknowledged
message and hands it out again after the visibility timeout, and the recovery sweep re-sends an
operation whose message is gone.
"""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection


def collect_keeping_settings(connection: Connection) -> None:
    """From now on ``connection.collect()`` leaves its transport's settings in place."""
    collect = connection.collect

    def collect_and_keep(*args: Any, **kwargs: Any) -> Any:
        transport = connection._transport  # the property would create one; collect drops it
        try:
            return collect(*args, **kwargs)
        finally:
            if transport is not None and transport.client is None:
                transport.client = connection

    connection.collect = collect_and_keep  # type: ignore[method-assign]


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        if self.connection is not None:
            # Celery collects, then closes, the lost connection in the call below.
            collect_keeping_settings(self.connection)
        super().on_connection_error_after_connected(exc)
