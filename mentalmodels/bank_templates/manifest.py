"""Reading a bank template manifest: every problem found at once, each naming the field and the
rule, before anything is written (docs/behaviour.md#bank-templates).

First the manifest's JSON Schema (``mentalmodels.bank_templates.schema``, with jsonschema): JSON
types, required and unknown keys, bounds. Then the rules the schema cannot say, each the one this
server applies elsewhere: the version this server reads; a mental model's id
(``mental_model_id_problem``) and its trigger (``trigger_normalize``: crons, the
refresh_after_consolidation / refresh_cron exclusion, ``fact_types: []``, ``tag_groups``,
``response_schema``); the config values (``bankconfig.validate_updates``); no blank name, text or
query; no id or name twice; no NUL character (PostgreSQL cannot store one).

A manifest with problems is ``ManifestInvalid``: a 422 in FastAPI's shape listing every one,
as every body here is answered (upstream answers a 400 with the same problems in one string).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from hindsight.banks import bankconfig
from hindsight.infra.edge.problems import expected, problem
from hindsight.infra.edge.serializers import nul_errors
from hindsight.infra.errors import FieldError, FieldErrors
from mentalmodels.bank_templates.schema import CURRENT_VERSION, manifest_schema
from mentalmodels.services import mental_model_id_problem
from mentalmodels.triggers import trigger_normalize

Loc = tuple[str | int, ...]
_VALIDATOR = jsonschema.Draft202012Validator(manifest_schema())


def _loc(error: dict[str, object]) -> list[object]:
    loc = error["loc"]
    return list(loc) if isinstance(loc, (list, tuple)) else [loc]


class ManifestInvalid(FieldErrors):
    """Every problem of a manifest, each located under ``body`` as on every other route."""

    def __init__(self, errors: list[dict[str, object]]):
        super().__init__([{**e, "loc": ["body", *_loc(e)]} for e in errors])


@dataclass(frozen=True)
class ModelSpec:
    id: str
    name: str
    source_query: str
    tags: list[str]
    max_tokens: int
    trigger: dict[str, Any]  # normalised: every key, defaults filled


@dataclass(frozen=True)
class DirectiveSpec:
    name: str
    content: str
    priority: int
    is_active: bool
    tags: list[str]


@dataclass(frozen=True)
class Manifest:
    version: str
    # The config keys the manifest sets (null and left-out keys are not here: unchanged).
    config: dict[str, Any] = field(default_factory=dict)
    models: list[ModelSpec] = field(default_factory=list)
    directives: list[DirectiveSpec] = field(default_factory=list)


def _err(loc: Sequence[str | int], msg: str, type_: str = "value_error") -> dict[str, object]:
    return {"loc": list(loc), "msg": msg, "type": type_}


_TYPE_KINDS = {"string": "string_type", "integer": "int_type", "number": "float_type",
               "boolean": "bool_type", "array": "list_type", "object": "dict_type"}


def _worded(error: jsonschema.ValidationError) -> dict[str, object]:
    """A schema violation in the one table's words (``hindsight.infra.edge.problems``) where
    it has the kind, else jsonschema's own."""
    loc = list(error.absolute_path)
    rule, value = error.validator, error.validator_value
    if rule == "type":
        kinds = [k for k in ([value] if isinstance(value, str) else value) if k != "null"]
        if len(kinds) == 1 and kinds[0] in _TYPE_KINDS:
            return problem(_TYPE_KINDS[kinds[0]], loc)
    if rule == "minimum":
        return problem("greater_than_equal", loc, limit=value)
    if rule == "maximum":
        return problem("less_than_equal", loc, limit=value)
    if rule == "enum":
        return problem("literal_error", loc, expected=expected(v for v in value if v is not None))
    if rule == "minLength":
        return problem("string_too_short", loc)
    if rule == "maxLength":
        return problem("string_too_long", loc, limit=value)
    if rule == "pattern":
        return _err(loc, f"String should match pattern '{value}'", "string_pattern_mismatch")
    return _err(loc, error.message, str(rule))


def _schema_problems(data: Any) -> list[dict[str, object]]:
    errors: list[dict[str, object]] = []
    for error in sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path)):
        loc = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {})
            errors.extend(problem("extra_forbidden", [*loc, key])
                          for key in error.instance if key not in known)
        elif error.validator == "required" and isinstance(error.instance, dict):
            errors.extend(problem("missing", [*loc, key])
                          for key in error.validator_value if key not in error.instance)
        elif error.validator == "anyOf" and error.context:
            # The branch of the value's own JSON type tells why; else any branch but null's.
            branches = [e for e in error.context if e.validator_value != "null"] or error.context
            typed = [e for e in branches if e.validator != "type"] or branches
            errors.append(_worded(jsonschema.exceptions.best_match(typed)))
        else:
            errors.append(_worded(error))
    return errors


