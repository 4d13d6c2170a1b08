"""The one table of input mistakes: for each kind, its FastAPI error ``type`` and its message.

Every endpoint's parser (``hindsight.infra.edge.serializers``) words a mistake from here, so the same
mistake reads the same on every route — ``?limit=abc`` is ``int_parsing``, "Input should be a
valid integer, unable to parse string as an integer", on the mental-model list, the memory list
and the operations list alike. The wording is pydantic's (upstream's), where upstream has the
kind; the rest is ours in the same style.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

#: kind → (FastAPI ``type``, message template). The message names the rule; ``loc`` the field.
PROBLEMS: dict[str, tuple[str, str]] = {
    "missing": ("missing", "Field required"),
    "extra_forbidden": ("extra_forbidden", "Extra inputs are not permitted"),
    "string_type": ("string_type", "Input should be a valid string"),
    "int_type": ("int_type", "Input should be a valid integer"),
    "float_type": ("float_type", "Input should be a valid number"),
    "bool_type": ("bool_type", "Input should be a valid boolean"),
    "list_type": ("list_type", "Input should be a valid list"),
    "dict_type": ("dict_type", "Input should be a valid dictionary"),
    "int_parsing": ("int_parsing",
                    "Input should be a valid integer, unable to parse string as an integer"),
    "bool_parsing": ("bool_parsing", "Input should be a valid boolean, unable to interpret input"),
    "greater_than_equal": ("greater_than_equal", "Input should be greater than or equal to {limit}"),
    "less_than_equal": ("less_than_equal", "Input should be less than or equal to {limit}"),
    "literal_error": ("literal_error", "Input should be {expected}"),
    "string_too_short": ("string_too_short", "String should have at least 1 character"),
    "blank": ("string_too_short", "String should have at least 1 non-blank character"),
    "string_too_long": ("string_too_long", "String should have at most {limit} characters"),
    "too_short": ("too_short", "List should have at least {limit} item(s)"),
    "too_long": ("too_long", "List should have at most {limit} items"),
    "datetime_parsing": ("datetime_parsing", "Input should be a valid datetime"),
    "uuid_parsing": ("uuid_parsing", "Input should be a valid UUID"),
    "null_characters": ("null_characters_not_allowed", "Null characters are not allowed."),
    "json_invalid": ("json_invalid", "JSON decode error: {error}"),
}


def expected(choices: Iterable[Any]) -> str:
    """pydantic's list of allowed literals: ``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    quoted = [repr(c) if not isinstance(c, str) else f"'{c}'" for c in choices]
    if len(quoted) <= 1:
        return "".join(quoted)
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def problem_type(kind: str) -> str:
    return PROBLEMS[kind][0]


def problem_message(kind: str, **context: Any) -> str:
    return PROBLEMS[kind][1].format(**context)


def problem(kind: str, loc: Sequence[str | int], **context: Any) -> dict[str, object]:
    """One item of a 422's ``detail``: ``{"loc", "msg", "type"}`` for a mistake of ``kind``."""
    return {"loc": list(loc), "msg": problem_message(kind, **context), "type": problem_type(kind)}
