"""The reflect endpoint's answers to malformed requests, byte for byte, compared with the literal
bodies reflect's own strict serializer answered before it moved onto ``hindsight.api``'s
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
        '{"detail":[{"loc":["body","query"],"msg":"This field is required.","type":"required"}]'
        '}'
    ),
    'empty-raw': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"This field is required.","type":"required"}]'
        '}'
    ),
    'null': (
        422,
        '{"detail":[{"loc":["body"],"msg":"No data provided","type":"null"}]}'
    ),
    'list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Invalid data. Expected a dictionary, but got list.",'
        '"type":"invalid"}]}'
    ),
    'five': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Invalid data. Expected a dictionary, but got int.","'
        'type":"invalid"}]}'
    ),
    'string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Invalid data. Expected a dictionary, but got str.","'
        'type":"invalid"}]}'
    ),
    'bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"invalid JSON: JSON parse error - Expecting property '
        'name enclosed in double quotes: line 1 column 2 (char 1)","type":"json_invalid"}]}'
    ),
    'empty-object': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"This field is required.","type":"required"}]'
        '}'
    ),
    'unknown-keys': (
        422,
        '{"detail":[{"loc":["body","alpha"],"msg":"unknown field \'alpha\'; accepted: query, budg'
        'et, context, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply'
        '_all_directives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_'
        'search_observations_max_tokens, reflect_search_observations_include_entities","type":"'
        'invalid"},{"loc":["body","mid"],"msg":"unknown field \'mid\'; accepted: query, budget, c'
        'ontext, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_'
        'directives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_searc'
        'h_observations_max_tokens, reflect_search_observations_include_entities","type":"inval'
        'id"},{"loc":["body","zeta"],"msg":"unknown field \'zeta\'; accepted: query, budget, cont'
        'ext, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_dir'
        'ectives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search_o'
        'bservations_max_tokens, reflect_search_observations_include_entities","type":"invalid"'
        '}]}'
    ),
    'unknown-and-bad': (
        422,
        '{"detail":[{"loc":["body","aa"],"msg":"unknown field \'aa\'; accepted: query, budget, co'
        'ntext, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_d'
        'irectives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search'
        '_observations_max_tokens, reflect_search_observations_include_entities","type":"invali'
        'd"},{"loc":["body","zz"],"msg":"unknown field \'zz\'; accepted: query, budget, context, '
        'max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_directiv'
        'es, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search_observ'
        'ations_max_tokens, reflect_search_observations_include_entities","type":"invalid"}]}'
    ),
    'query-int': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Input should be a valid string","type":"stri'
        'ng_type"}]}'
    ),
    'query-blank': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"query must not be blank","type":"invalid"}]}'
    ),
    'query-empty': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"This field may not be blank.","type":"blank"'
        '}]}'
    ),
    'query-null': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"This field may not be null.","type":"null"}]'
        '}'
    ),
    'query-nul': (
        422,
        '{"detail":[{"loc":["body","query"],"msg":"Null characters are not allowed.","type":"nu'
        'll_characters_not_allowed"}]}'
    ),
    'budget': (
        422,
        '{"detail":[{"loc":["body","budget"],"msg":"\\"x\\" is not a valid choice.","type":"inval'
        'id_choice"}]}'
    ),
    'context-int': (
        422,
        '{"detail":[{"loc":["body","context"],"msg":"Input should be a valid string","type":"st'
        'ring_type"}]}'
    ),
    'max-tokens-low': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Ensure this value is greater than or eq'
        'ual to 1.","type":"min_value"}]}'
    ),
    'max-tokens-high': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Ensure this value is less than or equal'
        ' to 65536.","type":"max_value"}]}'
    ),
    'max-tokens-string': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"A valid integer is required.","type":"i'
        'nvalid"}]}'
    ),
    'include-int': (
        422,
        '{"detail":[{"loc":["body","include"],"msg":"Invalid data. Expected a dictionary, but g'
        'ot int.","type":"invalid"}]}'
    ),
    'include-unknown': (
        422,
        '{"detail":[{"loc":["body","include","z"],"msg":"unknown field \'z\'; accepted: facts, to'
        'ol_calls","type":"invalid"}]}'
    ),
    'include-facts-list': (
        422,
        '{"detail":[{"loc":["body","include","facts"],"msg":"Invalid data. Expected a dictionar'
        'y, but got list.","type":"invalid"}]}'
    ),
    'response-schema-list': (
        422,
        '{"detail":[{"loc":["body","response_schema"],"msg":"Expected a dictionary of items but'
        ' got type \\"list\\".","type":"not_a_dict"}]}'
    ),
    'response-schema-array': (
        422,
        '{"detail":[{"loc":["body","response_schema"],"msg":"response_schema must be an object '
        'schema (its \\"type\\" must be \\"object\\")","type":"value_error"}]}'
    ),
    'response-schema-props': (
        422,
        '{"detail":[{"loc":["body","response_schema","properties","a"],"msg":"property type mus'
        't be one of string, number, integer, boolean, array, object; got \'weird\'","type":"valu'
        'e_error"},{"loc":["body","response_schema","required"],"msg":"required names propertie'
        's that do not exist: c","type":"value_error"}]}'
    ),
    'tags-and-groups': (
        422,
        '{"detail":[{"loc":["body","tag_groups"],"msg":"tags and tag_groups are mutually exclus'
        'ive; send one of them","type":"invalid"}]}'
    ),
    'tags-string': (
        422,
        '{"detail":[{"loc":["body","tags"],"msg":"must be a list of strings or null","type":"li'
        'st_type"}]}'
    ),
    'tags-match': (
        422,
        '{"detail":[{"loc":["body","tags_match"],"msg":"must be one of any, all, any_strict, al'
        'l_strict, exact; got \'nope\'","type":"literal_error"}]}'
    ),
    'tag-groups-bad': (
        422,
        '{"detail":[{"loc":["body","tag_groups",0,"x"],"msg":"unknown field(s) [\'x\'] in a tag g'
        'roup leaf (allowed: tags, match, resolve)","type":"extra_forbidden"}]}'
    ),
    'fact-types-bad': (
        422,
        '{"detail":[{"loc":["body","fact_types",1],"msg":"must be one of world, experience, obs'
        'ervation; got \'bogus\'","type":"literal_error"}]}'
    ),
    'exclude-ids-ints': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_model_ids",0],"msg":"Input should be a valid'
        ' string","type":"string_type"}]}'
    ),
    'exclude-ids-string': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_model_ids"],"msg":"Expected a list of items '
        'but got type \\"str\\".","type":"not_a_list"}]}'
    ),
    'observations-max-tokens': (
        422,
        '{"detail":[{"loc":["body","reflect_search_observations_max_tokens"],"msg":"Ensure this'
        ' value is greater than or equal to 1.","type":"min_value"}]}'
    ),
    'apply-all-directives': (
        422,
        '{"detail":[{"loc":["body","apply_all_directives"],"msg":"Must be a valid boolean.","ty'
        'pe":"invalid"}]}'
    ),
    'exclude-mental-models': (
        422,
        '{"detail":[{"loc":["body","exclude_mental_models"],"msg":"Must be a valid boolean.","t'
        'ype":"invalid"}]}'
    ),
    'everything': (
        422,
        '{"detail":[{"loc":["body","a"],"msg":"unknown field \'a\'; accepted: query, budget, cont'
        'ext, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_dir'
        'ectives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search_o'
        'bservations_max_tokens, reflect_search_observations_include_entities","type":"invalid"'
        '},{"loc":["body","b"],"msg":"unknown field \'b\'; accepted: query, budget, context, max_'
        'tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_directives, '
        'fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search_observatio'
        'ns_max_tokens, reflect_search_observations_include_entities","type":"invalid"}]}'
    ),
    'unknown-missing-bank': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"unknown field \'x\'; accepted: query, budget, cont'
        'ext, max_tokens, include, response_schema, tags, tags_match, tag_groups, apply_all_dir'
        'ectives, fact_types, exclude_mental_models, exclude_mental_model_ids, reflect_search_o'
        'bservations_max_tokens, reflect_search_observations_include_entities","type":"invalid"'
        '}]}'
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
