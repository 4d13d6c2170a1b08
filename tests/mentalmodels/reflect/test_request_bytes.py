"""The reflect endpoint's answers to malformed requests, byte for byte, compared with the literal
bodies reflect's own strict serializer answered before it moved onto ``hindsight.infra.edge``'s
(captured once from that code).

Each body is compared as the raw response text, so the order of errors and of keys counts.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import make_bank
from tests.wirebytes import check_cases, check_or_capture, j

pytestmark = pytest.mark.django_db

REFLECT = "/v1/default/banks/reflect-bank/reflect"
MISSING_BANK = "/v1/default/banks/nope/reflect"


# (id, path, body): body None sends none, a str is sent raw as application/json.
CASES: list[tuple[str, str, Any]] = [
    ("no-body", REFLECT, None),
    ("empty-raw", REFLECT, ""),
    ("null", REFLECT, "null"),
    ("list", REFLECT, "[]"),
    ("five", REFLECT, "5"),
    ("string", REFLECT, '"s"'),
    ("bad-json", REFLECT, "{"),
    ("empty-object", REFLECT, "{}"),
    ("unknown-keys", REFLECT, j({"zeta": 1, "query": "q", "alpha": 2, "mid": None})),
    ("unknown-and-bad", REFLECT, j({"zz": 1, "query": 5, "budget": "huge", "aa": 2})),
    ("query-int", REFLECT, j({"query": 5})),
    ("query-blank", REFLECT, j({"query": "  "})),
    ("query-empty", REFLECT, j({"query": ""})),
    ("query-null", REFLECT, j({"query": None})),
    ("query-nul", REFLECT, j({"query": "a\x00b"})),
    ("budget", REFLECT, j({"query": "q", "budget": "x"})),
    ("context-int", REFLECT, j({"query": "q", "context": 5})),
    ("max-tokens-low", REFLECT, j({"query": "q", "max_tokens": 0})),
    ("max-tokens-high", REFLECT, j({"query": "q", "max_tokens": 70000})),
    ("max-tokens-string", REFLECT, j({"query": "q", "max_tokens": "x"})),
    ("include-int", REFLECT, j({"query": "q", "include": 5})),
    ("include-unknown", REFLECT, j({"query": "q", "include": {
        "z": 1, "facts": {"y": 1, "b": 2}, "tool_calls": {"output": "maybe", "x": 1}}})),
    ("include-facts-list", REFLECT, j({"query": "q", "include": {"facts": []}})),
    ("response-schema-list", REFLECT, j({"query": "q", "response_schema": []})),
    ("response-schema-array", REFLECT, j({"query": "q", "response_schema": {"type": "array"}})),
    ("response-schema-props", REFLECT, j({"query": "q", "response_schema": {
        "type": "object", "properties": {"a": {"type": "weird"}}, "required": ["c"]}})),
    ("tags-and-groups", REFLECT, j({"query": "q", "tags": ["a"],
                                     "tag_groups": [{"tags": ["b"], "match": "any"}]})),
    ("tags-string", REFLECT, j({"query": "q", "tags": "a"})),
    ("tags-match", REFLECT, j({"query": "q", "tags": ["a"], "tags_match": "nope"})),
    ("tag-groups-bad", REFLECT, j({"query": "q", "tag_groups": [{"x": 1}]})),
    ("fact-types-bad", REFLECT, j({"query": "q", "fact_types": ["world", "bogus"]})),
    ("exclude-ids-ints", REFLECT, j({"query": "q", "exclude_mental_model_ids": [1, "a"]})),
    ("exclude-ids-string", REFLECT, j({"query": "q", "exclude_mental_model_ids": "x"})),
    ("observations-max-tokens", REFLECT,
     j({"query": "q", "reflect_search_observations_max_tokens": 0})),
    ("apply-all-directives", REFLECT, j({"query": "q", "apply_all_directives": "maybe"})),
    ("exclude-mental-models", REFLECT, j({"query": "q", "exclude_mental_models": "x"})),
    ("everything", REFLECT, j({
        "b": 1, "query": [], "budget": 3, "context": [], "max_tokens": -1,
        "include": {"q": 1, "tool_calls": {"output": 5}}, "response_schema": 5,
        "exclude_mental_model_ids": [None], "a": 2,
    })),
    ("unknown-missing-bank", MISSING_BANK, j({"query": "q", "x": 1})),
]

EXPECTED: dict[str, tuple[int, str]] = {
    'no-body': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Field required","type":"missing"}]}'
    ),
    'empty-raw': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Field required","type":"missing"}]}'
    ),
    'null': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'five': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g property name enclosed in double quotes: line 1 column 2 (char 1)","type":"jso'
        'n_invalid"}]}'
    ),
    'empty-object': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Field required","type":"missing"}]}'
    ),
    'unknown-keys': (
        422,
        '{"detail":[{"loc":["body","zeta"],"msg":"Extra inputs are not permitted","type":'
        '"extra_forbidden"},{"loc":["body","alpha"],"msg":"Extra inputs are not permitted'
        '","type":"extra_forbidden"},{"loc":["body","mid"],"msg":"Extra inputs are not pe'
        'rmitted","type":"extra_forbidden"}]}'
    ),
    'unknown-and-bad': (
        422,
        '{"detail":[{"loc":["body","zz"],"msg":"Extra inputs are not permitted","type":"e'
        'xtra_forbidden"},{"loc":["body","aa"],"msg":"Extra inputs are not permitted","ty'
        'pe":"extra_forbidden"},{"loc":["body","query"],"msg":"Input should be a valid st'
        'ring","type":"string_type"},{"loc":["body","budget"],"msg":"Input should be \'low'
        '\', \'mid\' or \'high\'","type":"literal_error"}]}'
    ),
    'query-int': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Input should be a valid string","type"'
        ':"string_type"}]}'
    ),
    'query-blank': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"String should have at least 1 non-blan'
        'k character","type":"string_too_short"}]}'
    ),
    'query-empty': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"String should have at least 1 characte'
        'r","type":"string_too_short"}]}'
    ),
    'query-null': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Input should be a valid string","type"'
        ':"string_type"}]}'
    ),
    'query-nul': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Null characters are not allowed.","typ'
        'e":"null_characters_not_allowed"}]}'
    ),
    'budget': (
        422,
        '{"detail":[{"loc":["body","budget"],"msg":"Input should be \'low\', \'mid\' or \'high'
        '\'","type":"literal_error"}]}'
    ),
    'context-int': (
        422,
        '{"detail":[{"loc":["body","context"],"msg":"Input should be a valid string","typ'
        'e":"string_type"}]}'
    ),
    'max-tokens-low': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be greater than or e'
        'qual to 1","type":"greater_than_equal"}]}'
    ),
    'max-tokens-high': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be less than or equa'
        'l to 65536","type":"less_than_equal"}]}'
    ),
    'max-tokens-string': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer",'
        '"type":"int_type"}]}'
    ),
    'include-int': (
        422,
        '{"detail":[{"loc":["body","include"],"msg":"Input should be a valid dictionary",'
        '"type":"dict_type"}]}'
    ),
    'include-unknown': (
        422,
        '{"detail":[{"loc":["body","include","z"],"msg":"Extra inputs are not permitted",'
        '"type":"extra_forbidden"},{"loc":["body","include","facts","y"],"msg":"Extra inp'
        'uts are not permitted","type":"extra_forbidden"},{"loc":["body","include","facts'
        '","b"],"msg":"Extra inputs are not permitted","type":"extra_forbidden"},{"loc":['
        '"body","include","tool_calls","x"],"msg":"Extra inputs are not permitted","type"'
        ':"extra_forbidden"},{"loc":["body","include","tool_calls","output"],"msg":"Input'
        ' should be a valid boolean","type":"bool_type"}]}'
    ),
    'include-facts-list': (
        422,
        '{"detail":[{"loc":["body","include","facts"],"msg":"Input should be a valid dict'
        'ionary","type":"dict_type"}]}'
    ),
    'response-schema-list': (
        422,
        '{"detail":[{"loc":["body","response_schema"],"msg":"Input should be a valid dict'
        'ionary","type":"dict_type"}]}'
    ),
    'response-schema-array': (
        422,
        '{"detail":[{"loc":["body","response_schema"],"msg":"response_schema must be an o'
        'bject schema (its \\"type\\" must be \\"object\\")","type":"value_error"}]}'
    ),
    'response-schema-props': (
        422,
        '{"detail":[{"loc":["body","response_schema","properties","a"],"msg":"property ty'
        'pe must be one of string, number, integer, boolean, array, object; got \'weird\'",'
        '"type":"value_error"},{"loc":["body","response_schema","required"],"msg":"requir'
        'ed names properties that do not exist: c","type":"value_error"}]}'
    ),
    'tags-and-groups': (
        422,
        '{"detail":[{"loc":["body","tag_groups"],"msg":"tags and tag_groups are mutually '
        'exclusive; send one of them","type":"invalid"}]}'
    ),
    'tags-string': (
        422,
        '{"detail":[{"loc":["body","tags"],"msg":"Input should be a valid list","type":"l'
        'ist_type"}]}'
    ),
    'tags-match': (
        422,
        '{"detail":[{"loc":["body","tags_match"],"msg":"Input should be \'any\', \'all\', \'an'
        'y_strict\', \'all_strict\' or \'exact\'","type":"literal_error"}]}'
    ),
    'tag-groups-bad': (
        422,
        '{"detail":[{"loc":["body","tag_groups",0,"x"],"msg":"unknown field(s) [\'x\'] in a'
        ' tag group leaf (allowed: tags, match, resolve)","type":"extra_forbidden"}]}'
    ),
    'fact-types-bad': (
        422,
        '{"detail":[{"loc":["body","fact_types",1],"msg":"Input should be \'world\', \'exper'
        'ience\', \'observation\' or \'opinion\'","type":"literal_error"}]}'
    ),
    'exclude-ids-ints': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_model_ids",0],"msg":"Input should be a'
        ' valid string","type":"string_type"}]}'
    ),
    'exclude-ids-string': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_model_ids"],"msg":"Input should be a v'
        'alid list","type":"list_type"}]}'
    ),
    'observations-max-tokens': (
        422,
        '{"detail":[{"loc":["body","reflect_search_observations_max_tokens"],"msg":"Input'
        ' should be greater than or equal to 1","type":"greater_than_equal"}]}'
    ),
    'apply-all-directives': (
        422,
        '{"detail":[{"loc":["body","apply_all_directives"],"msg":"Input should be a valid'
        ' boolean","type":"bool_type"}]}'
    ),
    'exclude-mental-models': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_models"],"msg":"Input should be a vali'
        'd boolean","type":"bool_type"}]}'
    ),
    'everything': (
        422,
        '{"detail":[{"loc":["body","b"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","a"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"},{"loc":["body","query"],"msg":"Input should be a valid stri'
        'ng","type":"string_type"},{"loc":["body","budget"],"msg":"Input should be \'low\','
        ' \'mid\' or \'high\'","type":"literal_error"},{"loc":["body","context"],"msg":"Input'
        ' should be a valid string","type":"string_type"},{"loc":["body","max_tokens"],"m'
        'sg":"Input should be greater than or equal to 1","type":"greater_than_equal"},{"'
        'loc":["body","include","q"],"msg":"Extra inputs are not permitted","type":"extra'
        '_forbidden"},{"loc":["body","include","tool_calls","output"],"msg":"Input should'
        ' be a valid boolean","type":"bool_type"},{"loc":["body","response_schema"],"msg"'
        ':"Input should be a valid dictionary","type":"dict_type"},{"loc":["body","exclud'
        'e_mental_model_ids",0],"msg":"Input should be a valid string","type":"string_typ'
        'e"}]}'
    ),
    'unknown-missing-bank': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"}]}'
    ),
}


def test_every_case_has_an_expectation() -> None:
    check_cases(CASES, EXPECTED)


@pytest.mark.parametrize(("case_id", "path", "body"), CASES, ids=[case[0] for case in CASES])
def test_reflect_answers_byte_for_byte(case_id: str, path: str, body: Any) -> None:
    make_bank("reflect-bank", name="Reflect bank")
    api = APIClient(raise_request_exception=False)
    response = (api.post(path) if body is None
                else api.post(path, data=body, content_type="application/json"))
    got = (response.status_code, response.content.decode())
    check_or_capture(case_id, got, EXPECTED)
