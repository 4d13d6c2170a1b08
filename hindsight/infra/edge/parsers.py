"""The request body parser: DRF's JSON parser, with nesting too deep to decode answered as a
parse error (a 422 naming the body) instead of a ``RecursionError`` (a 500)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
