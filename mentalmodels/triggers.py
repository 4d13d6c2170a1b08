"""The ``trigger`` object of a mental model: its keys, defaults, validation and PATCH merge.

Owns docs/behaviour.md#triggers (trigger rules: croniter 5-field crons, the
refresh_after_consolidation / refresh_cron
exclusion, ``fact_types: []`` refused, unknown keys refused) and docs/behaviour.md#response-schema
(``response_schema``
checked at request time with jsonschema). Every problem raises ``FieldErrors`` whose ``loc``
names the key, so the API answers 422 naming the field and the rule.

A stored trigger is always *normalised*: every key present, defaults filled. ``null`` for a key
means "its default", both at create and in a PATCH (where it resets that key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
from croniter import croniter

from hindsight.infra.errors import FieldError, FieldErrors
from hindsight.infra.tagscope import parse_tag_groups, parse_tags_match
from hindsight.infra.vocabulary import BUDGETS, REFRESH_MODES, SCOPE_FACT_TYPES

# Integer keys stay within a 32-bit range: a larger interval or token budget means nothing, and
# an unbounded one would overflow a timedelta or an SQL integer where it is used.
INT_MAX = 2**31 - 1
SCHEMA_PROPERTY_TYPES = ("string", "number", "integer", "boolean", "array", "object")
# JSON nesting a response_schema may have (objects and lists, ~30 nested properties): far
# beyond any document's structure, and well inside what the recursive checks (ours,
# jsonschema's) can walk without a RecursionError.
SCHEMA_MAX_DEPTH = 64

# Upstream 1.1.0's trigger keys, in its wire order, with their defaults.
TRIGGER_DEFAULTS: dict[str, Any] = {
    "budget": None,
    "mode": "full",
    "refresh_after_consolidation": False,
    "refresh_cron": None,
    "full_refresh_cron": None,
    "min_refresh_interval_seconds": None,
    "fact_types": None,
    "exclude_mental_models": False,
    "exclude_mental_model_ids": None,
    "tags_match": None,
    "tag_groups": None,
    "include_chunks": None,
    "recall_max_tokens": None,
    "recall_chunks_max_tokens": None,
    "reflect_search_observations_max_tokens": None,
    "reflect_search_observations_include_entities": None,
    "response_schema": None,
    "keep_trace": False,
    # Ours: a refresh writes a proposal to approve instead of applying its change; null takes
    # the bank's ``mental_model_review`` (docs/behaviour.md#review-before-apply).
    "review": None,
}

Loc = tuple[str | int, ...]


def _err(loc: Sequence[str | int], msg: str, type_: str = "value_error") -> dict[str, object]:
    return {"loc": list(loc), "msg": msg, "type": type_}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def cron_problem(expr: Any) -> str | None:
    """Why ``expr`` is not a 5-field UTC cron expression, or None when it is one."""
    if not isinstance(expr, str):
        return "must be a string (a 5-field cron expression) or null"
    fields = expr.split()
    if len(fields) != 5:
        return (
            "must be a standard 5-field cron expression (minute hour day month weekday); "
            f"got {len(fields)} fields"
        )
    if not croniter.is_valid(expr):
        return f"is not a valid cron expression: {expr!r}"
    return None


def _schema_node_problems(node: Any, loc: Loc, *, top: bool) -> list[dict[str, object]]:
    errors: list[dict[str, object]] = []
    if not isinstance(node, Mapping):
        return [_err(loc, "must be a JSON object (a JSON Schema)")]
    type_ = node.get("type")
    if top and type_ is not None and type_ != "object":
        return [_err(loc, 'response_schema must be an object schema (its "type" must be "object")')]
    properties = node.get("properties")
    if top and (not isinstance(properties, Mapping) or not properties):
        return [_err(loc, "response_schema must define a non-empty 'properties' object")]
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            ploc = (*loc, "properties", name)
            if not isinstance(prop, Mapping):
                errors.append(_err(ploc, "a property must be a JSON object (a JSON Schema)"))
                continue
            ptype = prop.get("type")
            if ptype not in SCHEMA_PROPERTY_TYPES:
                errors.append(
                    _err(ploc, f"property type must be one of {', '.join(SCHEMA_PROPERTY_TYPES)}; "
                               f"got {ptype!r}")
                )
                continue
            if ptype == "object" and "properties" in prop:
                errors.extend(_schema_node_problems(prop, ploc, top=False))
            if ptype == "array" and isinstance(prop.get("items"), Mapping):
                items = prop["items"]
                iloc = (*ploc, "items")
                if "type" in items and items["type"] not in SCHEMA_PROPERTY_TYPES:
                    errors.append(
                        _err(iloc, f"items type must be one of {', '.join(SCHEMA_PROPERTY_TYPES)}; "
                                   f"got {items['type']!r}")
                    )
                elif items.get("type") == "object" and "properties" in items:
                    errors.extend(_schema_node_problems(items, iloc, top=False))
    required = node.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            errors.append(_err((*loc, "required"), "required must be a list of property names"))
        else:
            known = set(properties or {}) if isinstance(properties, Mapping) else set()
            missing = [r for r in required if r not in known]
            if missing:
                errors.append(
                    _err((*loc, "required"),
                         f"required names properties that do not exist: {', '.join(missing)}")
                )
    return errors


def _too_deep(value: Any, loc: Loc, limit: int) -> Loc | None:
    """Where ``value`` nests objects/lists past ``limit`` levels (iteratively), or None."""
    stack: list[tuple[Any, Loc]] = [(value, loc)]
    base = len(loc)
    while stack:
        node, where = stack.pop()
        if len(where) - base > limit:
            return where
        if isinstance(node, Mapping):
            stack.extend((v, (*where, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(node))
    return None


def response_schema_problems(schema: Any, loc: Loc) -> list[dict[str, object]]:
    """docs/behaviour.md#response-schema: an object schema with a non-empty ``properties`` map of
    supported types."""
    deep = _too_deep(schema, loc, SCHEMA_MAX_DEPTH)
    if deep is not None:
        return [_err(deep[: len(loc) + SCHEMA_MAX_DEPTH],
                     f"response_schema may nest at most {SCHEMA_MAX_DEPTH} levels deep")]
    errors = _schema_node_problems(schema, loc, top=True)
    if errors:
        return errors
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = [p for p in exc.path]
        return [_err((*loc, *path), f"response_schema is not a valid JSON Schema: {exc.message}")]
    return []


def _key_problems(key: str, value: Any, loc: Loc) -> list[dict[str, object]]:
    """Problems of one non-null trigger value (null always means the key's default)."""
    if key in ("refresh_after_consolidation", "exclude_mental_models", "keep_trace",
               "include_chunks", "reflect_search_observations_include_entities", "review"):
        if not isinstance(value, bool):
            return [_err(loc, "must be a boolean", "bool_type")]
    elif key == "budget":
        if value not in BUDGETS:
            return [_err(loc, f"must be one of {', '.join(BUDGETS)}; got {value!r}", "enum")]
    elif key == "mode":
        if value not in REFRESH_MODES:
            return [_err(loc, f"must be 'full' or 'delta'; got {value!r}", "enum")]
    elif key in ("refresh_cron", "full_refresh_cron"):
        problem = cron_problem(value)
        if problem:
            return [_err(loc, f"{key} {problem}")]
    elif key == "min_refresh_interval_seconds":
        if not _is_int(value) or not 0 <= value <= INT_MAX:
            return [_err(loc, f"must be an integer between 0 and {INT_MAX}, or null")]
    elif key == "fact_types":
        if not isinstance(value, list):
            return [_err(loc, "must be a list of fact types or null", "list_type")]
        if not value:
            return [_err(loc, "must not be empty: list at least one of world, experience, "
                              "observation, or send null for all")]
        bad = [v for v in value if v not in SCOPE_FACT_TYPES]
        if bad:
            return [_err(loc, f"fact types must be among {', '.join(SCOPE_FACT_TYPES)}; got {bad!r}", "enum")]
    elif key == "exclude_mental_model_ids":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return [_err(loc, "must be a list of mental model ids or null", "list_type")]
    elif key == "tags_match":
        try:
            parse_tags_match(value, loc=loc)
        except FieldError as exc:
            return list(exc.errors)
    elif key == "tag_groups":
        try:
            parse_tag_groups(value, loc=loc)
        except FieldError as exc:
            return list(exc.errors)
    elif key in ("recall_max_tokens", "recall_chunks_max_tokens"):
        if not _is_int(value):
            return [_err(loc, "must be an integer or null", "int_type")]
        if abs(value) > INT_MAX:
            return [_err(loc, f"must be at most {INT_MAX} in magnitude, or null")]
    elif key == "reflect_search_observations_max_tokens":
        if not _is_int(value) or not 1 <= value <= INT_MAX:
            return [_err(loc, f"must be an integer between 1 and {INT_MAX}, or null")]
    elif key == "response_schema":
        return response_schema_problems(value, loc)
    return []


def trigger_normalize(
    raw: Any,
    *,
    base: Mapping[str, Any] | None = None,
    loc: Loc = ("body", "trigger"),
) -> dict[str, Any]:
    """Validate ``raw`` and merge it key by key over ``base`` (defaults when None).

    Keys ``raw`` leaves out keep their ``base`` value; a key sent as null resets to its default.
    Raises ``FieldErrors`` naming every bad key; returns the full normalised trigger.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise FieldErrors([_err(loc, "trigger must be a JSON object or null", "dict_type")])
    errors: list[dict[str, object]] = []
    unknown = [k for k in raw if k not in TRIGGER_DEFAULTS]
    for key in unknown:
        errors.append(
            _err((*loc, key), f"unknown trigger field {key!r}; known fields: {', '.join(TRIGGER_DEFAULTS)}",
                 "extra_forbidden")
        )
    merged: dict[str, Any] = {**TRIGGER_DEFAULTS, **trigger_fill(base or {})}
    for key, value in raw.items():
        if key not in TRIGGER_DEFAULTS:
            continue
        if value is None:
            merged[key] = TRIGGER_DEFAULTS[key]
            continue
        problems = _key_problems(key, value, (*loc, key))
        if problems:
            errors.extend(problems)
        else:
            merged[key] = value
    if not errors and merged["refresh_after_consolidation"] and merged["refresh_cron"]:
        errors.append(
            _err((*loc, "refresh_cron"),
                 "refresh_cron and refresh_after_consolidation are mutually exclusive: "
                 "a model refreshes either after consolidation or on a cron schedule, not both")
        )
    if errors:
        raise FieldErrors(errors)
    return merged


def trigger_fill(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored trigger with every key present (rows written before a key existed)."""
    return {key: stored.get(key, default) for key, default in TRIGGER_DEFAULTS.items()}
