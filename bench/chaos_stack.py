"""The chaos run's stack and its LLM, which ``fuzz``, ``scaling`` and ``bench_capacity`` start too.

- ``ChaosLLM``: the scripted OpenAI-compatible server (``fakes.llm_server``) answering whatever
  the service asks — a refresh's reflect loop and delta operations, consolidation, extraction —
  after a random delay, recording every answer it gave each model (the mark ``[chaos:<id>]`` in
  a model's source query names it), with an outage per model and a hold of a model's requests;
- ``Stack``: ``hindsight.devstack.stack``'s, throw-away, on that LLM, with engine timings short
  enough for a run of minutes (``TIMINGS``), an access log of one line a request, and the
  faults: a worker child's or process's SIGKILL, a broker restart, a PostgreSQL crash-restart,
  and a worker cut off the network (``CutLinks``: it reaches PostgreSQL and the broker through
  ``bench.netcut`` proxies that hold its bytes, then deliver them late).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.netcut import CutProxy
from fakes.llm_server import Reply, ScriptedLLMServer, returned_ids
from hindsight.devstack import stack as devstack
from hindsight.devstack.stack import openai_compatible_env

MODEL_MARK = re.compile(r"\[chaos:([a-z0-9-]+)\]")
MAX_RETRIES = 3

# Short engine timings so a run takes minutes, not hours (all settable in production too).
TIMINGS = {
    "HINDSIGHT_API_WORKER_LOCK_TTL_SECONDS": "3",
    "HINDSIGHT_API_WORKER_HEARTBEAT_SECONDS": "0.5",
    "HINDSIGHT_API_WORKER_RECOVERY_THRESHOLD_SECONDS": "6",
    "HINDSIGHT_API_WORKER_REDISPATCH_AFTER_SECONDS": "5",
    "HINDSIGHT_API_WORKER_RECOVERY_INTERVAL_SECONDS": "1",
    "HINDSIGHT_API_WORKER_RELEASE_INTERVAL_SECONDS": "1",
    "HINDSIGHT_API_WORKER_MAX_RETRIES": str(MAX_RETRIES),
    "HINDSIGHT_API_WORKER_TASK_RETRY_BACKOFF_SECONDS": "0.5",
    "HINDSIGHT_API_WORKER_TASK_RETRY_BACKOFF_MAX_SECONDS": "3",
    "HINDSIGHT_API_WORKER_PUBLISH_RETRIES": "1",
    "HINDSIGHT_API_REFLECT_WALL_TIMEOUT": "40",
    "HINDSIGHT_API_WORKER_TASK_SOFT_TIME_LIMIT": "45",
    "HINDSIGHT_API_WORKER_TASK_TIME_LIMIT": "50",
    "HINDSIGHT_API_BROKER_VISIBILITY_TIMEOUT": "120",
    "HINDSIGHT_API_MENTAL_MODEL_REFRESH_TICK_SECONDS": "2",
    "HINDSIGHT_API_LLM_MAX_RETRIES": "0",
    "HINDSIGHT_API_LLM_TIMEOUT": "20",
}


# ---------------------------------------------------------------------------------------------
# The scripted LLM: answers in 50–300 ms, records every answer it gave per model


def _model_of(body: dict[str, Any]) -> str | None:
    """The mental model a chat request is for: the marker in its question (the source query)."""
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            found = MODEL_MARK.search(content)
            if found:
                return found.group(1)
    return None



def _mentions(obj: Any, word: str) -> bool:
    return word in json.dumps(obj, default=str)


def _instance(schema: Any, nonce: str) -> Any:
    """A small value valid for ``schema`` (structured-output asks the harness cannot know in
    advance: consolidation, delta operations). An array of delta operations gets one
    ``add_section`` (it names no id, so it always applies)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            options = schema[combinator]
            if _mentions(options, "add_section"):
                for option in options:
                    if _mentions(option, '"add_section"'):
                        return _instance(option, nonce)
            return _instance(options[0], nonce)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {name: _instance(props[name], nonce) for name in schema.get("required", props)}
        if out.get("op") == "add_section":
            out.update({"heading": f"Update {nonce}", "blocks": [f"Learned {nonce}."]})
            if "after_section_id" in out:
                out["after_section_id"] = None  # at the end: names no id, so it always applies
        return out
    if kind == "array":
        items = schema.get("items", {})
        if _mentions(items, "add_section"):
            return [_instance(items, nonce)]
        return [] if not schema.get("minItems") else [_instance(items, nonce)]
    if kind == "string":
        return f"text {nonce}"
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