def _blank(item: dict[str, Any], key: str, loc: Loc) -> list[dict[str, object]]:
    if not item[key].strip():
        return [problem("blank", (*loc, key))]
    return []


def _version_problems(version: str) -> list[dict[str, object]]:
    if int(version) < 1:
        return [_err(("version",), "version must be >= 1")]
    if int(version) > int(CURRENT_VERSION):
        return [_err(("version",), f"version {version!r} is not supported by this server "
                                   f"(it reads up to {CURRENT_VERSION!r})")]
    return []


def _config(bank: dict[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, object]]]:
    updates = {key: value for key, value in (bank or {}).items() if value is not None}
    try:
        clean = bankconfig.validate_updates(updates, loc=("bank",))
    except (FieldError, FieldErrors) as exc:
        return {}, list(exc.errors)
    if clean.get("retain_custom_instructions") and clean.get("retain_extraction_mode") != "custom":
        return clean, [_err(("bank", "retain_custom_instructions"),
                            "requires retain_extraction_mode 'custom' in the same manifest")]
    return clean, []


def _model(index: int, raw: dict[str, Any], seen: set[str]) -> tuple[ModelSpec | None,
                                                                     list[dict[str, object]]]:
    loc: Loc = ("mental_models", index)
    errors = _blank(raw, "name", loc) + _blank(raw, "source_query", loc)
    problem = mental_model_id_problem(raw["id"])
    if problem:
        errors.append(_err((*loc, "id"), f"id {problem}", "string_pattern_mismatch"))
    elif raw["id"] in seen:
        errors.append(_err((*loc, "id"), f"duplicate id {raw['id']!r}: a manifest names a "
                                         "mental model once"))
    seen.add(raw["id"])
    trigger: dict[str, Any] = {}
    try:
        trigger = trigger_normalize(raw.get("trigger") or {}, loc=(*loc, "trigger"))
    except (FieldError, FieldErrors) as exc:
        errors.extend(exc.errors)
    if errors:
        return None, errors
    return ModelSpec(id=raw["id"], name=raw["name"], source_query=raw["source_query"],
                     tags=list(dict.fromkeys(raw.get("tags") or [])),
                     max_tokens=raw.get("max_tokens", 2048), trigger=trigger), []


def _directive(index: int, raw: dict[str, Any], seen: set[str]) -> tuple[DirectiveSpec | None,
                                                                         list[dict[str, object]]]:
    loc: Loc = ("directives", index)
    errors = _blank(raw, "name", loc) + _blank(raw, "content", loc)
    if raw["name"] in seen:
        errors.append(_err((*loc, "name"), f"duplicate name {raw['name']!r}: directives are "
                                           "matched by name, so a manifest names each once"))
    seen.add(raw["name"])
    if errors:
        return None, errors
    return DirectiveSpec(name=raw["name"], content=raw["content"],
                         priority=raw.get("priority", 0), is_active=raw.get("is_active", True),
                         tags=list(dict.fromkeys(raw.get("tags") or []))), []


def manifest_parse(data: Any) -> Manifest:
    """The manifest ``data`` (decoded JSON) describes, or ``ManifestInvalid`` with every problem."""
    if not isinstance(data, dict):
        raise ManifestInvalid([problem("dict_type", [])])
    errors = _schema_problems(data) or nul_errors(data, [])
    if errors:
        raise ManifestInvalid(errors)
    errors = _version_problems(data["version"])
    config, problems = _config(data.get("bank"))
    errors += problems
    models: list[ModelSpec] = []
    seen: set[str] = set()
    for index, raw in enumerate(data.get("mental_models") or []):
        model, problems = _model(index, raw, seen)
        errors += problems
        if model is not None:
            models.append(model)
    directives: list[DirectiveSpec] = []
    seen = set()
    for index, raw in enumerate(data.get("directives") or []):
        directive, problems = _directive(index, raw, seen)
        errors += problems
        if directive is not None:
            directives.append(directive)
    if errors:
        raise ManifestInvalid(errors)
    return Manifest(version=data["version"], config=config, models=models, directives=directives)
