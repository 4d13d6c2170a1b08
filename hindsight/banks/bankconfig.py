"""Per-bank configuration overrides (``GET/PATCH/DELETE …/config``): the keys, their rules.

Overrides live in ``Bank.config`` (only what a bank sets); the resolved view fills the rest
from the deployment settings. Keys may be sent in Python form (``retain_mission``) or in
environment-variable form (``HINDSIGHT_API_RETAIN_MISSION``), as upstream accepts.

``FIELDS`` are the keys this server knows the rules of. ``ACCEPTED_WITHOUT_EFFECT`` are the
other keys upstream 1.1.0's client sends (``update_bank_config``): type-checked, stored and
shown, but nothing here acts on them (SPEC 0: every field upstream accepts is accepted). Any
other key is a 422 naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from hindsight.infra.errors import FieldError, FieldErrors

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


def _int(value: Any, loc: Loc) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(loc, "must be an integer", "int_type")
    if not -(2**63) <= value < 2**63:
        raise FieldError(loc, "must fit a 64-bit integer", "int_too_large")
    return value


def _number(value: Any, loc: Loc) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError(loc, "must be a number", "float_type")
    return value


def _no_nul(value: Any, loc: Loc) -> None:
    """PostgreSQL's jsonb cannot hold NUL in a string (the write would fail): refuse it here."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            raise FieldError(loc, "Null characters are not allowed.", "null_characters_not_allowed")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _json(kind: type, what: str) -> Callable[[Any, Loc], Any]:
    def check(value: Any, loc: Loc) -> Any:
        if not isinstance(value, kind):
            raise FieldError(loc, f"must be {what}", f"{kind.__name__}_type")
        _no_nul(value, loc)
        return value

    return check


def _str_list(value: Any, loc: Loc) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FieldError(loc, "must be a list of strings", "list_type")
    _no_nul(value, loc)
    return value


def _scopes(value: Any, loc: Loc) -> Any:
    if isinstance(value, str):
        return _str(value, loc)
    if isinstance(value, list) and all(
        isinstance(scope, list) and all(isinstance(t, str) for t in scope) for scope in value
    ):
        _no_nul(value, loc)
        return value
    raise FieldError(loc, "must be a string or a list of tag lists", "union_type")


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
    # Queue a consolidation after every retain that stored facts (hindsight.banks.consolidation).
    "enable_auto_consolidation": (_bool, lambda: True),
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

_OBJECT = _json(dict, "an object")
_LIST = _json(list, "a list")
# The rest of the keys upstream's client sends: checked for type, stored, not acted on here.
ACCEPTED_WITHOUT_EFFECT: dict[str, Callable[[Any, Loc], Any]] = {
    "reflect_source_facts_max_tokens": _int,
    "retain_default_strategy": _str,
    "retain_strategies": _OBJECT,
    "retain_chunk_batch_size": _int,
    "store_document_text": _bool,
    "entity_labels": _LIST,
    "entities_allow_free_form": _bool,
    "max_observations_per_scope": _int,
    "observation_scope_limits": _LIST,
    "consolidation_strategies": _LIST,
    "default_observation_scopes": _scopes,
    "consolidation_use_decision_model": _bool,
    "consolidation_llm_parallelism": _int,
    "consolidation_max_memories_per_round": _int,
    "knowledge_page_default_trigger": _OBJECT,
    "reflect_default_options": _OBJECT,
    "reflect_use_decision_model": _bool,
    "mental_model_refresh_use_decision_model": _bool,
    "mental_model_delta_use_decision_model": _bool,
    "consolidation_llm_batch_size": _int,
    "consolidation_source_facts_max_tokens": _int,
    "consolidation_source_facts_max_tokens_per_observation": _int,
    "recall_max_tokens": _int,
    "recall_include_chunks": _bool,
    "recall_prefer_observations": _bool,
    "recall_chunks_max_tokens": _int,
    "recall_budget_function": _str,
    "recall_budget_fixed_low": _int,
    "recall_budget_fixed_mid": _int,
    "recall_budget_fixed_high": _int,
    "recall_budget_adaptive_low": _number,
    "recall_budget_adaptive_mid": _number,
    "recall_budget_adaptive_high": _number,
    "recall_budget_min": _int,
    "recall_budget_max": _int,
    "mcp_enabled_tools": _str_list,
    "llm_gemini_safety_settings": _LIST,
    "memory_defense": _OBJECT,
    "audit_log_enabled": _bool,
}
FIELDS.update({key: (check, lambda: None) for key, check in ACCEPTED_WITHOUT_EFFECT.items()})
# Ours, after upstream's keys: the tokens the bank may spend on the LLM in a rolling 24 h
# (hindsight.banks.budget); unset: the deployment's HINDSIGHT_API_LLM_TOKEN_BUDGET_PER_DAY,
# whose absence means unlimited.
FIELDS["llm_token_budget_per_day"] = (
    _int_range(0, 2**62), lambda: settings.HINDSIGHT.llm_token_budget_per_day
)
# Ours: the default of a model's ``trigger.review`` (null there): its refreshes write proposals
# to approve instead of applying their changes (docs/behaviour.md#review-before-apply).
FIELDS["mental_model_review"] = (_bool, lambda: False)

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
