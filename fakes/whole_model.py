"""A scripted "model" for every call a retain and a refresh make, told apart by their prompts (not
by ``response_format``, which a quirky server may have made the gateway leave out):

- retain's extraction: one fact per sentence of the item;
- consolidation: changes nothing;
- the reflect loop: looks up what its forced turns ask for, then answers in text — a markdown
  document listing every fact the tools returned, with a ``Sources:`` line citing them;
- reflect without tools: the same document from the results in its prompt, as JSON;
- a delta refresh's edit operations: each new fact appended to the document's first titled
  section.

Paired with ``Quirks`` (``fakes.llm_server``) it is a real user's server: the answers are right,
the way they arrive is not.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fakes.delta_llm import is_delta_call, parse_delta_call
from fakes.llm_server import Reply, ScriptedLLMServer, tool_results

TITLE = "## Team"
_SENTENCE = re.compile(r"[^.!?]+[.!?]")
_RESULTS = re.compile(r"^Results of \w+:\n(.*)$", re.M)


def document(texts: list[str]) -> str:
    """The document a refresh writes from the memories it read."""
    return TITLE + "\n\n" + "\n".join(f"- {t.rstrip('.')}" for t in texts)


def _system(body: dict[str, Any]) -> str:
    return next((str(m.get("content") or "") for m in body.get("messages", [])
                 if m.get("role") == "system"), "")


def _last_user(body: dict[str, Any]) -> str:
    return next(str(m.get("content") or "") for m in reversed(body["messages"])
                if m.get("role") == "user")


def _memories(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for p in payloads for key in ("observations", "facts")
            for item in (p.get(key) or []) if isinstance(item, dict)]


def respond(body: dict[str, Any]) -> Reply:
    system = _system(body)
    if system.startswith("You extract durable facts"):
        text = _last_user(body).split("\n\n")[-1]
        return Reply.json({"facts": [
            {"text": s.strip(), "fact_type": "world", "occurred_start": None, "occurred_end": None}
            for s in _SENTENCE.findall(text)]})
    if system.startswith("You maintain the observations"):
        return Reply.json({"create": [], "update": [], "delete": []})
    if is_delta_call(body):
        call = parse_delta_call(body)
        section = next(s["section_id"] for s in call.outline if s.get("heading"))
        return Reply.json({"operations": [
            {"op": "append_block", "section_id": section, "markdown": f"- {fact.rstrip('.')}"}
            for fact in call.facts]})
    if "already been searched" in system:
        found = _memories([json.loads(m) for m in _RESULTS.findall(_last_user(body))])
        return Reply.json({"answer": document([m["text"] for m in found]),
                           "memory_ids": [m["id"] for m in found], "mental_model_ids": []})
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
    found = _memories(tool_results(body))
    return Reply.text(document([m["text"] for m in found]) + "\n\nSources: "
                      + ", ".join(m["id"] for m in found))


def whole_model(server: ScriptedLLMServer) -> ScriptedLLMServer:
    server.respond_with(respond)
    return server
