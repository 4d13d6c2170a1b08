"""The bank template manifest's JSON Schema: what ``GET /v1/bank-template-schema`` serves and what
an import is checked against first (docs/behaviour.md#bank-templates).

Upstream 1.1.0's manifest (schema version "1"): its keys, types, required keys, defaults and
bounds, written here as plain JSON Schema (draft 2020-12, no ``$ref``), with one difference: every
object of the manifest is closed (``additionalProperties: false``), since this server refuses a
key it does not know (docs/api.md, the error table) where upstream ignores it. The free-form
values inside (a trigger's ``response_schema``, a config value that is an object) stay open.

``bank`` lists every per-bank config key this server knows (``hindsight.banks.bankconfig``:
upstream's keys and ours) and a trigger every trigger key (``mentalmodels.triggers``), so a key
added there is part of the manifest at once. The schema gives the JSON types of upstream's keys
(any JSON for a key of ours it has no type for); the rules of every value (ranges, choices,
crons) are the config's and the trigger's own, checked after it.

``openapi_form`` rewrites the schema for the OpenAPI 3.0 document (``nullable`` instead of a
``null`` type).
"""

from __future__ import annotations

import copy
from typing import Any

from hindsight.banks import bankconfig
from hindsight.banks.serializers import OBSERVATION_SCOPE_MODES
from hindsight.infra.tagscope import MAX_TAG_LENGTH
from hindsight.infra.vocabulary import BUDGETS, REFRESH_MODES, SCOPE_FACT_TYPES, TAGS_MATCH_MODES
from mentalmodels.services import ID_PATTERN
from mentalmodels.triggers import INT_MAX, TRIGGER_DEFAULTS

CURRENT_VERSION = "1"
INT32 = (-(2**31), 2**31 - 1)
MAX_TOKENS = (256, 8192)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "type" not in schema:
        return dict(schema)  # any JSON value, null included
    out = dict(schema)
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    out["type"] = [out["type"], "null"]
    return out


_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_OBJECT = {"type": "object"}
_TAGS = {"type": "array", "items": {"type": "string", "maxLength": MAX_TAG_LENGTH}, "default": []}


