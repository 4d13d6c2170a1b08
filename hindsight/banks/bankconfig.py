"""Per-bank configuration overrides (``GET/PATCH/DELETE …/config``): the keys, their rules.

Overrides live in ``Bank.config`` (only what a bank sets); the resolved view fills the rest
from the deployment settings. Keys may be sent in Python form (``retain_mission``) or in
environment-variable form (``HINDSIGHT_API_RETAIN_MISSION``), as upstream accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from hindsight.errors import FieldError, FieldErrors

Loc = tuple[str | int, ...]


def _int_min(minimum: int) -> Callable[[Any, Loc], Any]:
    def check(value: Any, loc: Loc) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(loc, "must be an integer", "int_type")
        if value < minimum:
            raise FieldError(loc, f"must be >= {minimum}", "greater_than_equal")
        return value

    return check


def _int_range(low: int, high: int) -> Callable[[Any, Loc], Any]:
    def check(value: Any, loc: Loc) -> Any:
        value = _int_min(low)(value, loc)
        if value > high:
            raise FieldError(loc, f"must be <= {high}", "less_than_equal")
        return value

    return check


def _bool(value: Any, loc: Loc) -> Any:
    if not isinstance(value, bool):
        raise FieldError(loc, "must be true or false", "bool_type")
    return value


def _str(value: Any, loc: Loc) -> Any:
    if not isinstance(value, str):
        raise FieldError(loc, "must be a string", "string_type")
    if "\x00" in value:
        raise FieldError(loc, "Null characters are not allowed.", "null_characters_not_allowed")
    return value


def _choice(*choices: str) -> Callable[[Any, Loc], Any]:
    def check(value: Any, loc: Loc) -> Any:
        if value not in choices:
            raise FieldError(loc, f"must be one of {', '.join(choices)}", "literal_error")
        return value

    return check


# key → (validator, default from the deployment). Defaults are read at call time.
FIELDS: dict[str, tuple[Callable[[Any, Loc], Any], Callable[[], Any]]] = {
    # Seconds, bounded so the floor stays a valid timedelta when a trigger adds it to a time.
    "mental_model_min_refresh_interval_seconds": (
        _int_range(0, 2**31 - 1),
        lambda: int(settings.HINDSIGHT.mental_model_min_refresh_interval_seconds),
    ),
    "enable_observations": (_bool, lambda: True),
    "reflect_mission": (_str, lambda: None),
    "retain_mission": (_str, lambda: None),
    "retain_extraction_mode": (
        _choice("concise", "verbose", "custom", "verbatim", "chunks"), lambda: "concise"
    ),
    "retain_custom_instructions": (_str, lambda: None),
    "retain_chunk_size": (_int_min(1), lambda: 3000),
    "retain_structured_chunk_size": (_int_min(1), lambda: None),
    "retain_max_attachments_per_chunk": (_int_min(0), lambda: None),
    "observations_mission": (_str, lambda: None),
    "enable_text_search": (_bool, lambda: True),
    "enable_temporal_retrieval": (_bool, lambda: True),
    "enable_graph_retrieval": (_bool, lambda: False),
    "enable_reranking": (_bool, lambda: False),
    "disposition_skepticism": (_int_range(1, 5), lambda: 3),
    "disposition_literalism": (_int_range(1, 5), lambda: 3),
    "disposition_empathy": (_int_range(1, 5), lambda: 3),
}

_ENV_PREFIX = "HINDSIGHT_API_"


def normalize_key(key: str) -> str:
    if key.upper().startswith(_ENV_PREFIX):
        return key[len(_ENV_PREFIX):].lower()
    return key


def validate_updates(updates: dict[str, Any], *, loc: Loc = ("body", "updates")) -> dict[str, Any]:
    """Validated ``{key: value}``; ``None`` means "drop the override". Names every bad key."""
    errors: list[dict[str, object]] = []
    clean: dict[str, Any] = {}
    for raw_key, value in updates.items():
        key = normalize_key(raw_key)
        if key not in FIELDS:
            errors.append(
                {"loc": [*loc, raw_key], "type": "extra_forbidden",
                 "msg": f"unknown bank configuration key {raw_key!r} "
                        f"(known: {', '.join(sorted(FIELDS))})"}
            )
            continue
        if value is None:
            clean[key] = None
            continue
        try:
            clean[key] = FIELDS[key][0](value, (*loc, raw_key))
        except FieldError as exc:
            errors.extend(exc.errors)
    if errors:
        raise FieldErrors(errors)
    return clean


def resolved(overrides: dict[str, Any]) -> dict[str, Any]:
    return {key: overrides.get(key, default()) for key, (_, default) in FIELDS.items()}
