"""The request body parser: DRF's JSON parser, answering as a parse error (a 422 naming the body)
what would otherwise fail later with a 500:

- nesting too deep to decode (a ``RecursionError``);
- a lone UTF-16 surrogate (``"\\ud800"`` unpaired): JSON's escapes allow it, Python decodes it
  into a ``str``, and it cannot be encoded as UTF-8, so PostgreSQL (or any response echoing it)
  fails on it. A pair of escapes that makes one character is decoded into that character and
  is fine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


def _holds_lone_surrogate(data: Any) -> bool:
    """Whether any string of ``data`` (keys included, at any depth) holds a lone surrogate.
    Iterative, so nesting depth cannot overflow."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
        if _holds_lone_surrogate(data):
            raise ParseError("JSON parse error - a string holds a lone surrogate escape "
                             "(\\ud800-\\udfff without its pair), which is not text")
        return data
