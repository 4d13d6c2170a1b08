"""``mentalmodels.triggers``: a mental model's trigger object — its keys and defaults, the
validation of every key (docs/behaviour.md#triggers), ``response_schema`` (docs/behaviour.md#response-schema), and the PATCH merge."""

from __future__ import annotations

import pytest

from hindsight.infra.errors import FieldErrors
from mentalmodels.triggers import (
    INT_MAX,
    SCHEMA_MAX_DEPTH,
    TRIGGER_DEFAULTS,
    cron_problem,
    response_schema_problems,
    trigger_fill,
    trigger_normalize,
)

LOC = ["body", "trigger"]


def errors_of(raw, **kwargs) -> list[dict]:
    with pytest.raises(FieldErrors) as caught:
        trigger_normalize(raw, **kwargs)
    return caught.value.errors


# --- defaults and the merge -----------------------------------------------------------------------


@pytest.mark.parametrize("raw", [None, {}])
def test_an_empty_trigger_is_every_default_in_wire_order(raw) -> None:
    normalized = trigger_normalize(raw)
    assert normalized == TRIGGER_DEFAULTS
    assert list(normalized) == list(TRIGGER_DEFAULTS)
    assert normalized is not TRIGGER_DEFAULTS


def test_keys_left_out_keep_the_base_and_null_resets_a_key_to_its_default() -> None:
    base = trigger_normalize({"mode": "delta", "budget": "high", "keep_trace": True})
    merged = trigger_normalize({"budget": None, "fact_types": ["world"]}, base=base)
    assert merged["mode"] == "delta" and merged["keep_trace"] is True  # kept
    assert merged["budget"] is None  # reset
    assert merged["fact_types"] == ["world"]  # set


def test_a_base_missing_keys_is_filled_before_the_merge() -> None:
    merged = trigger_normalize({}, base={"mode": "delta"})
    assert list(merged) == list(TRIGGER_DEFAULTS) and merged["mode"] == "delta"


def test_trigger_fill_completes_a_stored_trigger_and_drops_nothing_it_knows() -> None:
    filled = trigger_fill({"refresh_cron": "0 3 * * *"})
    assert list(filled) == list(TRIGGER_DEFAULTS)
    assert filled["refresh_cron"] == "0 3 * * *" and filled["mode"] == "full"
    assert trigger_fill({"unknown": 1}) == TRIGGER_DEFAULTS


# --- refusals name the key and the rule -----------------------------------------------------------


def test_a_trigger_that_is_not_an_object_is_refused() -> None:
    [error] = errors_of(["mode"])
    assert error["loc"] == LOC and error["type"] == "dict_type"


def test_every_unknown_key_is_named() -> None:
    errors = errors_of({"nope": 1, "mode": "delta", "also_nope": 2})
    assert [e["loc"] for e in errors] == [LOC + ["nope"], LOC + ["also_nope"]]
    assert {e["type"] for e in errors} == {"extra_forbidden"}
    assert "known fields: budget" in errors[0]["msg"]


def test_errors_use_the_caller_s_loc() -> None:
    [error] = errors_of({"mode": "sideways"}, loc=("query", "t"))
    assert error["loc"] == ["query", "t", "mode"]


def test_several_bad_keys_are_reported_together() -> None:
    errors = errors_of({"mode": "x", "budget": "huge", "keep_trace": "yes"})
    assert sorted(e["loc"][-1] for e in errors) == ["budget", "keep_trace", "mode"]


@pytest.mark.parametrize("key", ["refresh_after_consolidation", "exclude_mental_models",
                                 "keep_trace", "include_chunks",
                                 "reflect_search_observations_include_entities"])
def test_boolean_keys_refuse_anything_but_a_boolean(key) -> None:
    [error] = errors_of({key: 1})
    assert error["loc"] == LOC + [key] and error["type"] == "bool_type"
    assert trigger_normalize({key: True})[key] is True


@pytest.mark.parametrize("key,good,bad", [
    ("budget", "mid", "huge"),
    ("mode", "delta", "incremental"),
])
def test_enum_keys(key, good, bad) -> None:
    assert trigger_normalize({key: good})[key] == good
    [error] = errors_of({key: bad})
    assert error["loc"] == LOC + [key] and error["type"] == "enum"


def test_refresh_after_consolidation_and_refresh_cron_exclude_each_other() -> None:
    [error] = errors_of({"refresh_after_consolidation": True, "refresh_cron": "0 3 * * *"})
    assert error["loc"] == LOC + ["refresh_cron"] and "mutually exclusive" in error["msg"]


def test_the_exclusion_also_holds_against_the_base() -> None:
    base = trigger_normalize({"refresh_cron": "0 3 * * *"})
    [error] = errors_of({"refresh_after_consolidation": True}, base=base)
    assert error["loc"] == LOC + ["refresh_cron"]
    # Resetting the cron in the same PATCH makes it valid.
    merged = trigger_normalize({"refresh_after_consolidation": True, "refresh_cron": None},
                               base=base)
    assert merged["refresh_cron"] is None and merged["refresh_after_consolidation"] is True


def test_full_refresh_cron_does_not_exclude_refresh_after_consolidation() -> None:
    merged = trigger_normalize({"refresh_after_consolidation": True,
                                "full_refresh_cron": "0 4 * * 0"})
    assert merged["full_refresh_cron"] == "0 4 * * 0"


@pytest.mark.parametrize("key", ["refresh_cron", "full_refresh_cron"])
def test_cron_keys_name_themselves_in_the_message(key) -> None:
    [error] = errors_of({key: "* * *"})
    assert error["loc"] == LOC + [key] and error["msg"].startswith(f"{key} must be")


