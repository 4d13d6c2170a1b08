"""The webhook tests' fixtures: ``receiver`` (``fakes.webhook_receiver``: a receiver on
127.0.0.1 recording every request), ``webhook_settings`` (the configuration the test process and
its workers share: the receiver's address allowed, retries 0.2 s apart) and ``sweeper`` (the
webhook sweep beat runs, every few hundred milliseconds, so retries come due in the tests' time);
``verify_signatures`` checks the three signature headers from the bytes received."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.webhook_receiver import Received, Receiver, start_receiver

__all__ = ["Received", "Receiver", "receiver", "sweeper", "verify_signatures", "webhook_settings"]

WEBHOOK_ENV = {
    "HINDSIGHT_API_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
    "HINDSIGHT_API_WEBHOOK_RETRY_BACKOFF_SECONDS": "0.2",
    "HINDSIGHT_API_WEBHOOK_RETRY_BACKOFF_MAX_SECONDS": "1",
    "HINDSIGHT_API_WEBHOOK_MAX_ATTEMPTS": "4",
}
WEBHOOK_SETTINGS = {
    "webhook_allowed_hosts": ("127.0.0.1",),
    "webhook_retry_backoff_seconds": 0.2,
    "webhook_retry_backoff_max_seconds": 1.0,
    "webhook_max_attempts": 4,
}


def verify_signatures(request: Received, secret: str) -> None:
    """The three signature headers, computed here from the bytes received."""
    expected = "sha256=" + hmac.new(secret.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers["X-Hindsight-Signature"] == expected
    assert request.headers["X-Hub-Signature-256"] == expected
    stamp, mac = request.headers["X-Hindsight-Signature-V2"].split(",")
    assert stamp.startswith("t=") and mac.startswith("v1=")
    timestamp = stamp[2:]
    assert abs(int(timestamp) - time.time()) < 120
    signed = timestamp.encode() + b"." + request.body
    assert mac[3:] == hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook, server = start_receiver()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def webhook_settings(settings: Any) -> dict[str, str]:
    """The test process's webhook settings (the API checks URLs with them); the workers get
    the same as ``WEBHOOK_ENV``."""
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, **WEBHOOK_SETTINGS)
    return dict(WEBHOOK_ENV)


class Sweeper(threading.Thread):
    def __init__(self, interval: float = 0.3):
        super().__init__(name="webhook-sweep", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from hindsight.webhooks.outbox import deliveries_sweep

        try:
            while not self.stopped.wait(self.interval):
                deliveries_sweep()
        finally:
            connection.close()


@pytest.fixture
def sweeper(worker_factory: Any) -> Iterator[Sweeper]:
    thread = Sweeper()
    thread.start()
    try:
        yield thread
    finally:
        thread.stopped.set()
        thread.join(timeout=10)
