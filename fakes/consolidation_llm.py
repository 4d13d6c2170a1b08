"""A scripted "model" for consolidation tests: extracts each retained text as one fact,
consolidates each round's facts into one observation citing them all, and answers a reflect
loop from what its tools returned (so a document shows which memories it read).

By default every reply carries the same usage (``PROMPT_TOKENS`` / ``COMPLETION_TOKENS``), so
the LLM request log's token sums can be checked against the number of requests the server
received; ``usage=None`` lets the server estimate it from the words sent (the benchmark).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from fakes.llm_server import Reply, ScriptedLLMServer, tool_results

PROMPT_TOKENS = 11
COMPLETION_TOKENS = 5
USAGE = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
_FACT = re.compile(r"^(F\d+): (.*)$", re.M)


def schema_name(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name")


def is_consolidation(body: dict[str, Any]) -> bool:
    return schema_name(body) == "consolidation"


def texts_read(body: dict[str, Any]) -> list[str]:
    """Texts of every observation and fact the tools returned in this request."""
    texts = []
    for result in tool_results(body):
        for key in ("observations", "facts"):
            texts += [item["text"] for item in result.get(key, [])]
    return texts


class ConsolidatingLLM:
    def __init__(self, server: ScriptedLLMServer, *, fail_consolidations: int = 0,
                 usage: dict[str, int] | None = USAGE) -> None:
        self.server = server
        self.usage = usage
        self.fail_consolidations = fail_consolidations
        self._lock = threading.Lock()
        server.respond_with(self.respond)

    def respond(self, body: dict[str, Any]) -> Reply:
        name = schema_name(body)
        user = body["messages"][-1].get("content") or ""
        if name == "retain_facts":
            text = user.split("\n\n")[-1]
            return Reply.json({"facts": [{"text": text, "fact_type": "world",
                                          "occurred_start": None, "occurred_end": None}]},
                              usage=self.usage)
        if name == "consolidation":
            with self._lock:
                if self.fail_consolidations > 0:
                    self.fail_consolidations -= 1
                    return Reply.error(400, "scripted consolidation failure")
            facts = _FACT.findall(user)
            return Reply.json({
                "create": [{"text": "Observed: " + "; ".join(t for _, t in facts),
                            "source_fact_ids": [label for label, _ in facts]}],
                "update": [], "delete": [],
            }, usage=self.usage)
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})],
                                    usage=self.usage)
        read = texts_read(body)
        ids = [item["id"] for result in tool_results(body)
               for key in ("observations", "facts") for item in result.get(key, [])]
        answer = "## Notes\n\n" + "\n".join(f"- {t}" for t in read) if read else "Nothing yet."
        return Reply.tool_calls([("done", {"answer": answer, "memory_ids": ids,
                                           "mental_model_ids": []})], usage=self.usage)
