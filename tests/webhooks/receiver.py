"""A webhook receiver for the tests: ``http.server`` on 127.0.0.1 in a thread, recording every
request (method, path, headers, body) and answering what the test scripts (a status per request,
the last one repeating; a delay before answering). ``sweeper`` runs the webhook sweep (what beat
runs) every few hundred milliseconds, so retries come due in the tests' time.

``webhook_env`` is the configuration the test process and its workers share: the receiver's
address allowed, retries 0.2 s apart."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.workers import wait_until

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


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get("X-Hindsight-Event", "")


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=lambda: [200])
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def of(self, event: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.event == event]

    def wait(self, event: str, count: int = 1, timeout: float = 60.0) -> list[Received]:
        return wait_until(lambda: self.of(event) if len(self.of(event)) >= count else None,
                          timeout, interval=0.1, message=f"{count} × {event} at the receiver")


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


def start_receiver() -> tuple[Receiver, ThreadingHTTPServer]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with receiver.lock:
                receiver.received.append(Received(self.command, self.path, dict(self.headers),
                                                  body))
            if receiver.delay:
                time.sleep(receiver.delay)
            status = receiver.answer()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(f"answered {status}".encode())

        do_POST = do_GET = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver, server


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
