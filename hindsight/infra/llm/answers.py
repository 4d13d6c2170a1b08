"""Reading what a model wrote: the answer without its reasoning, and the JSON inside it.

Real servers do not always answer as asked. A reasoning model served without a reasoning parser
writes its chain of thought into the content (``<think>…</think>``, or only the closing tag when
the chat template put the opening one in the prompt); a server that ignores ``response_format``
wraps the JSON in a Markdown fence or in a sentence ("Sure! Here is the JSON: {…}"); a tool
call's arguments come fenced, in prose, or as a Python literal. These functions take such an
answer apart; ``gateway`` calls them for every caller, so no caller sees the difference.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

# The tags reasoning models wrap their thinking in when it lands in the content.
_TAGS = "think|thinking|thought|reasoning"
_CLOSED_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.S | re.I)
_OPEN_TAG = re.compile(rf"<(?:{_TAGS})>", re.I)
_CLOSE_TAG = re.compile(rf"</(?:{_TAGS})>", re.I)
# An opening tag at the start of a line that is never closed: thinking cut short. Only at a
# line start, so a JSON string quoting "<think>" stays content.
_UNCLOSED_BLOCK = re.compile(rf"(?m)^[ \t]*<(?:{_TAGS})>(?![\s\S]*</(?:{_TAGS})>)[\s\S]*\Z", re.I)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?[ \t]*```", re.S)
# How many opening braces of a prose answer are tried as the start of its JSON value.
_MAX_JSON_STARTS = 64


def strip_reasoning(text: str) -> str:
    """``text`` without the reasoning a model wrote into it.

    Three shapes: a closing tag with no opening one before it (the chat template opened the
    block in the prompt: everything up to it is thinking), closed blocks wherever they are,
    and an opening tag never closed (thinking cut short: everything from it on).
    """
    first_close = _CLOSE_TAG.search(text)
    first_open = _OPEN_TAG.search(text)
    starts_as_json = text.lstrip().startswith(("{", "[", "```"))
    if first_close and (first_open is None or first_close.start() < first_open.start()) \
            and not starts_as_json:
        text = text[first_close.end():]
    text = _CLOSED_BLOCK.sub("", text)
    text = _UNCLOSED_BLOCK.sub("", text)
    return text.strip()


def strip_fence(text: str) -> str:
    """The body of an answer that is one Markdown code fence; any other text as it is."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and stripped.count("```") == 2:
        body = stripped[3:-3]
        first, _, rest = body.partition("\n")
        # The info string ("json") is on the fence's first line.
        return (rest if first.strip().isidentifier() or not first.strip() else body).strip()
    return stripped


def json_values(text: str) -> Iterator[Any]:
    """Every JSON value ``text`` may be holding, most likely first: the whole text, the body of
    each fenced block, then the values that start at its opening braces/brackets (prose
    around the JSON)."""
    whole = strip_fence(text)
    seen: set[str] = set()
    for candidate in (whole, *(m.group(1) for m in _FENCE.finditer(text))):
        candidate = candidate.strip()
        if candidate in seen:
            continue
        seen.add(candidate)
        try:
            yield json.loads(candidate)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(whole) if ch in "{["][:_MAX_JSON_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(whole, start)
        except ValueError:
            continue
        yield value


def find_json(text: str, accept: Callable[[Any], bool]) -> tuple[Any, bool]:
    """The first JSON value in ``text`` that ``accept`` takes, else the first one found (and
    False), else raises ``ValueError``."""
    first: tuple[Any, bool] | None = None
    for value in json_values(text):
        if accept(value):
            return value, True
        if first is None:
            first = (value, False)
    if first is None:
        raise ValueError("no JSON value in the answer")
    return first


def tool_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, repaired when a model wrapped or misquoted them;
    ``({}, why)`` when no JSON object can be read from them."""
    if not raw.strip():
        return {}, None
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        error = f"tool arguments are not valid JSON: {exc}"
    else:
        if isinstance(parsed, dict):
            return parsed, None
        return {}, f"tool arguments must be a JSON object, got {type(parsed).__name__}"
    text = strip_reasoning(raw)
    try:
        value, _ = find_json(text, lambda v: isinstance(v, dict))
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value, None
    # Single-quoted keys and True/None: a Python dict where JSON was asked for.
    try:
        literal = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        literal = None
    if isinstance(literal, dict) and all(isinstance(k, str) for k in literal):
        try:
            return json.loads(json.dumps(literal)), None
        except (TypeError, ValueError):
            pass
    return {}, error
