"""A webhook receiver for the tests and the benches: ``http.server`` on 127.0.0.1 in a daemon
thread, recording every request (method, path, headers, body) and answering what the caller
scripts — a status per request (the last one repeating) after a delay (a slow receiver).

    receiver, server = start_receiver()
    receiver.statuses = [500, 200]; receiver.delay = 30.0
    receiver.wait("retain.completed", count=2)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
        deadline = time.monotonic() + timeout
        while len(self.of(event)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {count} × "
                                     f"{event} at the receiver ({len(self.of(event))} came)")
            time.sleep(0.1)
        return self.of(event)


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
