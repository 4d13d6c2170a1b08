"""A scripted OpenAI-compatible HTTP server for the tests and the benches: each caller says what
the "model" answers.

It is a real server on 127.0.0.1 (a ``ThreadingHTTPServer`` in a daemon thread), so the code under
test talks to it through the openai SDK exactly as it would to a provider, from the test process
or from worker subprocesses.

Endpoints
  ``POST /v1/chat/completions``  non-streaming; answers with the next scripted ``Reply``, else the
                                 ``respond_with`` function, else a 500 "no scripted reply".
  ``POST /v1/embeddings``        deterministic pseudo-embeddings (see ``pseudo_embedding``).
  ``GET  /v1/models``            one model, ``scripted``.

Caller-facing API (the tests' fixtures are in tests/fakes/fixtures.py)::

    server.script(Reply.tool_calls([("recall", {"query": "x"})]), Reply.text("done"))
    server.script(Reply.json({"ok": True}), Reply.error(503, "overloaded"))
    server.script(Reply.error(429, "slow down", retry_after="3"))  # with a Retry-After header
    server.script(Reply.raw("<html>502</html>"))  # a 200 whose body is not JSON
    server.script(Reply.without_choices(), Reply.null_content())  # 200s a provider may send
    reply, handle = Reply.hold(Reply.text("late")); server.script(reply)
    ...; assert handle.wait_received(5); handle.release()
    server.respond_with(lambda body: Reply.text("always this"))
    server.refuse_strict_schema = True       # 400 to response_format json_schema
    server.quirks = Quirks(think=True, cut_off=1)  # answer as real servers and models do
    server.fail_embeddings(2, status=500)    # the next two embedding requests fail
    server.embedding_dimensions = 10         # force a wrong dimension
    server.embedding_fault = "one_short"     # or "shuffled", "nan": see ``EMBEDDING_FAULTS``
    server.refuse_embedding_dimensions = True  # 400 to a request carrying ``dimensions``
    server.requests / server.embedding_requests   # bodies received, in order
    server.wait_for_requests(2, timeout=5)         # a worker process made two chat requests
    server.track_concurrency(lambda body: key)     # per-key in-flight count: ``overlaps``

Quirks (``Quirks``, at the end of this module): the ways real servers and models answer that a
well-behaved server does not — reasoning in the content, JSON in prose, a 400 to
``response_format`` or to tools, an answer cut off at the token limit, tool arguments that are
not JSON. Set ``server.quirks`` and every chat answer, scripted or from a responder, comes out
the way such a server would send it.

Concurrency tracking (the chaos run's overlap detector): with a key function set, every chat
request is counted in flight under its key from arrival until its answer is sent; a request that
arrives while another of the same key is in flight *and that one's client is still connected*
is recorded in ``overlaps``. A client killed mid-request (SIGKILL closes its socket) stops
counting as soon as the server sees the closed socket, so a crash followed by a recovery is
not reported as an overlap, while two live requests for one key always are.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from hindsight.devstack.stack import openai_compatible_env

DEFAULT_EMBEDDING_DIMENSIONS = 384
# A held request never blocks a server thread forever, even if a test forgets to release it.
MAX_HOLD_SECONDS = 120.0
STRICT_SCHEMA_REFUSAL = (
    "response_format of type 'json_schema' is not supported by this model; "
    "use response_format {'type': 'json_object'}"
)


# --------------------------------------------------------------------------------------------
# Replies


class Hold:
    """The test's handle on a held request: it blocks until ``release()``."""

    def __init__(self) -> None:
        self._received = threading.Event()
        self._released = threading.Event()

    def wait_received(self, timeout: float = 5.0) -> bool:
        """True once the request has arrived at the server (within ``timeout`` seconds)."""
        return self._received.wait(timeout)

    @property
    def received(self) -> bool:
        return self._received.is_set()

    def release(self) -> None:
        self._released.set()


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build with the class methods, not the constructor."""

    kind: str
    content: str | None = None
    calls: tuple[tuple[str, Any], ...] = ()
    status: int = 200
    message: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    seconds: float = 0.0
    retry_after: str | None = None  # an error's Retry-After header
    inner: Reply | None = None
    handle: Hold | None = field(default=None, compare=False)

    @classmethod
    def text(
        cls, content: str, *, finish_reason: str = "stop", usage: dict[str, int] | None = None
    ) -> Reply:
        return cls("message", content=content, finish_reason=finish_reason, usage=usage)

    @classmethod
    def json(cls, obj: Any, *, usage: dict[str, int] | None = None) -> Reply:
        return cls("message", content=json.dumps(obj), finish_reason="stop", usage=usage)

    @classmethod
    def tool_calls(
        cls,
        calls: list[tuple[str, Any]],
        *,
        content: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> Reply:
        """``calls`` are ``(name, arguments)``; a dict is JSON-encoded, a str is sent as is
        (to script malformed arguments)."""
        return cls(
            "message",
            content=content,
            calls=tuple((name, args) for name, args in calls),
            finish_reason="tool_calls",
            usage=usage,
        )

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *,
              retry_after: str | None = None) -> Reply:
        """An HTTP error answer; ``retry_after`` is sent as its ``Retry-After`` header."""
        return cls("error", status=status, message=message, retry_after=retry_after)

    @classmethod
    def raw(cls, body: str, *, status: int = 200) -> Reply:
        """``body`` sent as it is, as ``application/json`` (a provider's or a proxy's broken
        answer: not JSON, truncated, an HTML error page)."""
        return cls("raw", content=body, status=status)

    @classmethod
    def without_choices(cls) -> Reply:
        """A well-formed completion (id, model, usage) whose ``choices`` key is missing."""
        return cls("without_choices")

    @classmethod
    def null_content(cls) -> Reply:
        """A message whose ``content`` is null and which calls no tool."""
        return cls("message", content=None, finish_reason="stop")

    @classmethod
    def disconnect(cls) -> Reply:
        """Close the connection without answering (a connection error for the client)."""
        return cls("disconnect")

    @classmethod
    def delay(cls, seconds: float, reply: Reply) -> Reply:
        return cls("delay", seconds=seconds, inner=reply)

    @classmethod
    def hold(cls, reply: Reply) -> tuple[Reply, Hold]:
        handle = Hold()
        return cls("hold", inner=reply, handle=handle), handle


Responder = Callable[[dict[str, Any]], Reply]


# --------------------------------------------------------------------------------------------
# Reading a request, and a reflect loop's turn: what responders build on

# The keys of a tool output that list memories (a reflect tool's facts or observations).
MEMORY_KEYS = ("facts", "observations")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool outputs a chat request carries back to the model, parsed; one that is not a JSON
    object is passed over (a responder reads what it can, as a model would)."""
    out = []
    for message in body.get("messages", []):
        if message.get("role") != "tool":
            continue
        try:
            payload = json.loads(message.get("content") or "{}")
        except (ValueError, TypeError):
            continue
        if isinstance(payload, dict):
            out.append(payload)
    return out


