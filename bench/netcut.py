"""A TCP proxy that can cut a process off a server the way a network does, for the chaos run.

``CutProxy`` listens on a port of its own and forwards every connection to one upstream server
(PostgreSQL, the broker). A process pointed at the proxy instead of the server can then be cut
off while its peers keep talking to the server directly:

- ``hold()``: bytes in both directions stop where they are — read by the proxy, or still in
  the sockets' buffers behind it — and new connections are accepted but carry nothing, so the
  process sees a server that went silent (no reset, no refusal);
- ``heal()``: everything held is delivered, late and in order, and the bytes flow again;
- ``refuse()``: every connection is reset and new ones are refused (the listening socket is
  closed) until ``heal()`` opens it again on the same port.

Threads, one pair per connection; nothing here knows the protocols it carries.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

_CHUNK = 65536


@dataclass
class _Pipe:
    """One proxied connection: the client's socket and the upstream's."""

    client: socket.socket
    upstream: socket.socket
    threads: list[threading.Thread] = field(default_factory=list)

    def close(self, *, reset: bool = False) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                if reset:  # RST, not FIN: what a peer sees when a path is torn down
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


def _close_listener(listener: socket.socket | None) -> None:
    if listener is None:
        return
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)  # wakes the thread waiting in accept()
    listener.close()


class CutProxy:
    """A proxy to ``upstream`` (host, port) on 127.0.0.1:``port`` (a free one unless given)."""

    def __init__(self, upstream: tuple[str, int], port: int = 0, name: str = "proxy"):
        self.upstream = upstream
        self.name = name
        self.port = port
        self._flowing = threading.Condition()
        self._held = False
        self._listener: socket.socket | None = None
        self._pipes: list[_Pipe] = []
        self._stopped = False
        self.cuts: list[tuple[str, float, float | None]] = []  # (what, started, healed)

    # the listening socket ------------------------------------------------------------------

    def start(self) -> CutProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name=f"{self.name}-accept",
                         daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: refused or stopped
            threading.Thread(target=self._open, args=(client,), daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        # A connection opened during a hold reaches the server only once the cut heals.
        with self._flowing:
            while self._held and not self._stopped:
                self._flowing.wait()
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()
            return
        upstream.settimeout(None)
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pipe = _Pipe(client, upstream)
        with self._flowing:
            if self._stopped or self._listener is None:
                pipe.close(reset=True)
                return
            self._pipes.append(pipe)
        for source, target in ((client, upstream), (upstream, client)):
            thread = threading.Thread(target=self._pump, args=(pipe, source, target),
                                      daemon=True)
            pipe.threads.append(thread)
            thread.start()

    def _pump(self, pipe: _Pipe, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                with self._flowing:  # a hold keeps what was read here until the heal
                    while self._held and not self._stopped:
                        self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        finally:
            pipe.close()
            with self._flowing:
                if pipe in self._pipes:
                    self._pipes.remove(pipe)

    # the faults ----------------------------------------------------------------------------

    def hold(self) -> None:
        """Cut: nothing is delivered in either direction until ``heal``."""
        with self._flowing:
            self._held = True
        self.cuts.append(("hold", time.time(), None))

    def refuse(self) -> None:
        """Reset every connection and refuse new ones until ``heal``."""
        with self._flowing:
            listener, self._listener = self._listener, None
            pipes, self._pipes = self._pipes, []
        _close_listener(listener)
        for pipe in pipes:
            pipe.close(reset=True)
        self.cuts.append(("refuse", time.time(), None))

    def heal(self) -> None:
        """Deliver what was held and let the bytes flow; accept connections again."""
        with self._flowing:
            self._held = False
            self._flowing.notify_all()
            reopen = self._listener is None and not self._stopped
        if reopen:
            self.start()
        if self.cuts and self.cuts[-1][2] is None:
            what, started, _ = self.cuts[-1]
            self.cuts[-1] = (what, started, time.time())

    def stop(self) -> None:
        with self._flowing:
            self._stopped = True
            self._flowing.notify_all()
            listener, self._listener = self._listener, None
            pipes, self._pipes = self._pipes, []
        _close_listener(listener)
        for pipe in pipes:
            pipe.close()

    def connections(self) -> int:
        with self._flowing:
            return len(self._pipes)
