"""A scripted "model" for delta refreshes: the reflect loop cites every memory its tools returned,
and the ops call answers whatever the test's ``ops`` function makes of the request.

``ops(call)`` gets a ``DeltaCall`` (the outline of the document as the pipeline showed it, the
fact lines, the retracted facts' lines, the attempt number, the retry message if any) and returns
the operations list, or a string to send as an unreadable answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fakes.llm_server import Reply, reflect_reply

_OUTLINE = re.compile(r"Current document \(sections and blocks with their ids\):\n(.*?)\n\n"
                      r"(?:Retracted facts|The document already reflects|New facts)", re.S)
_FACT = re.compile(r"^\d+\. \[[^\]]*\] (.*?)(?: \(context: .*\))?$", re.M)
_RETRACTED = re.compile(r"^Retracted facts [^\n]*\n((?:\d+\. [^\n]*\n?)+)", re.M)
_RETRACTED_LINE = re.compile(r"^\d+\. (.*) — (removed|edited)(?:; it now reads: (.*)| \(.*\))$", re.M)


@dataclass
class DeltaCall:
    outline: list[dict[str, Any]]
    facts: list[str]
    # The retracted facts shown: (text as the document recorded it, "removed" or "edited", the
    # text an edited one has now).
    retracted: list[tuple[str, str, str | None]]
    attempt: int
    retry_message: str | None
    body: dict[str, Any]

    def section(self, section_id: str) -> dict[str, Any]:
        return next(s for s in self.outline if s["section_id"] == section_id)


def is_delta_call(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["name"] == "delta_operations"
    return any("edit operations" in str(m.get("content")) for m in body.get("messages", [])
               if m.get("role") == "system")


def parse_delta_call(body: dict[str, Any]) -> DeltaCall:
    messages = body["messages"]
    first = next(m["content"] for m in messages if m["role"] == "user")
    match = _OUTLINE.search(first)
    assert match, first
    outline = json.loads(match.group(1))
    facts_part = first.split("New facts, oldest first:\n", 1)[1]
    retracted = _RETRACTED.search(first)
    users = [m for m in messages if m["role"] == "user"]
    return DeltaCall(
        outline=outline, facts=_FACT.findall(facts_part),
        retracted=[(text, kind, now or None) for text, kind, now
                   in _RETRACTED_LINE.findall(retracted.group(1))] if retracted else [],
        attempt=len(users),
        retry_message=users[-1]["content"] if len(users) > 1 else None, body=body,
    )


def delta_llm(server, ops: Callable[[DeltaCall], Any], *, answer: str = "## Notes\n\nnew facts",
              structured: Callable[[dict[str, Any]], Any] | None = None) -> list[DeltaCall]:
    """Script ``server``; returns the list the ops calls are appended to."""
    calls: list[DeltaCall] = []
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("response_format") or not body.get("tools"):
            if is_delta_call(body):
                call = parse_delta_call(body)
                with lock:
                    calls.append(call)
                out = ops(call)
                return Reply.text(out) if isinstance(out, str) else Reply.json({"operations": out})
            if structured is not None:
                return Reply.json(structured(body))
            return Reply.text(answer)
        return reflect_reply(body, answer)

    server.respond_with(respond)
    return calls


def append_each_fact(section_id: str) -> Callable[[DeltaCall], list[dict[str, Any]]]:
    """Ops that append every new fact as a block of ``section_id``."""
    return lambda call: [{"op": "append_block", "section_id": section_id, "markdown": f"- {fact}"}
                         for fact in call.facts]


def remove_retracted(call: DeltaCall) -> list[dict[str, Any]]:
    """Ops that remove every block saying a retracted fact's recorded text, replace it with the
    text an edited one has now, and append the window's facts to the last section."""
    ops: list[dict[str, Any]] = []
    for section in call.outline:
        for block in section["blocks"]:
            hit = next(((text, now) for text, _kind, now in call.retracted
                        if text and text in block["markdown"]), None)
            if hit is None:
                continue
            text, now = hit
            if now:
                ops.append({"op": "replace_block", "section_id": section["section_id"],
                            "block_id": block["block_id"],
                            "markdown": block["markdown"].replace(text, now)})
            else:
                ops.append({"op": "remove_block", "section_id": section["section_id"],
                            "block_id": block["block_id"]})
    last = call.outline[-1]["section_id"]
    rewritten = {now for _text, _kind, now in call.retracted if now}
    return ops + [{"op": "append_block", "section_id": last, "markdown": f"- {fact}"}
                  for fact in call.facts if fact not in rewritten]
