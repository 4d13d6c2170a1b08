"""``hindsight.infra.llm.gateway._chat_completion``: the gateway's chat request goes on the wire byte
for byte as the SDK's ``chat.completions.create()`` sends it (request line, headers, body), and
its answer parses to the same object — for every shape of request the gateway sends."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from hindsight.infra.llm.gateway import _chat_completion

_ANSWER = json.dumps({
    "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "t1", "type": "function",
                        "function": {"name": "done", "arguments": "{\"answer\": \"é\"}"}}]}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}).encode()


class _RawServer:
    """Records each request's raw bytes; answers every one with ``_ANSWER``."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + body)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Connection: close\r\nContent-Length: "
                             + str(len(_ANSWER)).encode() + b"\r\n\r\n" + _ANSWER)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[_RawServer]:
    raw = _RawServer()
    yield raw
    raw.close()


_TOOLS = [{"type": "function", "function": {
    "name": "recall", "description": "Search memories.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"], "additionalProperties": False}}}]
_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You answer."},
    {"role": "user", "content": "How does the team work? ünïcode"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t0", "type": "function", "function": {"name": "recall",
                                                      "arguments": "{\"query\": \"team\"}"}}]},
    {"role": "tool", "tool_call_id": "t0", "content": "{\"facts\": []}"},
]

REQUESTS = [
    {"messages": _MESSAGES, "model": "m", "timeout": 12.5},
    {"messages": _MESSAGES, "tools": _TOOLS, "tool_choice": "auto", "model": "m",
     "timeout": 3.0, "max_completion_tokens": 512},
    {"messages": _MESSAGES, "tools": _TOOLS,
     "tool_choice": {"type": "function", "function": {"name": "recall"}},
     "temperature": 0.0, "model": "m", "timeout": 30.0, "max_tokens": 100},
    {"messages": _MESSAGES, "response_format": {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}, "strict": True}}, "model": "m",
     "timeout": 30.0},
    {"messages": _MESSAGES, "response_format": {"type": "json_object"}, "model": "m",
     "timeout": 30.0, "max_completion_tokens": 64},
]


@pytest.mark.parametrize("request_kwargs", REQUESTS, ids=range(len(REQUESTS)))
def test_the_request_goes_out_as_create_sends_it_and_parses_the_same(
    server: _RawServer, request_kwargs: dict[str, Any]
) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    by_create = client.chat.completions.create(**request_kwargs)
    by_gateway = _chat_completion(client, dict(request_kwargs))
    assert len(server.requests) == 2
    assert server.requests[1] == server.requests[0]
    assert by_gateway == by_create


def test_a_request_with_another_key_takes_create_itself(server: _RawServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    request = {"messages": _MESSAGES, "model": "m", "timeout": 30.0, "seed": 7}
    by_create = client.chat.completions.create(**request)
    assert _chat_completion(client, dict(request)) == by_create
    assert server.requests[1] == server.requests[0]
    assert b'"seed":7' in server.requests[1]
