"""Request parsing and response rendering for the mental-models API (upstream's wire format).

Parsing is strict: a body must be an object, unknown fields are a 422 naming them (a deliberate
difference from upstream, which ignores them), and every rule names its field. Rendering
follows upstream's field order; every key is always present and ``null`` when not part of the
requested detail level.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.http import QueryDict

from hindsight.errors import FieldErrors
from hindsight.tagscope import MAX_TAG_LENGTH
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.selectors import LIST_TAGS_MATCH
from mentalmodels.services import mental_model_id_problem
from mentalmodels.triggers import trigger_fill, trigger_normalize

DETAILS = ("metadata", "content", "full")
MAX_TOKENS_RANGE = (256, 8192)
LIST_LIMIT_MAX = 1000


def _err(loc: list[str | int], msg: str, type_: str = "value_error") -> dict[str, object]:
    return {"loc": loc, "msg": msg, "type": type_}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


NUL_MSG = "Null characters are not allowed."
# Offsets past PostgreSQL's bigint are a database error; no page is that far anyway.
OFFSET_MAX = 2**31 - 1


def _nul_errors(data: Any, loc: list[str | int]) -> list[dict[str, object]]:
    """Every place in ``data`` (keys and string values, at any depth) holding a NUL character:
    PostgreSQL text and jsonb cannot store one. Iterative, so nesting depth cannot overflow."""
    errors: list[dict[str, object]] = []
    stack: list[tuple[Any, list[str | int]]] = [(data, loc)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                errors.append(_err(where, NUL_MSG, "null_characters_not_allowed"))
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    errors.append(_err([*where, key], NUL_MSG, "null_characters_not_allowed"))
                else:
                    stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, index]) for index, item in enumerate(value))
    return errors


def _require_object(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise FieldErrors([_err(["body"], "the body must be a JSON object", "dict_type")])
    nul = _nul_errors(data, ["body"])
    if nul:
        raise FieldErrors(nul)
    return data


def _unknown(data: Mapping[str, Any], allowed: tuple[str, ...]) -> list[dict[str, object]]:
    return [
        _err(["body", key], f"unknown field {key!r}; allowed: {', '.join(allowed)}", "extra_forbidden")
        for key in data
        if key not in allowed
    ]


def _text(
    data: Mapping[str, Any], key: str, errors: list[dict[str, object]], *, required: bool
) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            errors.append(_err(["body", key], "Field required", "missing"))
        return None
    if not isinstance(value, str):
        errors.append(_err(["body", key], "must be a string", "string_type"))
        return None
    if not value.strip():
        errors.append(_err(["body", key], "must not be blank", "string_too_short"))
        return None
    return value


def _tags(data: Mapping[str, Any], errors: list[dict[str, object]]) -> list[str] | None:
    value = data.get("tags")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        errors.append(_err(["body", "tags"], "must be a list of strings", "list_type"))
        return None
    for index, tag in enumerate(value):
        # A longer tag would not fit one entry of the GIN index on tags (a database error).
        if len(tag) > MAX_TAG_LENGTH:
            errors.append(_err(["body", "tags", index],
                               f"a tag has at most {MAX_TAG_LENGTH} characters", "string_too_long"))
            return None
    return value


def _max_tokens(data: Mapping[str, Any], errors: list[dict[str, object]]) -> int | None:
    value = data.get("max_tokens")
    if value is None:
        return None
    low, high = MAX_TOKENS_RANGE
    if not _is_int(value):
        errors.append(_err(["body", "max_tokens"], "must be an integer", "int_type"))
        return None
    if value < low:
        errors.append(
            _err(["body", "max_tokens"], f"Input should be greater than or equal to {low}",
                 "greater_than_equal")
        )
        return None
    if value > high:
        errors.append(
            _err(["body", "max_tokens"], f"Input should be less than or equal to {high}", "less_than_equal")
        )
        return None
    return value


def _trigger(
    data: Mapping[str, Any], errors: list[dict[str, object]], base: Any = None
) -> dict[str, Any] | None:
    value = data.get("trigger")
    if value is None:
        return None
    try:
        trigger_normalize(value, base=base)
    except FieldErrors as exc:
        errors.extend(exc.errors)
        return None
    # The raw keys: the service merges them over the stored trigger itself.
    return dict(value)


CREATE_FIELDS = ("id", "name", "source_query", "tags", "max_tokens", "trigger")
UPDATE_FIELDS = ("name", "source_query", "tags", "max_tokens", "trigger")


def parse_create(data: Any) -> dict[str, Any]:
    data = _require_object(data)
    errors = _unknown(data, CREATE_FIELDS)
    out: dict[str, Any] = {
        "name": _text(data, "name", errors, required=True),
        "source_query": _text(data, "source_query", errors, required=True),
        "tags": _tags(data, errors) or [],
        "max_tokens": _max_tokens(data, errors) or 2048,
        "trigger": _trigger(data, errors) or {},
    }
    mm_id = data.get("id")
    if mm_id is not None:
        problem = mental_model_id_problem(mm_id)
        if problem:
            errors.append(_err(["body", "id"], f"id {problem}", "string_pattern_mismatch"))
    out["mental_model_id"] = mm_id
    if errors:
        raise FieldErrors(errors)
    return out


def parse_update(data: Any, *, stored_trigger: Any = None) -> dict[str, Any]:
    """A PATCH body; no body at all (``None``) changes nothing. Anything else but an object —
    ``[]``, ``0``, ``false``, ``""`` — is a 422, not a silent no-op."""
    data = _require_object({} if data is None else data)
    errors = _unknown(data, UPDATE_FIELDS)
    out = {
        "name": _text(data, "name", errors, required=False),
        "source_query": _text(data, "source_query", errors, required=False),
        "tags": _tags(data, errors),
        "max_tokens": _max_tokens(data, errors),
        "trigger": _trigger(data, errors, base=stored_trigger),
    }
    if errors:
        raise FieldErrors(errors)
    return out


def parse_refresh(data: Any) -> str | None:
    """No body, JSON ``null`` or ``{}``: the model's own mode; ``{"mode": "full"}`` forces full."""
    if data is None:
        return None
    data = _require_object(data)
    errors = _unknown(data, ("mode",))
    mode = data.get("mode")
    if mode is not None and mode != "full":
        errors.append(_err(["body", "mode"], f"mode must be 'full' or null; got {mode!r}", "literal_error"))
    if errors:
        raise FieldErrors(errors)
    return mode