def _int(low: int | None = None, high: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer"}
    if low is not None:
        out["minimum"] = low
    if high is not None:
        out["maximum"] = high
    return out


def _list(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


# The config keys' JSON types (their rules are ``hindsight.banks.bankconfig``'s).
_BANK_TYPES: dict[str, dict[str, Any]] = {
    "reflect_mission": _STR,
    "retain_mission": _STR,
    "retain_extraction_mode": _STR,
    "retain_custom_instructions": _STR,
    "retain_chunk_size": _int(1),
    "retain_structured_chunk_size": _int(1),
    "enable_observations": _BOOL,
    "observations_mission": _STR,
    "enable_text_search": _BOOL,
    "enable_temporal_retrieval": _BOOL,
    "enable_graph_retrieval": _BOOL,
    "enable_reranking": _BOOL,
    "reflect_use_decision_model": _BOOL,
    "mental_model_refresh_use_decision_model": _BOOL,
    "mental_model_delta_use_decision_model": _BOOL,
    "disposition_skepticism": _int(1, 5),
    "disposition_literalism": _int(1, 5),
    "disposition_empathy": _int(1, 5),
    "entity_labels": _list(_OBJECT),
    "entities_allow_free_form": _BOOL,
    "retain_default_strategy": _STR,
    "retain_strategies": _OBJECT,
    "retain_chunk_batch_size": _INT,
    "retain_max_attachments_per_chunk": _int(0),
    "mcp_enabled_tools": _list(_STR),
    "consolidation_llm_batch_size": _INT,
    "consolidation_source_facts_max_tokens": _INT,
    "consolidation_source_facts_max_tokens_per_observation": _INT,
    "max_observations_per_scope": _INT,
    "observation_scope_limits": _list(_OBJECT),
    "default_observation_scopes": {"anyOf": [
        {"type": "string", "enum": list(OBSERVATION_SCOPE_MODES)}, _list(_list(_STR))]},
    "consolidation_strategies": _list(_OBJECT),
    "reflect_source_facts_max_tokens": _INT,
    "knowledge_page_default_trigger": _OBJECT,
    "reflect_default_options": _OBJECT,
    "mental_model_min_refresh_interval_seconds": _int(0, INT_MAX),
    "llm_gemini_safety_settings": {"type": "array"},
    "recall_budget_function": _STR,
    "recall_budget_fixed_low": _INT,
    "recall_budget_fixed_mid": _INT,
    "recall_budget_fixed_high": _INT,
    "recall_budget_adaptive_low": _NUM,
    "recall_budget_adaptive_mid": _NUM,
    "recall_budget_adaptive_high": _NUM,
    "recall_budget_min": _INT,
    "recall_budget_max": _INT,
    "audit_log_enabled": _BOOL,
    "store_document_text": _BOOL,
    "enable_auto_consolidation": _BOOL,
    "consolidation_use_decision_model": _BOOL,
    "consolidation_max_memories_per_round": _INT,
    "consolidation_llm_parallelism": _INT,
    "recall_include_chunks": _BOOL,
    "recall_prefer_observations": _BOOL,
    "recall_max_tokens": _INT,
    "recall_chunks_max_tokens": _INT,
    "memory_defense": _OBJECT,
    # Ours, beyond upstream's manifest (which ignores a key it does not know).
    "llm_token_budget_per_day": _int(0, 2**62),
}


def _nullable_any_of(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return _nullable(schema)


def _bank_keys() -> list[str]:
    """Upstream's keys in its order, then ours."""
    known = [key for key in _BANK_TYPES if key in bankconfig.FIELDS]
    return known + [key for key in bankconfig.FIELDS if key not in _BANK_TYPES]


def _bank_schema() -> dict[str, Any]:
    properties: dict[str, Any] = {key: {**_nullable_any_of(_BANK_TYPES.get(key, {})),
                                        "default": None}
                                  for key in _bank_keys()}
    return {
        "type": ["object", "null"],
        "description": "The bank's config overrides to apply (null or left out: unchanged). "
                       "Credentials are never part of a template.",
        "properties": properties,
        "additionalProperties": False,
    }


BANK_KEYS: tuple[str, ...] = tuple(_bank_schema()["properties"])

_TRIGGER_TYPES: dict[str, dict[str, Any]] = {
    "budget": {**_nullable({"type": "string", "enum": list(BUDGETS)}), "default": None},
    "mode": {"type": "string", "enum": list(REFRESH_MODES), "default": "full"},
    "refresh_after_consolidation": {**_BOOL, "default": False},
    "refresh_cron": {**_nullable(_STR), "default": None,
                     "description": "A 5-field UTC cron expression"},
    "full_refresh_cron": {**_nullable(_STR), "default": None,
                          "description": "A 5-field UTC cron expression"},
    "min_refresh_interval_seconds": {**_nullable(_int(0, INT_MAX)), "default": None},
    "fact_types": {**_nullable(_list({"type": "string", "enum": list(SCOPE_FACT_TYPES)})),
                   "default": None},
    "exclude_mental_models": {**_BOOL, "default": False},
    "exclude_mental_model_ids": {**_nullable(_list(_STR)), "default": None},
    "tags_match": {**_nullable({"type": "string", "enum": list(TAGS_MATCH_MODES)}),
                   "default": None},
    "tag_groups": {**_nullable(_list(_OBJECT)), "default": None},
    "include_chunks": {**_nullable(_BOOL), "default": None},
    "recall_max_tokens": {**_nullable(_INT), "default": None},
    "recall_chunks_max_tokens": {**_nullable(_INT), "default": None},
    "reflect_search_observations_max_tokens": {**_nullable(_int(1, INT_MAX)), "default": None},
    "reflect_search_observations_include_entities": {**_nullable(_BOOL), "default": None},
    "response_schema": {**_nullable(_OBJECT), "default": None},
    "keep_trace": {**_BOOL, "default": False},
}
_TRIGGER_PROPERTIES = {key: _TRIGGER_TYPES.get(key, {"default": default})
                       for key, default in TRIGGER_DEFAULTS.items()}

_MENTAL_MODEL = {
    "type": "object",
    "description": "A mental model, matched by id: created, or updated when it differs.",
    "properties": {
        "id": {"type": "string", "pattern": ID_PATTERN},
        "name": {"type": "string", "minLength": 1},
        "source_query": {"type": "string", "minLength": 1},
        "tags": _TAGS,
        "max_tokens": {**_int(*MAX_TOKENS), "default": 2048},
        "trigger": {"type": "object", "properties": _TRIGGER_PROPERTIES,
                    "additionalProperties": False, "default": {}},
    },
    "required": ["id", "name", "source_query"],
    "additionalProperties": False,
}

_DIRECTIVE = {
    "type": "object",
    "description": "A directive, matched by name: created, or updated when it differs.",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "content": {"type": "string", "minLength": 1},
        "priority": {**_int(*INT32), "default": 0},
        "is_active": {**_BOOL, "default": True},
        "tags": _TAGS,
    },
    "required": ["name", "content"],
    "additionalProperties": False,
}

_MANIFEST: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "BankTemplateManifest",
    "description": "A bank template: config overrides, mental models and directives to create "
                   "or update in a bank. Sections left out or null leave the bank as it is.",
    "type": "object",
    "properties": {
        "version": {"type": "string", "pattern": "^[0-9]+$",
                    "description": f"The manifest schema version (this server reads up to "
                                   f"'{CURRENT_VERSION}')"},
        "bank": {**_bank_schema(), "default": None},
        "mental_models": {"type": ["array", "null"], "items": _MENTAL_MODEL, "default": None},
        "directives": {"type": ["array", "null"], "items": _DIRECTIVE, "default": None},
    },
    "required": ["version"],
    "additionalProperties": False,
}


def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (a copy: callers may change it)."""
    return copy.deepcopy(_MANIFEST)


def openapi_form(schema: Any) -> Any:
    """``schema`` as OpenAPI 3.0 reads it: a ``[type, "null"]`` type becomes ``nullable``, a
    ``{"type": "null"}`` branch of ``anyOf`` goes, ``$schema`` goes."""
    if isinstance(schema, list):
        return [openapi_form(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$schema":
            continue
        if key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            out["type"] = kinds[0]
            if len(kinds) < len(value):
                out["nullable"] = True
        elif key == "anyOf":
            branches = [b for b in value if b != {"type": "null"}]
            if len(branches) < len(value):
                out["nullable"] = True
            if len(branches) == 1:
                out.update(openapi_form(branches[0]))
            else:
                out["anyOf"] = openapi_form(branches)
        elif key in ("properties",):
            out[key] = {name: openapi_form(prop) for name, prop in value.items()}
        else:
            out[key] = openapi_form(value)
    return out