class ChaosLLM:
    def __init__(self, delay: tuple[float, float] = (0.05, 0.3)) -> None:
        self.delay = delay
        self.server = ScriptedLLMServer().start()
        self.rng = random.Random(1)
        self.lock = threading.Lock()
        self.answers: dict[str, set[str]] = {}
        self.outage: set[str] = set()  # models answered 503
        # model → (a request of it is held, release it): a PATCH sent while one is held is
        # sent during a refresh, which cannot finish before it is released.
        self.holds: dict[str, tuple[threading.Event, threading.Event]] = {}
        # Every chat request: (when, the model named in the request — a worker's
        # HINDSIGHT_API_LLM_MODEL, so a cut worker's requests are told apart —, the mental
        # model, the answer it ends with or None).
        self.calls: list[tuple[float, str | None, str | None, str | None]] = []
        self.server.track_concurrency(_model_of)
        self.server.respond_with(self.respond)

    def respond(self, body: dict[str, Any]) -> Reply:
        model = _model_of(body)
        nonce = uuid.uuid4().hex[:12]
        with self.lock:
            self.calls.append((time.time(), body.get("model"), model, None))
            delay = self.rng.uniform(*self.delay)
            failing = model is not None and model in self.outage
            hold = self.holds.get(model) if model is not None else None
        if hold is not None:
            hold[0].set()
            hold[1].wait(10)
        if failing:
            return Reply.delay(delay, Reply.error(503, "scripted outage"))
        return Reply.delay(delay, self._answer(body, model, nonce))

    def _answer(self, body: dict[str, Any], model: str | None, nonce: str) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
            spec = fmt.get("json_schema") or {}
            schema = spec.get("schema") or {}
            if ("operations" in schema.get("properties", {}) or "delta" in spec.get("name", "")
                    or (not schema and _mentions(body.get("messages"), '"operations"'))):
                # Delta mode's ask: one section added at the end (names no id: always applies).
                return Reply.json({"operations": [{"op": "add_section",
                                                   "heading": f"Update {nonce}",
                                                   "blocks": [f"Learned {nonce}."]}]})
            return Reply.json(_instance(schema, nonce))
        tools = body.get("tools") or []
        names = [t.get("function", {}).get("name") for t in tools]
        for tool in tools:  # a delta pipeline asking for operations through a tool
            function = tool.get("function", {})
            if function.get("name") != "done" and _mentions(function, "add_section"):
                return Reply.tool_calls([(function["name"],
                                          _instance(function.get("parameters", {}), nonce))])
        if "recall" in names and not returned_ids(body, first=3):  # forced lookups released: look first
            return Reply.tool_calls([("recall", {"query": "team"})])
        if "done" in names or not tools:
            answer = f"## {model or 'answer'}\n\nAnswer {nonce} about the team.\n\n- point {nonce}"
            if model is not None:
                with self.lock:
                    self.answers.setdefault(model, set()).add(answer)
                    self.calls.append((time.time(), body.get("model"), model, answer))
            if not tools:
                return Reply.text(answer)
            return Reply.tool_calls([("done", {"answer": answer, "memory_ids": returned_ids(body, first=3),
                                               "mental_model_ids": []})])
        return Reply.tool_calls([(names[0], {"query": "team"})])

    def hold(self, model: str) -> threading.Event:
        """Hold the model's chat requests until ``release``; the event says one is held."""
        with self.lock:
            self.holds[model] = (threading.Event(), threading.Event())
            return self.holds[model][0]

    def release(self, model: str) -> None:
        with self.lock:
            hold = self.holds.pop(model, None)
        if hold is not None:
            hold[1].set()

    def requests_for(self, models: set[str]) -> int:
        return sum(self.server.requests_by_key.get(m, 0) for m in models)

    def answered(self, *, sender: str, since: float, model: str | None = None) -> list[str]:
        """The final answers given to ``sender``'s requests (of ``model``) from ``since`` on."""
        with self.lock:
            return [answer for at, who, mm, answer in self.calls
                    if answer is not None and who == sender and at >= since
                    and (model is None or mm == model)]

    def requests_of(self, *, sender: str, since: float) -> int:
        with self.lock:
            return sum(1 for at, who, _mm, answer in self.calls
                       if answer is None and who == sender and at >= since)


# ---------------------------------------------------------------------------------------------
# The stack