def parse_no_parameters(data: Any, *, call: str) -> None:
    """Clear and dry run take no parameters (a dry run on purpose: it predicts the refresh as
    configured). No body, ``null`` or ``{}`` is fine; anything sent is a 422 naming it rather
    than being ignored in silence."""
    if data is None:
        return
    data = _require_object(data)
    if data:
        raise FieldErrors([
            _err(["body", key], f"{call} takes no parameters; unknown field {key!r} (change the "
                                "model with PATCH instead)", "extra_forbidden")
            for key in data
        ])


def parse_detail(query: QueryDict, *, default: str) -> str:
    detail = query.get("detail") or default
    if detail not in DETAILS:
        raise FieldErrors([
            _err(["query", "detail"], "Input should be 'metadata', 'content' or 'full'", "literal_error")
        ])
    return detail


def _query_int(query: QueryDict, key: str, default: int, low: int, high: int | None,
               errors: list[dict[str, object]]) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        errors.append(_err(["query", key], "Input should be a valid integer", "int_parsing"))
        return default
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        errors.append(_err(["query", key], f"Input should be {bound}", "value_error"))
        return default
    return value


def parse_list_query(query: QueryDict) -> dict[str, Any]:
    errors: list[dict[str, object]] = []
    try:
        detail = parse_detail(query, default="metadata")
    except FieldErrors as exc:
        errors.extend(exc.errors)
        detail = "metadata"
    limit = _query_int(query, "limit", 100, 1, LIST_LIMIT_MAX, errors)
    offset = _query_int(query, "offset", 0, 0, OFFSET_MAX, errors)
    tags = [t for t in query.getlist("tags") if t != ""]
    if any("\x00" in t for t in tags):
        errors.append(_err(["query", "tags"], NUL_MSG, "null_characters_not_allowed"))
    tags_match = query.get("tags_match") or "any"
    if tags_match not in LIST_TAGS_MATCH:
        errors.append(
            _err(["query", "tags_match"], "Input should be 'any', 'all' or 'exact'", "literal_error")
        )
    ekp = query.get("exclude_knowledge_pages")
    if ekp is not None and ekp.lower() not in ("true", "false", "1", "0"):
        errors.append(_err(["query", "exclude_knowledge_pages"], "Input should be a valid boolean",
                           "bool_parsing"))
    if errors:
        raise FieldErrors(errors)
    return {"detail": detail, "limit": limit, "offset": offset, "tags": tags, "tags_match": tags_match}


# ---------------------------------------------------------------------------------------------
# Rendering


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def render_model(model: MentalModel, *, detail: str, is_stale: bool | None) -> dict[str, Any]:
    with_content = detail in ("content", "full")
    return {
        "id": model.mental_model_id,
        "bank_id": model.bank_id,
        "name": model.name,
        "source_query": model.source_query if with_content else None,
        "content": model.content if with_content else None,
        "tags": list(model.tags),
        "max_tokens": model.max_tokens if with_content else None,
        "trigger": trigger_fill(model.trigger or {}) if with_content else None,
        "last_refreshed_at": iso(model.last_refreshed_at),
        "last_memory_seen_at": iso(model.last_memory_seen_at),
        "last_refresh_failed_at": iso(model.last_refresh_failed_at),
        "last_full_refreshed_at": iso(model.last_full_refreshed_at),
        "created_at": iso(model.created_at),
        "is_knowledge_page": False,
        "reflect_response": model.reflect_response if detail == "full" else None,
        "is_stale": is_stale,
    }


def render_history_entry(entry: MentalModelHistory) -> dict[str, Any]:
    """Upstream's version entry ``{previous_content, previous_reflect_response, changed_at}`` in
    its wire order, then what the seed adds: ``kind`` (and, for failures, why and which
    operation)."""
    if entry.kind == "failure":
        return {
            "previous_content": None,
            "changed_at": iso(entry.changed_at),
            "kind": "failure",
            "reason": entry.reason,
            "exception": entry.exception,
            "operation_id": str(entry.operation_id) if entry.operation_id else None,
        }
    return {
        "previous_content": entry.previous_content,
        "previous_reflect_response": entry.previous_reflect_response,
        "changed_at": iso(entry.changed_at),
        "kind": "version",
    }
