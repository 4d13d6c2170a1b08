"""The worker's consumer: Celery's own, with one guard for a broker lost mid-work.

When the broker connection drops, Celery 5.7 first collects the lost connection (which drops
its transport's reference to the connection's settings) and then closes it. If the Redis
channel still holds delivered, unacknowledged messages — a task running with ``acks_late``, or
one prefetched — and the collect did not get to close that channel, the close tries to put them
back through a new client built from the dropped settings and raises ``AttributeError``
(``'NoneType' object has no attribute 'hostname'``). Celery ignores only connection and
channel errors there, so the worker ended with an "Unrecoverable error" instead of reconnecting.

The guard lets that close fail quietly, as a connection error would. Nothing is lost by it:
the broker keeps each unacknowledged message in its unacked set and hands it out again after
the visibility timeout, and the recovery sweep re-sends any operation whose message is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

logger = logging.getLogger(__name__)


def closing_what_is_left(close: Callable[[], Any]) -> Callable[[], Any]:
    """``close`` for a connection already collected after its broker went away."""

    def close_lost() -> Any:
        try:
            return close()
        except AttributeError as exc:  # the collected connection's settings are gone
            logger.warning("broker connection lost with messages unacknowledged; the broker "
                           "hands them out again after the visibility timeout (%r)", exc)
            return None

    return close_lost


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        if self.connection is not None:
            # Celery closes the lost connection with ``ignore_errors(connection,
            # connection.close)``: the attribute is read when it is called.
            self.connection.close = closing_what_is_left(self.connection.close)
        super().on_connection_error_after_connected(exc)