def returned_ids(body: dict[str, Any], *, first: int | None = None) -> list[str]:
    """The ids of the memories the request's tool outputs returned, in order: what an answer may
    cite. With ``first``, only the first that many of each list."""
    return [str(item["id"]) for result in tool_results(body) for key in MEMORY_KEYS
            for item in (result.get(key) or [])[:first] if isinstance(item, dict) and "id" in item]


def reflect_reply(body: dict[str, Any], answer: str, *, first: int | None = None,
                  query: str = "team") -> Reply:
    """A reflect loop's next turn, from a model that looks before it answers: a forced tool call
    (``tool_choice`` names the tool) looks ``query`` up; a free turn ends the loop with ``done``,
    ``answer`` citing the memories the tools returned (``returned_ids``, ``first`` of each)."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": query})])
    return Reply.tool_calls([("done", {"answer": answer, "memory_ids": returned_ids(body, first=first),
                                       "mental_model_ids": []})])


# --------------------------------------------------------------------------------------------
# Pseudo-embeddings

_WORD = re.compile(r"[a-z0-9]+")

# What ``embedding_fault`` makes the embeddings endpoint do (a 200 each time):
#   one_short  one vector fewer than the inputs (the last one missing);
#   shuffled   the vectors in reverse order, each still carrying its input's ``index``;
#   nan        the first vector's first number is NaN (``NaN`` in the JSON, as Python writes it).
EMBEDDING_FAULTS = ("one_short", "shuffled", "nan")


@lru_cache(maxsize=65536)
def _word_vector(word: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
    return np.random.default_rng(seed).standard_normal(dims)


def pseudo_embedding(text: str, dims: int) -> list[float]:
    """Sum of per-word random vectors (seeded by a hash of the word), L2-normalised.

    Deterministic across processes, and texts sharing words are closer than texts that do not:
    the cosine of two texts grows with the fraction of words they share. A text without words
    gets the vector of the empty word, so it is still a valid unit vector.
    """
    words = _WORD.findall(text.lower()) or [""]
    total = np.zeros(dims)
    for word in words:
        total += _word_vector(word, dims)
    norm = float(np.linalg.norm(total))
    return (total / norm).tolist() if norm else _word_vector("", dims).tolist()


# --------------------------------------------------------------------------------------------
# The server


class ScriptedLLMServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._responder: Responder | None = None
        self._embedding_failures: deque[int] = deque()
        self._holds: list[Hold] = []
        self._ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        self._key_fn: Callable[[dict[str, Any]], str | None] | None = None
        self._in_flight: dict[str, list[socket.socket]] = {}
        self.overlaps: list[tuple[str, float]] = []
        self.requests_by_key: dict[str, int] = {}
        self.embedding_requests: list[dict[str, Any]] = []
        self.refuse_strict_schema = False
        self.quirks = Quirks()
        self.embedding_dimensions: int | None = None
        self.refuse_embedding_dimensions = False
        self.embedding_fault: str | None = None
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="scripted-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release_holds()
        self._httpd.shutdown()
        self._httpd.server_close()

    def reset(self) -> None:
        """Forget scripts, responders, failures and records; release anything still held."""
        self._release_holds()
        with self._lock:
            self._replies.clear()
            self._responder = None
            self.requests.clear()
            self._key_fn = None
            self._in_flight.clear()
            self.overlaps.clear()
            self.requests_by_key.clear()
            self.refuse_strict_schema = False
            self.quirks = Quirks()
        self.reset_embeddings()

    def reset_embeddings(self) -> None:
        """Forget only the embedding side: failures, forced dimension, faults, records."""
        with self._lock:
            self._embedding_failures.clear()
            self.embedding_requests.clear()
            self.embedding_dimensions = None
            self.refuse_embedding_dimensions = False
            self.embedding_fault = None

    # scripting -----------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; chat requests consume them in order."""
        with self._lock:
            self._replies.extend(replies)

    def respond_with(self, fn: Responder | None) -> None:
        """Answer with ``fn(request_body)`` whenever the queue is empty (None removes it)."""
        with self._lock:
            self._responder = fn

    def track_concurrency(self, key_fn: Callable[[dict[str, Any]], str | None] | None) -> None:
        """Count chat requests in flight per ``key_fn(body)`` (None: not tracked)."""
        with self._lock:
            self._key_fn = key_fn

    def _enter(self, body: dict[str, Any], conn: socket.socket) -> str | None:
        with self._lock:
            key_fn = self._key_fn
        key = key_fn(body) if key_fn is not None else None
        if key is None:
            return None
        with self._lock:
            self.requests_by_key[key] = self.requests_by_key.get(key, 0) + 1
            live = [c for c in self._in_flight.get(key, []) if _connected(c)]
            if live:
                self.overlaps.append((key, time.time()))
            self._in_flight[key] = [*live, conn]
        return key

    def _leave(self, key: str | None, conn: socket.socket) -> None:
        if key is None:
            return
        with self._lock:
            self._in_flight[key] = [c for c in self._in_flight.get(key, []) if c is not conn]

    def fail_embeddings(self, n: int, status: int = 500) -> None:
        with self._lock:
            self._embedding_failures.extend([status] * n)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._replies)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """True once at least ``n`` chat requests have arrived (for work done by a worker)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self.requests) >= n:
                return True
            time.sleep(0.01)
        return len(self.requests) >= n

    @property
    def env(self) -> dict[str, str]:
        """``HINDSIGHT_API_*`` variables pointing a worker subprocess at this server, mirroring
        the current ``settings.HINDSIGHT`` (so a test's overrides carry over)."""
        # Read when asked: a bench starts the server before Django is set up.
        from django.conf import settings  # noqa: PLC0415

        cfg = settings.HINDSIGHT
        embeddings = cfg.embeddings_provider == "openai" and cfg.embeddings_base_url == self.base_url
        env = openai_compatible_env(
            self.base_url, api_key="test", model=cfg.llm_model or "scripted",
            embeddings_model=cfg.embeddings_model if embeddings else None,
            dimensions=cfg.embeddings_dimensions)
        env |= {"HINDSIGHT_API_LLM_MAX_RETRIES": str(cfg.llm_max_retries),
                "HINDSIGHT_API_LLM_TIMEOUT": str(cfg.llm_timeout_seconds)}
        if embeddings:
            env["HINDSIGHT_API_EMBEDDINGS_MAX_RETRIES"] = str(cfg.embeddings_max_retries)
        return env

    # request handling (called from server threads) -----------------------------------------

    def _release_holds(self) -> None:
        with self._lock:
            holds, self._holds = self._holds, []
        for hold in holds:
            hold.release()

    def _next_chat_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            self.requests.append(body)
            if self.refuse_strict_schema and _asks_strict_schema(body):
                return Reply.error(400, STRICT_SCHEMA_REFUSAL)
            refusal = self.quirks.refusal(body)
            if refusal is not None:
                return refusal
            if body.get("stream"):
                return Reply.error(400, "the scripted server does not stream; send stream=false")
            if self._replies:
                return self._replies.popleft()
            responder = self._responder
        if responder is not None:
            return responder(body)
        return None

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for name, args in reply.calls
            ]
        usage = reply.usage or _estimate_usage(body, reply)
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": usage,
        }

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.embedding_requests.append(body)
            failure = self._embedding_failures.popleft() if self._embedding_failures else None
            forced_dims = self.embedding_dimensions
            refuse_dimensions = self.refuse_embedding_dimensions
            fault = self.embedding_fault
        if failure is not None:
            return failure, _error_body(failure, "scripted embedding failure")
        if refuse_dimensions and "dimensions" in body:
            return 400, _error_body(
                400, "This model does not support specifying dimensions.", "dimensions"
            )
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return 400, _error_body(400, "input must be a string or a list of strings", "input")
        if any(t == "" for t in inputs):
            return 400, _error_body(400, "input cannot contain empty strings", "input")
        dims = forced_dims or int(body.get("dimensions") or DEFAULT_EMBEDDING_DIMENSIONS)
        tokens = sum(len(t.split()) for t in inputs)
        data = [
            {"object": "embedding", "index": i, "embedding": pseudo_embedding(t, dims)}
            for i, t in enumerate(inputs)
        ]
        if fault == "one_short":
            data = data[:-1]
        elif fault == "shuffled":
            data = data[::-1]
        elif fault == "nan":
            data[0]["embedding"][0] = float("nan")
        elif fault is not None:
            raise ValueError(f"embedding_fault {fault!r} is none of {EMBEDDING_FAULTS}")
        return 200, {
            "object": "list",
            "model": body.get("model", "scripted-embed"),
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _register_hold(self, hold: Hold) -> None:
        with self._lock:
            self._holds.append(hold)


def _connected(conn: socket.socket) -> bool:
    """Whether the client of a fully read HTTP/1.0 request still holds its end open."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True  # nothing to read and not closed: the client is waiting for the answer
    except OSError:
        return False


def _asks_strict_schema(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") == "json_schema"


def _estimate_usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """Whitespace-separated words stand in for tokens: deterministic and roughly proportional."""
    prompt = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            prompt += len(content.split())
        elif isinstance(content, list):
            prompt += sum(len(str(part.get("text", "")).split()) for part in content)
    completion = len((reply.content or "").split())
    completion += sum(len(json.dumps(args).split()) for _, args in reply.calls)
    return {"prompt_tokens": max(prompt, 1), "completion_tokens": max(completion, 1)}


def _error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_exceeded"
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def _handler_for(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so a scripted disconnect never poisons a pool.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
            return

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}],
                    },
                )
            else:
                self._send(404, _error_body(404, f"no route {self.path}"))

        def do_POST(self) -> None:  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, json.JSONDecodeError):
                self._send(400, _error_body(400, "request body is not JSON"))
                return
            path = self.path.rstrip("/")
            try:
                if path == "/v1/chat/completions":
                    self._chat(body)
                elif path == "/v1/embeddings":
                    self._send(*server._embeddings(body))
                else:
                    self._send(404, _error_body(404, f"no route {self.path}"))
            except Exception as exc:  # a broken responder shows up in the test, not in stderr
                self._send(500, _error_body(500, f"scripted server error: {exc!r}"))

        def _chat(self, body: dict[str, Any]) -> None:
            key = server._enter(body, self.connection)
            try:
                self._chat_reply(body)
            finally:
                server._leave(key, self.connection)

        def _chat_reply(self, body: dict[str, Any]) -> None:
            reply = server._next_chat_reply(body)
            if reply is None:
                self._send(
                    500,
                    _error_body(
                        500,
                        "no scripted reply: the test did not script() an answer for this "
                        "chat request and set no respond_with()",
                    ),
                )
                return
            while reply.kind in ("delay", "hold"):
                if reply.kind == "delay":
                    time.sleep(reply.seconds)
                else:
                    assert reply.handle is not None
                    server._register_hold(reply.handle)
                    reply.handle._received.set()
                    reply.handle._released.wait(MAX_HOLD_SECONDS)
                assert reply.inner is not None
                reply = reply.inner
            if reply.kind == "disconnect":
                self.close_connection = True
                self.connection.close()
                return
            if reply.kind == "error":
                headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                self._send(reply.status, _error_body(reply.status, reply.message), headers)
                return
            if reply.kind == "raw":
                self._send_bytes(reply.status, (reply.content or "").encode())
                return
            completion = server._completion(body, reply)
            if reply.kind == "without_choices":
                del completion["choices"]
                self._send(200, completion)
                return
            self._send(200, server.quirks.apply(body, completion, lock=server._lock))

        def finish(self) -> None:
            try:
                super().finish()
            except OSError:
                pass  # a scripted disconnect already closed the socket

        def _send(self, status: int, payload: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), headers)

        def _send_bytes(self, status: int, data: bytes,
                        headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout) before the answer was ready

    return Handler


# --------------------------------------------------------------------------------------------
# Quirks of real servers and models

THINKING = "<think>\nThe user wants JSON. Let me think about {\"draft\": true} first.\n</think>\n\n"
ORPHAN_THINKING = "The user wants an answer; I reason before it.\n</think>\n\n"
PROSE_BEFORE = "Sure! Here is the JSON you asked for:\n\n"
PROSE_AFTER = "\n\nLet me know if you need anything else."
RESPONSE_FORMAT_REFUSAL = "response_format is not supported by this model"


@dataclass
class Quirks:
    """How the server's answers differ from a well-behaved server's, as real ones do.

    Answers (applied to every chat answer, scripted or from a responder):
      ``think``             a ``<think>…</think>`` block before the content (a reasoning model
                            served without a reasoning parser: DeepSeek-R1, Qwen3 on Ollama,
                            vLLM or LM Studio);
      ``orphan_think``      the thinking ends in a ``</think>`` whose opening tag was in the
                            prompt (chat templates that open the block themselves);
      ``reasoning_content`` the thinking beside the content, as DeepSeek's API sends it;
      ``prose``             JSON content wrapped in a sentence (a server ignoring
                            ``response_format``);
      ``fence``             JSON content in a Markdown code fence;
      ``needs_schema``      the model answers the asked shape only when the request shows it the
                            schema (``response_format`` json_schema, or the schema's JSON in a
                            message); otherwise ``{"answer": …}``, a shape of its own;
      ``ignore_response_format``  ``response_format`` is accepted and dropped before the model
                            sees it (Anthropic's OpenAI-compatible endpoint);
      ``cut_off``           the next that many answers stop half-way, ``finish_reason: length``;
      ``broken_tool_arguments``  the next that many answers with tool calls carry arguments cut
                            in half (not JSON).
    Refusals (a 400 before any answer):
      ``refuse_json_schema``  to ``response_format`` json_schema (servers that only know
                              ``json_object``);
      ``refuse_response_format``  to any ``response_format``;
      ``refuse_tools``      to any request with tools: "<model> does not support tools", Ollama's
                            answer for a model without tool calling;
      ``refuse_reasoning_effort``  to any request with ``reasoning_effort`` (a model that does
                            not reason, in OpenAI's words).
    """

    think: bool = False
    orphan_think: bool = False
    reasoning_content: bool = False
    prose: bool = False
    fence: bool = False
    needs_schema: bool = False
    ignore_response_format: bool = False
    cut_off: int = 0
    broken_tool_arguments: int = 0
    refuse_json_schema: bool = False
    refuse_response_format: bool = False
    refuse_tools: bool = False
    refuse_reasoning_effort: bool = False

    def refusal(self, body: dict[str, Any]) -> Reply | None:
        fmt = body.get("response_format")
        if fmt and self.refuse_response_format:
            return Reply.error(400, RESPONSE_FORMAT_REFUSAL)
        if self.refuse_json_schema and _asks_strict_schema(body):
            return Reply.error(400, STRICT_SCHEMA_REFUSAL)
        if self.refuse_reasoning_effort and "reasoning_effort" in body:
            return Reply.error(400, "Unsupported parameter: 'reasoning_effort' is not supported "
                                    "with this model.")
        if self.refuse_tools and body.get("tools"):
            return Reply.error(400, f"registry.ollama.ai/library/{body.get('model')} does not "
                                    "support tools")
        return None

    def apply(self, body: dict[str, Any], completion: dict[str, Any], *,
              lock: threading.Lock) -> dict[str, Any]:
        """``completion`` (a chat completion's JSON) as this server would send it."""
        choice = completion["choices"][0]
        message = choice["message"]
        content = message.get("content")
        calls = message.get("tool_calls") or []
        with lock:
            cut = self.cut_off > 0
            self.cut_off -= cut
            broken = bool(calls) and self.broken_tool_arguments > 0
            self.broken_tool_arguments -= broken
        seen = {k: v for k, v in body.items() if k != "response_format"} \
            if self.ignore_response_format else body
        if self.needs_schema and isinstance(content, str) and _is_json(content) \
                and not _shows_schema(seen):
            content = json.dumps({"answer": content})
        if self.fence and isinstance(content, str) and _is_json(content):
            content = "```json\n" + content + "\n```"
        if self.prose and isinstance(content, str) and _is_json(content):
            content = PROSE_BEFORE + content + PROSE_AFTER
        if cut:
            content = None if content is None else content[: len(content) // 2]
            choice["finish_reason"] = "length"
        if cut or broken:
            for call in calls:
                arguments = call["function"]["arguments"]
                call["function"]["arguments"] = arguments[: max(1, len(arguments) // 2)]
        if self.think:
            content = THINKING + (content or "")
        if self.orphan_think:
            content = ORPHAN_THINKING + (content or "")
        if self.reasoning_content:
            message["reasoning_content"] = "First I read the request, then I answer it."
        message["content"] = content
        return completion


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _shows_schema(body: dict[str, Any]) -> bool:
    """Whether the request shows the model a JSON schema: enforced, or written into a message."""
    return _asks_strict_schema(body) or any(
        '"properties"' in str(m.get("content") or "") for m in body.get("messages", []))