def test_fact_types() -> None:
    assert trigger_normalize({"fact_types": ["world", "observation"]})["fact_types"] == [
        "world", "observation"]
    [empty] = errors_of({"fact_types": []})
    assert "must not be empty" in empty["msg"]
    [bad] = errors_of({"fact_types": ["world", "opinion"]})
    assert bad["type"] == "enum" and "'opinion'" in bad["msg"]
    [not_list] = errors_of({"fact_types": "world"})
    assert not_list["type"] == "list_type"


def test_exclude_mental_model_ids_is_a_list_of_strings() -> None:
    assert trigger_normalize({"exclude_mental_model_ids": ["a"]})["exclude_mental_model_ids"] == ["a"]
    [error] = errors_of({"exclude_mental_model_ids": ["a", 1]})
    assert error["type"] == "list_type"


@pytest.mark.parametrize("value,ok", [
    (0, True), (INT_MAX, True), (-1, False), (INT_MAX + 1, False), (True, False), (1.5, False),
])
def test_min_refresh_interval_seconds_is_a_32_bit_non_negative_integer(value, ok) -> None:
    raw = {"min_refresh_interval_seconds": value}
    if ok:
        assert trigger_normalize(raw)["min_refresh_interval_seconds"] == value
    else:
        [error] = errors_of(raw)
        assert error["loc"] == LOC + ["min_refresh_interval_seconds"]


@pytest.mark.parametrize("value,ok", [
    (-5, True), (INT_MAX, True), (-INT_MAX, True), (INT_MAX + 1, False), (-INT_MAX - 1, False),
    (False, False), ("5", False),
])
def test_recall_token_keys_are_bounded_in_magnitude(value, ok) -> None:
    for key in ("recall_max_tokens", "recall_chunks_max_tokens"):
        if ok:
            assert trigger_normalize({key: value})[key] == value
        else:
            [error] = errors_of({key: value})
            assert error["loc"] == LOC + [key]


@pytest.mark.parametrize("value,ok", [(1, True), (INT_MAX, True), (0, False),
                                      (INT_MAX + 1, False), (True, False)])
def test_reflect_search_observations_max_tokens_is_positive(value, ok) -> None:
    raw = {"reflect_search_observations_max_tokens": value}
    if ok:
        assert trigger_normalize(raw)["reflect_search_observations_max_tokens"] == value
    else:
        errors_of(raw)


def test_tags_match_and_tag_groups_are_checked_by_the_tag_scope_rules() -> None:
    assert trigger_normalize({"tags_match": "any"})["tags_match"] == "any"
    [error] = errors_of({"tags_match": "sometimes"})
    assert error["loc"][: len(LOC) + 1] == LOC + ["tags_match"]
    assert errors_of({"tag_groups": "not a list"})


# --- cron expressions -------------------------------------------------------------------------------


def test_cron_problem() -> None:
    assert cron_problem("*/5 * * * *") is None
    assert cron_problem("0 3 * * 1-5") is None
    assert "got 6 fields" in cron_problem("0 0 3 * * *")
    assert "not a valid cron expression" in cron_problem("99 * * * *")
    assert "must be a string" in cron_problem(5)


# --- response_schema (docs/behaviour.md#response-schema) -------------------------------------------------------------------------


SCHEMA_LOC = ("body", "trigger", "response_schema")


def test_a_valid_object_schema_has_no_problems_and_is_kept() -> None:
    schema = {"type": "object", "properties": {
        "summary": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object",
                                             "properties": {"n": {"type": "integer"}}}},
    }, "required": ["summary"]}
    assert response_schema_problems(schema, SCHEMA_LOC) == []
    assert trigger_normalize({"response_schema": schema})["response_schema"] == schema


@pytest.mark.parametrize("schema,fragment", [
    ("a string", "must be a JSON object"),
    ({"type": "string"}, 'its "type" must be "object"'),
    ({"type": "object"}, "non-empty 'properties'"),
    ({"type": "object", "properties": {}}, "non-empty 'properties'"),
    ({"type": "object", "properties": {"a": "string"}}, "a property must be a JSON object"),
    ({"type": "object", "properties": {"a": {"type": "date"}}}, "property type must be one of"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "date"}}}},
     "items type must be one of"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
     "required names properties that do not exist: b"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"},
     "required must be a list"),
    ({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
     "not a valid JSON Schema"),
])
def test_response_schema_refusals(schema, fragment) -> None:
    problems = response_schema_problems(schema, SCHEMA_LOC)
    assert problems and fragment in problems[0]["msg"]
    assert problems[0]["loc"][: len(SCHEMA_LOC)] == list(SCHEMA_LOC)


def test_nested_object_properties_are_checked_with_their_path() -> None:
    schema = {"type": "object", "properties": {
        "outer": {"type": "object", "properties": {"inner": {"type": "date"}}}}}
    [problem] = response_schema_problems(schema, SCHEMA_LOC)
    assert problem["loc"] == [*SCHEMA_LOC, "properties", "outer", "properties", "inner"]


def test_a_schema_nested_past_the_limit_is_refused_without_recursing() -> None:
    schema: dict = {"type": "object", "properties": {"a": {"type": "string"}}}
    node = schema
    for _ in range(SCHEMA_MAX_DEPTH + 5):
        node["x"] = {}
        node = node["x"]
    [problem] = response_schema_problems(schema, SCHEMA_LOC)
    assert f"at most {SCHEMA_MAX_DEPTH} levels" in problem["msg"]
    assert len(problem["loc"]) == len(SCHEMA_LOC) + SCHEMA_MAX_DEPTH