class Stack(devstack.Stack):
    """The chaos run's stack: ``hindsight.devstack.stack``'s, throw-away, on the scripted LLM,
    with short engine timings, an access log of one line a request, and the faults."""

    def __init__(self, scratch: Path, concurrency: int, llm: ChaosLLM, api_key: str | None = None,
                 pool: str = "prefork", durable: bool = False):
        # A crash-restart needs a durable PostgreSQL: without it (fsync and synchronous_commit
        # off, the test servers' setting) PostgreSQL itself may drop commits it acknowledged.
        # The broker never is: a restart loses its queue and locks.
        super().__init__(scratch, durable=durable, durable_broker=False, env={
            "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
            "HINDSIGHT_API_TASK_QUEUE": f"chaos-{uuid.uuid4().hex[:6]}",
            **openai_compatible_env(llm.server.base_url, api_key="chaos"),
            "PYTHONUNBUFFERED": "1",
            **TIMINGS,
            **({"HINDSIGHT_API_TENANT_API_KEY": api_key} if api_key else {}),
        })
        self.concurrency = concurrency
        self.pool = pool
        self.access_log = scratch / "access.log"  # "METHOD /path STATUS", one line a request

    def start(self, workers: int, api_workers: int = 2) -> None:
        self.start_servers()
        self.migrate(verbosity=0)
        self.start_chaos_api(api_workers)
        self.start_beat(max_interval=1)
        for _ in range(workers):
            self.start_worker()
        self.wait_healthy(90)
        self.wait_workers_ready()

    def start_chaos_api(self, processes: int = 2) -> None:
        """The API under gunicorn: eight request threads in all, over ``processes`` processes
        (each imports the whole service: one is a second of CPU less to start)."""
        self.start_api(workers=processes, threads=max(1, 8 // processes), timeout=60,
                       log_level="warning", access_log=str(self.access_log),
                       access_format="%(m)s %(U)s %(s)s")

    def start_worker(  # type: ignore[override]
        self, env: dict[str, str] | None = None
    ) -> devstack.Process:
        return super().start_worker(concurrency=self.concurrency, pool=self.pool,
                                    queue=self.env["HINDSIGHT_API_TASK_QUEUE"], env=env)

    def start_cut_worker(self, links: CutLinks) -> devstack.Process:
        """A worker that reaches PostgreSQL and the broker only through ``links`` and names
        itself to the LLM as ``CUT_SENDER`` (its requests are told apart)."""
        return self.start_worker(env=links.env(self))

    def discard(self) -> None:
        """The end of a throw-away run, its report made: every process SIGKILLed (a warm
        shutdown of the workers alone takes seconds, and nothing is left to check), then the
        servers stopped."""
        for process in self.processes():
            with contextlib.suppress(Exception):
                process.kill()
        self.stop()

    def children(self) -> dict[int, devstack.Process]:
        return {child: w for w in self.live_workers() for child in w.children()}

    def restart_broker(self) -> None:
        assert self.valkey is not None
        self.valkey.kill()  # not durable: its queue and locks are gone with it
        time.sleep(1.0)
        self.valkey.start()

    def restart_postgres(self) -> None:
        assert self.pg is not None and self.pg.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.pg.process.send_signal(signal.SIGQUIT)  # immediate shutdown: crash recovery
        self.pg.process.wait(30)
        time.sleep(1.0)
        self.pg.start()


# ---------------------------------------------------------------------------------------------
# A worker cut off the network

CUT_SENDER = "scripted-cut"  # the LLM model a cut worker names in its requests


def _via(url: str, port: int) -> str:
    """``url`` with its port replaced: the same server, reached through a proxy on ``port``."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)
    netloc = (host[0] + "@" if len(host) == 2 else "") + f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


class CutLinks:
    """The proxies one worker reaches PostgreSQL and the broker (its locks too) through."""

    def __init__(self, stack: Stack) -> None:
        assert stack.pg is not None and stack.valkey is not None
        self.postgres = CutProxy(("127.0.0.1", stack.pg.port), name="postgres-cut").start()
        self.broker = CutProxy(("127.0.0.1", stack.valkey.port), name="broker-cut").start()

    def env(self, stack: Stack) -> dict[str, str]:
        return {"HINDSIGHT_API_DATABASE_URL": _via(stack.database_url, self.postgres.port),
                "HINDSIGHT_API_REDIS_URL": _via(stack.redis_url, self.broker.port),
                "HINDSIGHT_API_LLM_MODEL": CUT_SENDER}

    def hold(self) -> None:
        self.postgres.hold()
        self.broker.hold()

    def refuse(self) -> None:
        self.postgres.refuse()
        self.broker.refuse()

    def heal(self) -> None:
        self.postgres.heal()
        self.broker.heal()

    def stop(self) -> None:
        self.postgres.stop()
        self.broker.stop()
