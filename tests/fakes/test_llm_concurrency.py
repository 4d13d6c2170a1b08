"""The scripted server's overlap detector (``track_concurrency``), which the chaos run trusts:
two live requests of one key overlap; a request whose client died does not count."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlparse

from fakes.llm_server import Reply, ScriptedLLMServer

BODY = {"model": "scripted", "messages": [{"role": "user", "content": "Question: x [k:a]"}]}


def _raw_request(server: ScriptedLLMServer) -> socket.socket:
    """Send a chat request and return the socket without reading the answer."""
    url = urlparse(server.base_url)
    sock = socket.create_connection((url.hostname, url.port))
    data = json.dumps(BODY).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def _server() -> ScriptedLLMServer:
    server = ScriptedLLMServer().start()
    server.track_concurrency(lambda body: "a")
    server.respond_with(lambda body: Reply.delay(0.6, Reply.text("ok")))
    return server


def _wait(predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.01)


def test_two_live_requests_of_one_key_are_an_overlap() -> None:
    server = _server()
    try:
        first = _raw_request(server)
        _wait(lambda: server.requests_by_key.get("a") == 1)
        second = _raw_request(server)
        _wait(lambda: server.requests_by_key.get("a") == 2)
        assert len(server.overlaps) == 1 and server.overlaps[0][0] == "a"
        for sock in (first, second):
            assert b"200" in sock.recv(100)
            sock.close()
    finally:
        server.stop()


def test_a_request_after_its_predecessors_client_died_is_no_overlap() -> None:
    server = _server()
    try:
        dead = _raw_request(server)
        _wait(lambda: server.requests_by_key.get("a") == 1)
        dead.close()  # what SIGKILL does to the client's socket
        time.sleep(0.05)
        live = _raw_request(server)
        _wait(lambda: server.requests_by_key.get("a") == 2)
        assert server.overlaps == []
        assert b"200" in live.recv(100)
        live.close()
    finally:
        server.stop()


def test_sequential_requests_of_one_key_and_parallel_ones_of_two_keys_are_no_overlap() -> None:
    server = _server()
    server.track_concurrency(lambda body: body["messages"][0]["content"][-3:])
    try:
        threads = []
        for key in ("k:a", "k:b"):
            body = {**BODY, "messages": [{"role": "user", "content": f"Question [{key}"}]}
            threads.append(threading.Thread(target=_post, args=(server, body)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _post(server, BODY)
        _post(server, BODY)
        assert server.overlaps == []
    finally:
        server.stop()


def _post(server: ScriptedLLMServer, body: dict) -> None:
    import urllib.request

    request = urllib.request.Request(server.base_url + "/chat/completions",
                                     data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
