"""The whole service live for the surface tests (CLI, MCP, Node client): one fixture.

``live_stack`` = pytest-django's ``live_server`` (the real Django app on a free port) + one real
Celery worker (``tests.workers``) + the scripted OpenAI-compatible LLM and embeddings
(``fakes.llm_server``). ``write_documents`` scripts the LLM so a refresh of a model whose source
query contains a key writes that key's document, citing every memory its tools returned.
The surfaces talk to ``live_stack.url`` over HTTP only, like a user's machine would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from fakes.llm_server import Reply, ScriptedLLMServer
from tests.workers import WorkerFactory, wait_until


@dataclass
class LiveStack:
    url: str
    llm: ScriptedLLMServer
    workers: WorkerFactory

    def http(self, **headers: str) -> httpx2.Client:
        return httpx2.Client(base_url=self.url + "/v1/default", timeout=30.0, headers=headers)

    def seed(self, bank: str, memories: list[tuple[str, list[str]]]) -> list[str]:
        """Create ``bank`` and retain each ``(text, tags)`` verbatim; the memory ids."""
        with self.http() as http:
            http.put(f"/banks/{bank}", json={"name": bank}).raise_for_status()
            items = [{"content": text, "tags": tags, "strategy": "verbatim"}
                     for text, tags in memories]
            http.post(f"/banks/{bank}/memories", json={"items": items}).raise_for_status()
            listed = http.get(f"/banks/{bank}/memories/list").json()
        return [item["id"] for item in listed["items"]]

    def wait_operation(self, bank: str, operation_id: str, timeout: float = 90.0) -> dict[str, Any]:
        with self.http() as http:
            def final() -> dict[str, Any] | None:
                op: dict[str, Any] = http.get(f"/banks/{bank}/operations/{operation_id}").json()
                return op if op["status"] in ("completed", "failed", "cancelled") else None

            result: dict[str, Any] = wait_until(final, timeout, interval=0.2,
                                                message=f"operation {operation_id}")
            return result


def write_documents(server: ScriptedLLMServer, by_query: Mapping[str, str | list[str]]) -> None:
    """Forced turns call their tool; the free turn answers the model's source query.

    A list of answers is used one per refresh (or dry run), the last one repeating.
    """
    lock = threading.Lock()
    queues = {q: list(a) if isinstance(a, list) else [a] for q, a in by_query.items()}

    def respond(body: dict[str, Any]) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        ids: list[str] = []
        with lock:
            queue = next((a for q, a in queues.items() if q in first_user), ["no match"])
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            for message in body["messages"]:
                if message.get("role") == "tool":
                    payload = json.loads(message["content"])
                    for key in ("facts", "observations"):
                        ids += [item["id"] for item in payload.get(key, [])]
        return Reply.tool_calls([("done", {"answer": answer, "memory_ids": sorted(set(ids)),
                                           "mental_model_ids": []})])

    server.respond_with(respond)


def fail_every_llm_call(server: ScriptedLLMServer) -> None:
    server.respond_with(lambda body: Reply.error(400, "scripted: the model refuses"))


@pytest.fixture
def live_stack(  # type: ignore[no-untyped-def]
    live_server, scripted_llm, openai_embeddings, worker_factory
) -> LiveStack:
    # No retries: a failing refresh fails on its first attempt, so tests see it at once.
    worker_factory(env={**scripted_llm.env, "HINDSIGHT_API_WORKER_MAX_RETRIES": "0"})
    return LiveStack(url=live_server.url, llm=scripted_llm, workers=worker_factory)
