"""The HTTP edge's answers, byte for byte: malformed (and a few valid) requests to every
mental-model and operations endpoint, compared with the literal bodies the hand-written parsers
answered before the edge moved to DRF serializers (captured once from that code).

Each body is compared as the raw response text, so the order of errors and of keys counts.
Values that change from run to run (date-times, uuids) are replaced by placeholders first.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from mentalmodels.models import MentalModelHistory
from tests.factories import make_bank, make_mental_model, make_operation
from tests.wirebytes import DATETIME, DURATION_MS, check_cases, check_or_capture, j, send

pytestmark = pytest.mark.django_db

MM = "/v1/default/banks/mm-bank/mental-models"
M1 = f"{MM}/m1"
OPS = "/v1/default/banks/mm-bank/operations"
UUID0 = "00000000-0000-0000-0000-000000000000"
UUID1 = "11111111-1111-1111-1111-111111111111"

_UUID = re.compile(r'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"')
# A raw body: sent as is (no JSON encoding), to test what is not a JSON object.
RAW = object()


_GENERATED_ID = re.compile(r'"mm-[0-9a-f]{32}"')


# A history entry's id: a sequence's value, whatever ran before.
_ENTRY_ID = re.compile(r'"id":\d+')


def _normalized(text: str) -> str:
    text = _ENTRY_ID.sub('"id":"<int>"', text)
    text = _GENERATED_ID.sub('"<generated id>"', DURATION_MS.sub('"duration_ms":"<ms>"', text))
    return _UUID.sub('"<uuid>"', DATETIME.sub('"<datetime>"', text))


# (id, method, path, body): body None sends none, a str is sent raw as application/json.
CASES: list[tuple[str, str, str, Any]] = [
    # --- create ----------------------------------------------------------------------------
    ("create-empty-raw", "post", MM, ""),
    ("create-null", "post", MM, "null"),
    ("create-list", "post", MM, "[]"),
    ("create-zero", "post", MM, "0"),
    ("create-false", "post", MM, "false"),
    ("create-string", "post", MM, '"s"'),
    ("create-bad-json", "post", MM, "{"),
    ("create-empty-object", "post", MM, "{}"),
    ("create-types", "post", MM, j({"name": 5, "source_query": []})),
    ("create-blank", "post", MM, j({"name": " ", "source_query": ""})),
    ("create-nulls", "post", MM, j({"name": None, "source_query": None})),
    ("create-unknown", "post", MM, j({"x": 1, "name": "a", "source_query": "q", "a": 2})),
    ("create-combined", "post", MM, j({
        "x": 1, "id": "BAD ID", "trigger": 5, "max_tokens": "1", "tags": "a", "name": 5,
        "y": 2,
    })),
    ("create-combined-2", "post", MM, j({
        "id": 5, "source_query": 3, "tags": [1], "max_tokens": 1.5,
        "trigger": {"mode": "x", "zz": 1},
    })),
    ("create-tags-not-strings", "post", MM, j({"name": "a", "source_query": "q", "tags": [1]})),
    ("create-tags-dict", "post", MM, j({"name": "a", "source_query": "q", "tags": {"a": 1}})),
    ("create-tag-too-long", "post", MM,
     j({"name": "a", "source_query": "q", "tags": ["ok", "t" * 513, "u" * 600]})),
    ("create-max-tokens-low", "post", MM,
     j({"name": "a", "source_query": "q", "max_tokens": 255})),
    ("create-max-tokens-high", "post", MM,
     j({"name": "a", "source_query": "q", "max_tokens": 8193})),
    ("create-max-tokens-bool", "post", MM,
     j({"name": "a", "source_query": "q", "max_tokens": True})),
    ("create-max-tokens-float", "post", MM,
     j({"name": "a", "source_query": "q", "max_tokens": 256.0})),
    ("create-max-tokens-zero", "post", MM,
     j({"name": "a", "source_query": "q", "max_tokens": 0})),
    ("create-trigger-list", "post", MM, j({"name": "a", "source_query": "q", "trigger": []})),
    ("create-trigger-string", "post", MM,
     j({"name": "a", "source_query": "q", "trigger": "x"})),
    ("create-trigger-unknown", "post", MM,
     j({"name": "a", "source_query": "q", "trigger": {"b": 1, "a": 2}})),
    ("create-trigger-many", "post", MM, j({"name": "a", "source_query": "q", "trigger": {
        "budget": 5, "mode": 3, "refresh_cron": "bad", "fact_types": [],
        "min_refresh_interval_seconds": -1, "keep_trace": "yes", "tags_match": "nope",
        "exclude_mental_model_ids": "x", "recall_max_tokens": "1",
    }})),
    ("create-trigger-response-schema", "post", MM, j({"name": "a", "source_query": "q",
                                                        "trigger": {"response_schema": {
                                                            "type": "array"}}})),
    ("create-trigger-response-schema-props", "post", MM, j({
        "name": "a", "source_query": "q", "trigger": {"response_schema": {
            "type": "object", "properties": {"a": {"type": "weird"}, "b": 5},
            "required": ["c"]}}})),
    ("create-trigger-tag-groups", "post", MM, j({
        "name": "a", "source_query": "q", "trigger": {"tag_groups": [{"x": 1}]}})),
    ("create-trigger-fact-types", "post", MM, j({
        "name": "a", "source_query": "q", "trigger": {"fact_types": ["world", "bogus"]}})),
    ("create-id-int", "post", MM, j({"id": 5, "name": "a", "source_query": "q"})),
    ("create-id-bad", "post", MM, j({"id": "Bad_Id", "name": "a", "source_query": "q"})),
    ("create-id-empty", "post", MM, j({"id": "", "name": "a", "source_query": "q"})),
    ("create-id-long", "post", MM, j({"id": "a" * 65, "name": "a", "source_query": "q"})),
    ("create-nul-name", "post", MM, j({"name": "a\x00", "source_query": "q"})),
    ("create-nul-many", "post", MM, j({
        "x\x00": 1, "name": "a\x00", "source_query": "b\x00", "tags": ["\x00", "x\x00"],
        "trigger": {"k\x00": 1, "exclude_mental_model_ids": ["x\x00", "y\x00"],
                    "response_schema": {"properties": {"p": {"d": "\x00"}}}},
        "zz": [[{"q": "\x00"}]],
    })),
    ("create-nul-and-unknown", "post", MM, j({"x": 1, "name": "a\x00", "source_query": 5})),
    ("create-ok", "post", MM, j({"id": "new-one", "name": "a", "source_query": "q",
                                  "tags": None, "max_tokens": None, "trigger": None})),
    ("create-ok-full", "post", MM, j({"id": "new-two", "name": "a", "source_query": "q",
                                       "tags": ["x"], "max_tokens": 256,
                                       "trigger": {"mode": "delta"}})),
    ("create-ok-id-null", "post", MM, j({"id": None, "name": "a", "source_query": "q",
                                          "tags": []})),
    ("create-conflict", "post", MM, j({"id": "m1", "name": "a", "source_query": "q"})),
    ("create-unknown-bank", "post", "/v1/default/banks/nope/mental-models",
     j({"name": "a", "source_query": "q"})),
    # --- update ----------------------------------------------------------------------------
    ("patch-no-body", "patch", M1, None),
    ("patch-empty-raw", "patch", M1, ""),
    ("patch-null", "patch", M1, "null"),
    ("patch-list", "patch", M1, "[]"),
    ("patch-zero", "patch", M1, "0"),
    ("patch-false", "patch", M1, "false"),
    ("patch-string", "patch", M1, '""'),
    ("patch-empty-object", "patch", M1, "{}"),
    ("patch-bad-json", "patch", M1, '{"a":'),
    ("patch-nulls", "patch", M1, j({"name": None, "source_query": None, "tags": None,
                                     "max_tokens": None, "trigger": None})),
    ("patch-types", "patch", M1, j({"name": 5, "source_query": False, "tags": [None],
                                     "max_tokens": "x", "trigger": 1})),
    ("patch-blank", "patch", M1, j({"name": "", "source_query": "  "})),
    ("patch-unknown", "patch", M1, j({"id": "m2", "name": 5, "zz": 1})),
    ("patch-max-tokens", "patch", M1, j({"max_tokens": 100})),
    ("patch-max-tokens-high", "patch", M1, j({"max_tokens": 10000})),
    ("patch-tag-too-long", "patch", M1, j({"tags": ["t" * 513]})),
    ("patch-trigger", "patch", M1, j({"trigger": {"mode": "x", "refresh_cron": "* * *"}})),
    ("patch-trigger-unknown", "patch", M1, j({"trigger": {"nope": 1}})),
    ("patch-trigger-null-key", "patch", M1, j({"trigger": {"refresh_cron": None}})),
    ("patch-nul", "patch", M1, j({"tags": ["a", "b\x00"], "name": "\x00"})),
    ("patch-ok", "patch", M1, j({"name": "renamed", "tags": ["x", "y"], "max_tokens": 300,
                                  "trigger": {"mode": "delta"}})),
    ("patch-unknown-model", "patch", f"{MM}/nope", j({"name": 5})),
    # --- refresh ---------------------------------------------------------------------------
    ("refresh-no-body", "post", f"{M1}/refresh", None),
    ("refresh-empty-raw", "post", f"{M1}/refresh", ""),
    ("refresh-null", "post", f"{M1}/refresh", "null"),
    ("refresh-empty-object", "post", f"{M1}/refresh", "{}"),
    ("refresh-list", "post", f"{M1}/refresh", "[]"),
    ("refresh-zero", "post", f"{M1}/refresh", "0"),
    ("refresh-string", "post", f"{M1}/refresh", '"full"'),
    ("refresh-mode-delta", "post", f"{M1}/refresh", j({"mode": "delta"})),
    ("refresh-mode-int", "post", f"{M1}/refresh", j({"mode": 5})),
    ("refresh-mode-unknown", "post", f"{M1}/refresh", j({"x": 1, "mode": "x", "y": 2})),
    ("refresh-mode-null", "post", f"{M1}/refresh", j({"mode": None})),
    ("refresh-mode-full", "post", f"{M1}/refresh", j({"mode": "full"})),
    ("refresh-nul", "post", f"{M1}/refresh", j({"mode": "\x00", "x\x00": 1})),
    ("refresh-bad-json", "post", f"{M1}/refresh", "[1,"),
    ("refresh-unknown-model", "post", f"{MM}/nope/refresh", j({"mode": 5})),
    # --- clear and dry run -----------------------------------------------------------------
    *[
        case
        for action in ("clear", "dry-run-refresh")
        for case in [
            (f"{action}-empty-raw", "post", f"{M1}/{action}", ""),
            (f"{action}-list", "post", f"{M1}/{action}", "[]"),
            (f"{action}-five", "post", f"{M1}/{action}", "5"),
            (f"{action}-string", "post", f"{M1}/{action}", '"x"'),
            (f"{action}-params", "post", f"{M1}/{action}", j({"b": 1, "a": None})),
            (f"{action}-nul", "post", f"{M1}/{action}", j({"a\x00": 1, "b": "\x00"})),
            (f"{action}-bad-json", "post", f"{M1}/{action}", "{{"),
            (f"{action}-unknown-model", "post", f"{MM}/nope/{action}", j({"a": 1})),
        ]
    ],
    ("clear-ok", "post", f"{M1}/clear", "{}"),
    ("clear-ok-null", "post", f"{M1}/clear", "null"),
    # --- reads -----------------------------------------------------------------------------
    ("list-ok", "get", MM, None),
    ("list-ok-content", "get", f"{MM}?detail=content&tags=t1&tags=&tags_match=all", None),
    ("list-ok-full", "get", f"{MM}?detail=full&limit=1&offset=0&exclude_knowledge_pages=TRUE",
     None),
    ("list-ok-empty-values", "get", f"{MM}?detail=&limit=&offset=&tags_match=", None),
    ("list-detail", "get", f"{MM}?detail=x", None),
    ("list-limit-zero", "get", f"{MM}?limit=0", None),
    ("list-limit-text", "get", f"{MM}?limit=abc", None),
    ("list-limit-high", "get", f"{MM}?limit=1001", None),
    ("list-limit-float", "get", f"{MM}?limit=1.5", None),
    ("list-offset-negative", "get", f"{MM}?offset=-1", None),
    ("list-offset-huge", "get", f"{MM}?offset=99999999999", None),
    ("list-tags-nul", "get", f"{MM}?tags=a%00", None),
    ("list-tags-match", "get", f"{MM}?tags_match=x", None),
    ("list-ekp", "get", f"{MM}?exclude_knowledge_pages=maybe", None),
    ("list-unknown-param", "get", f"{MM}?zzz=1", None),
    ("list-combined", "get", f"{MM}?exclude_knowledge_pages=2&tags_match=none&offset=x"
                             f"&limit=-5&detail=all&tags=%00", None),
    ("list-unknown-bank", "get", "/v1/default/banks/nope/mental-models", None),
    ("get-ok", "get", M1, None),
    ("get-ok-metadata", "get", f"{M1}?detail=metadata", None),
    ("get-ok-content", "get", f"{M1}?detail=content", None),
    ("get-ok-empty-detail", "get", f"{M1}?detail=", None),
    ("get-detail", "get", f"{M1}?detail=FULL", None),
    ("get-unknown-model", "get", f"{MM}/nope", None),
    ("history-ok", "get", f"{M1}/history", None),
    ("delete-unknown-model", "delete", f"{MM}/nope", None),
    # --- operations ------------------------------------------------------------------------
    ("ops-list-ok", "get", OPS, None),
    ("ops-list-ok-params", "get", f"{OPS}?status=pending&type=x&limit=5&offset=1"
                                  "&exclude_parents=true", None),
    ("ops-list-ok-empty", "get", f"{OPS}?status=&type=", None),
    ("ops-list-status", "get", f"{OPS}?status=x", None),
    ("ops-list-limit-zero", "get", f"{OPS}?limit=0", None),
    ("ops-list-limit-text", "get", f"{OPS}?limit=a", None),
    ("ops-list-limit-high", "get", f"{OPS}?limit=101", None),
    ("ops-list-limit-empty", "get", f"{OPS}?limit=", None),
    ("ops-list-offset", "get", f"{OPS}?offset=-1", None),
    ("ops-list-offset-huge", "get", f"{OPS}?offset=99999999999", None),
    ("ops-list-type-long", "get", f"{OPS}?type={'t' * 65}", None),
    ("ops-list-exclude-parents", "get", f"{OPS}?exclude_parents=maybe", None),
    ("ops-list-combined", "get", f"{OPS}?exclude_parents=x&offset=y&limit=z&type={'t' * 70}"
                                 "&status=nope", None),
    ("ops-list-unknown-bank", "get", "/v1/default/banks/nope/operations", None),
    ("ops-list-unknown-bank-bad-query", "get", "/v1/default/banks/nope/operations?limit=0",
     None),
    ("ops-get-bad-uuid", "get", f"{OPS}/not-a-uuid", None),
    ("ops-get-bad-uuid-bad-query", "get", f"{OPS}/not-a-uuid?include_payload=x", None),
    ("ops-get-include-payload", "get", f"{OPS}/{UUID0}?include_payload=maybe", None),
    ("ops-get-not-found", "get", f"{OPS}/{UUID0}?include_payload=true", None),
    ("ops-get-ok", "get", f"{OPS}/{UUID1}?include_payload=1", None),
    ("ops-get-ok-no-payload", "get", f"{OPS}/{UUID1}", None),
    ("ops-cancel-bad-uuid", "delete", f"{OPS}/x", None),
    ("ops-retry-bad-uuid", "post", f"{OPS}/x/retry", None),
    ("ops-cancel-unknown", "delete", f"{OPS}/{UUID0}", None),
]


EXPECTED: dict[str, tuple[int, str]] = {
    'create-empty-raw': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Field required","type":"missing"},{"loc'
        '":["body","source_query"],"msg":"Field required","type":"missing"}]}'
    ),
    'create-null': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'create-list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'create-zero': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'create-false': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'create-string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'create-bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g property name enclosed in double quotes: line 1 column 2 (char 1)","type":"jso'
        'n_invalid"}]}'
    ),
    'create-empty-object': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Field required","type":"missing"},{"loc'
        '":["body","source_query"],"msg":"Field required","type":"missing"}]}'
    ),
    'create-types': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Input should be a valid string","type":'
        '"string_type"},{"loc":["body","source_query"],"msg":"Input should be a valid str'
        'ing","type":"string_type"}]}'
    ),
    'create-blank': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"String should have at least 1 non-blank'
        ' character","type":"string_too_short"},{"loc":["body","source_query"],"msg":"Str'
        'ing should have at least 1 character","type":"string_too_short"}]}'
    ),
    'create-nulls': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Input should be a valid string","type":'
        '"string_type"},{"loc":["body","source_query"],"msg":"Input should be a valid str'
        'ing","type":"string_type"}]}'
    ),
    'create-unknown': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","a"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"}]}'
    ),
    'create-combined': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","y"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"},{"loc":["body","id"],"msg":"id must match ^[a-z0-9][a-z0-9-'
        ']{0,63}$: lowercase letters, digits and hyphens, starting with a letter or digit'
        ', at most 64 characters","type":"string_pattern_mismatch"},{"loc":["body","name"'
        '],"msg":"Input should be a valid string","type":"string_type"},{"loc":["body","s'
        'ource_query"],"msg":"Field required","type":"missing"},{"loc":["body","tags"],"m'
        'sg":"Input should be a valid list","type":"list_type"},{"loc":["body","max_token'
        's"],"msg":"Input should be a valid integer","type":"int_type"},{"loc":["body","t'
        'rigger"],"msg":"Input should be a valid dictionary","type":"dict_type"}]}'
    ),
    'create-combined-2': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"Input should be a valid string","type":"s'
        'tring_type"},{"loc":["body","name"],"msg":"Field required","type":"missing"},{"l'
        'oc":["body","source_query"],"msg":"Input should be a valid string","type":"strin'
        'g_type"},{"loc":["body","tags",0],"msg":"Input should be a valid string","type":'
        '"string_type"},{"loc":["body","max_tokens"],"msg":"Input should be a valid integ'
        'er","type":"int_type"},{"loc":["body","trigger","zz"],"msg":"Extra inputs are no'
        't permitted","type":"extra_forbidden"},{"loc":["body","trigger","mode"],"msg":"I'
        'nput should be \'full\' or \'delta\'","type":"literal_error"}]}'
    ),
    'create-tags-not-strings': (
        422,
        '{"detail":[{"loc":["body","tags",0],"msg":"Input should be a valid string","type'
        '":"string_type"}]}'
    ),
    'create-tags-dict': (
        422,
        '{"detail":[{"loc":["body","tags"],"msg":"Input should be a valid list","type":"l'
        'ist_type"}]}'
    ),
    'create-tag-too-long': (
        422,
        '{"detail":[{"loc":["body","tags",1],"msg":"String should have at most 512 charac'
        'ters","type":"string_too_long"},{"loc":["body","tags",2],"msg":"String should ha'
        've at most 512 characters","type":"string_too_long"}]}'
    ),
    'create-max-tokens-low': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be greater than or e'
        'qual to 256","type":"greater_than_equal"}]}'
    ),
    'create-max-tokens-high': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be less than or equa'
        'l to 8192","type":"less_than_equal"}]}'
    ),
    'create-max-tokens-bool': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer",'
        '"type":"int_type"}]}'
    ),
    'create-max-tokens-float': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer",'
        '"type":"int_type"}]}'
    ),
    'create-max-tokens-zero': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be greater than or e'
        'qual to 256","type":"greater_than_equal"}]}'
    ),
    'create-trigger-list': (
        422,
        '{"detail":[{"loc":["body","trigger"],"msg":"Input should be a valid dictionary",'
        '"type":"dict_type"}]}'
    ),
    'create-trigger-string': (
        422,
        '{"detail":[{"loc":["body","trigger"],"msg":"Input should be a valid dictionary",'
        '"type":"dict_type"}]}'
    ),
    'create-trigger-unknown': (
        422,
        '{"detail":[{"loc":["body","trigger","b"],"msg":"Extra inputs are not permitted",'
        '"type":"extra_forbidden"},{"loc":["body","trigger","a"],"msg":"Extra inputs are '
        'not permitted","type":"extra_forbidden"}]}'
    ),
    'create-trigger-many': (
        422,
        '{"detail":[{"loc":["body","trigger","budget"],"msg":"Input should be \'low\', \'mid'
        '\' or \'high\'","type":"literal_error"},{"loc":["body","trigger","mode"],"msg":"Inp'
        'ut should be \'full\' or \'delta\'","type":"literal_error"},{"loc":["body","trigger"'
        ',"min_refresh_interval_seconds"],"msg":"Input should be greater than or equal to'
        ' 0","type":"greater_than_equal"},{"loc":["body","trigger","exclude_mental_model_'
        'ids"],"msg":"Input should be a valid list","type":"list_type"},{"loc":["body","t'
        'rigger","tags_match"],"msg":"Input should be \'any\', \'all\', \'any_strict\', \'all_st'
        'rict\' or \'exact\'","type":"literal_error"},{"loc":["body","trigger","recall_max_t'
        'okens"],"msg":"Input should be a valid integer","type":"int_type"},{"loc":["body'
        '","trigger","keep_trace"],"msg":"Input should be a valid boolean","type":"bool_t'
        'ype"}]}'
    ),
    'create-trigger-response-schema': (
        422,
        '{"detail":[{"loc":["body","trigger","response_schema"],"msg":"response_schema mu'
        'st be an object schema (its \\"type\\" must be \\"object\\")","type":"value_error"}]'
        '}'
    ),
    'create-trigger-response-schema-props': (
        422,
        '{"detail":[{"loc":["body","trigger","response_schema","properties","a"],"msg":"p'
        'roperty type must be one of string, number, integer, boolean, array, object; got'
        ' \'weird\'","type":"value_error"},{"loc":["body","trigger","response_schema","prop'
        'erties","b"],"msg":"a property must be a JSON object (a JSON Schema)","type":"va'
        'lue_error"},{"loc":["body","trigger","response_schema","required"],"msg":"requir'
        'ed names properties that do not exist: c","type":"value_error"}]}'
    ),
    'create-trigger-tag-groups': (
        422,
        '{"detail":[{"loc":["body","trigger","tag_groups",0,"x"],"msg":"unknown field(s) '
        '[\'x\'] in a tag group leaf (allowed: tags, match, resolve)","type":"extra_forbidd'
        'en"}]}'
    ),
    'create-trigger-fact-types': (
        422,
        '{"detail":[{"loc":["body","trigger","fact_types",1],"msg":"Input should be \'worl'
        'd\', \'experience\' or \'observation\'","type":"literal_error"}]}'
    ),
    'create-id-int': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"Input should be a valid string","type":"s'
        'tring_type"}]}'
    ),
    'create-id-bad': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"id must match ^[a-z0-9][a-z0-9-]{0,63}$: '
        'lowercase letters, digits and hyphens, starting with a letter or digit, at most '
        '64 characters","type":"string_pattern_mismatch"}]}'
    ),
    'create-id-empty': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"String should have at least 1 character",'
        '"type":"string_too_short"}]}'
    ),
    'create-id-long': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"id must match ^[a-z0-9][a-z0-9-]{0,63}$: '
        'lowercase letters, digits and hyphens, starting with a letter or digit, at most '
        '64 characters","type":"string_pattern_mismatch"}]}'
    ),
    'create-nul-name': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Null characters are not allowed.","type'
        '":"null_characters_not_allowed"}]}'
    ),
    'create-nul-many': (
        422,
        '{"detail":[{"loc":["body","x\\u0000"],"msg":"Extra inputs are not permitted","typ'
        'e":"extra_forbidden"},{"loc":["body","zz"],"msg":"Extra inputs are not permitted'
        '","type":"extra_forbidden"},{"loc":["body","name"],"msg":"Null characters are no'
        't allowed.","type":"null_characters_not_allowed"},{"loc":["body","source_query"]'
        ',"msg":"Null characters are not allowed.","type":"null_characters_not_allowed"},'
        '{"loc":["body","tags",0],"msg":"Null characters are not allowed.","type":"null_c'
        'haracters_not_allowed"},{"loc":["body","tags",1],"msg":"Null characters are not '
        'allowed.","type":"null_characters_not_allowed"},{"loc":["body","trigger","k\\u000'
        '0"],"msg":"Extra inputs are not permitted","type":"extra_forbidden"},{"loc":["bo'
        'dy","trigger","exclude_mental_model_ids",0],"msg":"Null characters are not allow'
        'ed.","type":"null_characters_not_allowed"},{"loc":["body","trigger","exclude_men'
        'tal_model_ids",1],"msg":"Null characters are not allowed.","type":"null_characte'
        'rs_not_allowed"},{"loc":["body","trigger","response_schema","properties","p","d"'
        '],"msg":"Null characters are not allowed.","type":"null_characters_not_allowed"}'
        ']}'
    ),
    'create-nul-and-unknown': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","name"],"msg":"Null characters are not allowed.",'
        '"type":"null_characters_not_allowed"},{"loc":["body","source_query"],"msg":"Inpu'
        't should be a valid string","type":"string_type"}]}'
    ),
    'create-ok': (
        200,
        '{"mental_model_id":"new-one","operation_id":"<uuid>"}'
    ),
    'create-ok-full': (
        200,
        '{"mental_model_id":"new-two","operation_id":"<uuid>"}'
    ),
    'create-ok-id-null': (
        200,
        '{"mental_model_id":"<generated id>","operation_id":"<uuid>"}'
    ),
    'create-conflict': (
        409,
        '{"detail":"Mental model \'m1\' already exists in bank \'mm-bank\'"}'
    ),
    'create-unknown-bank': (
        200,
        '{"mental_model_id":"<generated id>","operation_id":"<uuid>"}'
    ),
    'patch-no-body': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-empty-raw': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-null': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'patch-zero': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'patch-false': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'patch-string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'patch-empty-object': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g value: line 1 column 6 (char 5)","type":"json_invalid"}]}'
    ),
    'patch-nulls': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-types': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Input should be a valid string","type":'
        '"string_type"},{"loc":["body","source_query"],"msg":"Input should be a valid str'
        'ing","type":"string_type"},{"loc":["body","max_tokens"],"msg":"Input should be a'
        ' valid integer","type":"int_type"},{"loc":["body","tags",0],"msg":"Input should '
        'be a valid string","type":"string_type"},{"loc":["body","trigger"],"msg":"Input '
        'should be a valid dictionary","type":"dict_type"}]}'
    ),
    'patch-blank': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"String should have at least 1 character'
        '","type":"string_too_short"},{"loc":["body","source_query"],"msg":"String should'
        ' have at least 1 non-blank character","type":"string_too_short"}]}'
    ),
    'patch-unknown': (
        422,
        '{"detail":[{"loc":["body","id"],"msg":"Extra inputs are not permitted","type":"e'
        'xtra_forbidden"},{"loc":["body","zz"],"msg":"Extra inputs are not permitted","ty'
        'pe":"extra_forbidden"},{"loc":["body","name"],"msg":"Input should be a valid str'
        'ing","type":"string_type"}]}'
    ),
    'patch-max-tokens': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be greater than or e'
        'qual to 256","type":"greater_than_equal"}]}'
    ),
    'patch-max-tokens-high': (
        422,
        '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be less than or equa'
        'l to 8192","type":"less_than_equal"}]}'
    ),
    'patch-tag-too-long': (
        422,
        '{"detail":[{"loc":["body","tags",0],"msg":"String should have at most 512 charac'
        'ters","type":"string_too_long"}]}'
    ),
    'patch-trigger': (
        422,
        '{"detail":[{"loc":["body","trigger","mode"],"msg":"Input should be \'full\' or \'de'
        'lta\'","type":"literal_error"}]}'
    ),
    'patch-trigger-unknown': (
        422,
        '{"detail":[{"loc":["body","trigger","nope"],"msg":"Extra inputs are not permitte'
        'd","type":"extra_forbidden"}]}'
    ),
    'patch-trigger-null-key': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'patch-nul': (
        422,
        '{"detail":[{"loc":["body","name"],"msg":"Null characters are not allowed.","type'
        '":"null_characters_not_allowed"},{"loc":["body","tags",1],"msg":"Null characters'
        ' are not allowed.","type":"null_characters_not_allowed"}]}'
    ),
    'patch-ok': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"renamed","source_query":"what?","content"'
        ':"# doc","tags":["x","y"],"max_tokens":300,"trigger":{"budget":null,"mode":"delt'
        'a","refresh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":n'
        'ull,"min_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models'
        '":false,"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"inc'
        'lude_chunks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"refl'
        'ect_search_observations_max_tokens":null,"reflect_search_observations_include_en'
        'tities":null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null'
        ',"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_a'
        't":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{'
        '"text":"# doc"},"is_stale":false}'
    ),
    'patch-unknown-model': (
        404,
        '{"detail":"Mental model \'nope\' not found"}'
    ),
    'refresh-no-body': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-empty-raw': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-null': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-empty-object': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'refresh-zero': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'refresh-string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'refresh-mode-delta': (
        422,
        '{"detail":[{"loc":["body","mode"],"msg":"Input should be \'full\'","type":"literal'
        '_error"}]}'
    ),
    'refresh-mode-int': (
        422,
        '{"detail":[{"loc":["body","mode"],"msg":"Input should be \'full\'","type":"literal'
        '_error"}]}'
    ),
    'refresh-mode-unknown': (
        422,
        '{"detail":[{"loc":["body","x"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","y"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"},{"loc":["body","mode"],"msg":"Input should be \'full\'","type'
        '":"literal_error"}]}'
    ),
    'refresh-mode-null': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-mode-full': (
        200,
        '{"operation_id":"<uuid>","status":"queued"}'
    ),
    'refresh-nul': (
        422,
        '{"detail":[{"loc":["body","x\\u0000"],"msg":"Extra inputs are not permitted","typ'
        'e":"extra_forbidden"},{"loc":["body","mode"],"msg":"Input should be \'full\'","typ'
        'e":"literal_error"}]}'
    ),
    'refresh-bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g value: line 1 column 4 (char 3)","type":"json_invalid"}]}'
    ),
    'refresh-unknown-model': (
        422,
        '{"detail":[{"loc":["body","mode"],"msg":"Input should be \'full\'","type":"literal'
        '_error"}]}'
    ),
    'clear-empty-raw': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"",'
        '"tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","refresh_'
        'after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"min_ref'
        'resh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false,"exc'
        'lude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_chunks"'
        ':null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_search_o'
        'bservations_max_tokens":null,"reflect_search_observations_include_entities":null'
        ',"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_memor'
        'y_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null,"cre'
        'ated_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":"# do'
        'c"},"is_stale":false}'
    ),
    'clear-list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'clear-five': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'clear-string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'clear-params': (
        422,
        '{"detail":[{"loc":["body","b"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","a"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"}]}'
    ),
    'clear-nul': (
        422,
        '{"detail":[{"loc":["body","a\\u0000"],"msg":"Extra inputs are not permitted","typ'
        'e":"extra_forbidden"},{"loc":["body","b"],"msg":"Extra inputs are not permitted"'
        ',"type":"extra_forbidden"}]}'
    ),
    'clear-bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g property name enclosed in double quotes: line 1 column 2 (char 1)","type":"jso'
        'n_invalid"}]}'
    ),
    'clear-unknown-model': (
        404,
        '{"detail":"Mental model \'nope\' not found"}'
    ),
    'dry-run-refresh-empty-raw': (
        200,
        '{"mental_model_id":"m1","name":"One","requested_mode":"full","effective_mode":"f'
        'ull","mode_fallback_reason":null,"outcome":"content_preserved_no_new_facts","wou'
        'ld_persist":false,"scope":{"tags":["t1"],"tags_match":"all_strict","tag_groups":'
        'null,"fact_types":null,"exclude_mental_models":false,"exclude_mental_model_ids":'
        '["m1"]},"window":{"created_after":null,"created_before":"<datetime>","watermark"'
        ':null},"facts":{"retrieved":{},"used":{}},"based_on":{},"current_content":"# doc'
        '","candidate_content":"","preview_content":"# doc","diff":"","changes":{"changed'
        '":false,"sections":[],"counts":{"sections_added":0,"sections_removed":0,"section'
        's_changed":0,"blocks_added":0,"blocks_removed":0,"blocks_changed":0,"lines_added'
        '":0,"lines_removed":0},"unified":""},"delta_operations":null,"retraction":null,"'
        'trace":{"recorded_at":"<datetime>","effective_mode":"full","mode_fallback_reason'
        '":null,"outcome":"content_preserved_no_new_facts","tool_calls":[],"llm_calls":[]'
        ',"directives":[],"delta_operations":null,"retraction":null,"usage":{"input_token'
        's":0,"output_tokens":0,"total_tokens":0,"cached_tokens":0,"thoughts_tokens":0},"'
        'duration_ms":"<ms>","warnings":["Nothing in this document\'s scope was readable, '
        'so the reflect loop was skipped and the document left as it is. Check the resolv'
        'ed scope — tags, tag_groups and fact_types all narrow it — and whether the bank '
        'holds memories that match it."]},"usage":{"input_tokens":0,"output_tokens":0,"to'
        'tal_tokens":0,"cached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warni'
        'ngs":["Nothing in this document\'s scope was readable, so the reflect loop was sk'
        'ipped and the document left as it is. Check the resolved scope — tags, tag_group'
        's and fact_types all narrow it — and whether the bank holds memories that match '
        'it."]}'
    ),
    'dry-run-refresh-list': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'dry-run-refresh-five': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'dry-run-refresh-string': (
        422,
        '{"detail":[{"loc":["body"],"msg":"Input should be a valid dictionary","type":"di'
        'ct_type"}]}'
    ),
    'dry-run-refresh-params': (
        422,
        '{"detail":[{"loc":["body","b"],"msg":"Extra inputs are not permitted","type":"ex'
        'tra_forbidden"},{"loc":["body","a"],"msg":"Extra inputs are not permitted","type'
        '":"extra_forbidden"}]}'
    ),
    'dry-run-refresh-nul': (
        422,
        '{"detail":[{"loc":["body","a\\u0000"],"msg":"Extra inputs are not permitted","typ'
        'e":"extra_forbidden"},{"loc":["body","b"],"msg":"Extra inputs are not permitted"'
        ',"type":"extra_forbidden"}]}'
    ),
    'dry-run-refresh-bad-json': (
        422,
        '{"detail":[{"loc":["body"],"msg":"JSON decode error: JSON parse error - Expectin'
        'g property name enclosed in double quotes: line 1 column 2 (char 1)","type":"jso'
        'n_invalid"}]}'
    ),
    'dry-run-refresh-unknown-model': (
        404,
        '{"detail":"Mental model nope not found"}'
    ),
    'clear-ok': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"",'
        '"tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","refresh_'
        'after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"min_ref'
        'resh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false,"exc'
        'lude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_chunks"'
        ':null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_search_o'
        'bservations_max_tokens":null,"reflect_search_observations_include_entities":null'
        ',"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_memor'
        'y_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null,"cre'
        'ated_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":"# do'
        'c"},"is_stale":false}'
    ),
    'clear-ok-null': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"",'
        '"tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","refresh_'
        'after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"min_ref'
        'resh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false,"exc'
        'lude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_chunks"'
        ':null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_search_o'
        'bservations_max_tokens":null,"reflect_search_observations_include_entities":null'
        ',"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_memor'
        'y_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null,"cre'
        'ated_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":"# do'
        'c"},"is_stale":false}'
    ),
    'list-ok': (
        200,
        '{"items":[{"id":"m1","bank_id":"mm-bank","name":"One","source_query":null,"conte'
        'nt":null,"tags":["t1"],"max_tokens":null,"trigger":null,"last_refreshed_at":null'
        ',"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_a'
        't":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":n'
        'ull,"is_stale":false}],"total":1,"limit":100,"offset":0}'
    ),
    'list-ok-content': (
        200,
        '{"items":[{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","co'
        'ntent":"# doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"'
        'full","refresh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron'
        '":null,"min_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_mod'
        'els":false,"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"'
        'include_chunks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"r'
        'eflect_search_observations_max_tokens":null,"reflect_search_observations_include'
        '_entities":null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":n'
        'ull,"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshe'
        'd_at":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response'
        '":null,"is_stale":false}],"total":1,"limit":100,"offset":0}'
    ),
    'list-ok-full': (
        200,
        '{"items":[{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","co'
        'ntent":"# doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"'
        'full","refresh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron'
        '":null,"min_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_mod'
        'els":false,"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"'
        'include_chunks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"r'
        'eflect_search_observations_max_tokens":null,"reflect_search_observations_include'
        '_entities":null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":n'
        'ull,"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshe'
        'd_at":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response'
        '":{"text":"# doc"},"is_stale":false}],"total":1,"limit":1,"offset":0}'
    ),
    'list-ok-empty-values': (
        200,
        '{"items":[{"id":"m1","bank_id":"mm-bank","name":"One","source_query":null,"conte'
        'nt":null,"tags":["t1"],"max_tokens":null,"trigger":null,"last_refreshed_at":null'
        ',"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_a'
        't":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":n'
        'ull,"is_stale":false}],"total":1,"limit":100,"offset":0}'
    ),
    'list-detail': (
        422,
        '{"detail":[{"loc":["query","detail"],"msg":"Input should be \'metadata\', \'content'
        '\' or \'full\'","type":"literal_error"}]}'
    ),
    'list-limit-zero': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be greater than or equal'
        ' to 1","type":"greater_than_equal"}]}'
    ),
    'list-limit-text': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be a valid integer, unab'
        'le to parse string as an integer","type":"int_parsing"}]}'
    ),
    'list-limit-high': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be less than or equal to'
        ' 1000","type":"less_than_equal"}]}'
    ),
    'list-limit-float': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be a valid integer, unab'
        'le to parse string as an integer","type":"int_parsing"}]}'
    ),
    'list-offset-negative': (
        422,
        '{"detail":[{"loc":["query","offset"],"msg":"Input should be greater than or equa'
        'l to 0","type":"greater_than_equal"}]}'
    ),
    'list-offset-huge': (
        422,
        '{"detail":[{"loc":["query","offset"],"msg":"Input should be less than or equal t'
        'o 2147483647","type":"less_than_equal"}]}'
    ),
    'list-tags-nul': (
        422,
        '{"detail":[{"loc":["query","tags",0],"msg":"Null characters are not allowed.","t'
        'ype":"null_characters_not_allowed"}]}'
    ),
    'list-tags-match': (
        422,
        '{"detail":[{"loc":["query","tags_match"],"msg":"Input should be \'any\', \'all\' or '
        '\'exact\'","type":"literal_error"}]}'
    ),
    'list-ekp': (
        422,
        '{"detail":[{"loc":["query","exclude_knowledge_pages"],"msg":"Input should be a v'
        'alid boolean, unable to interpret input","type":"bool_parsing"}]}'
    ),
    'list-unknown-param': (
        200,
        '{"items":[{"id":"m1","bank_id":"mm-bank","name":"One","source_query":null,"conte'
        'nt":null,"tags":["t1"],"max_tokens":null,"trigger":null,"last_refreshed_at":null'
        ',"last_memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_a'
        't":null,"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":n'
        'ull,"is_stale":false}],"total":1,"limit":100,"offset":0}'
    ),
    'list-combined': (
        422,
        '{"detail":[{"loc":["query","detail"],"msg":"Input should be \'metadata\', \'content'
        '\' or \'full\'","type":"literal_error"},{"loc":["query","limit"],"msg":"Input shoul'
        'd be greater than or equal to 1","type":"greater_than_equal"},{"loc":["query","o'
        'ffset"],"msg":"Input should be a valid integer, unable to parse string as an int'
        'eger","type":"int_parsing"},{"loc":["query","tags",0],"msg":"Null characters are'
        ' not allowed.","type":"null_characters_not_allowed"},{"loc":["query","tags_match'
        '"],"msg":"Input should be \'any\', \'all\' or \'exact\'","type":"literal_error"},{"loc'
        '":["query","exclude_knowledge_pages"],"msg":"Input should be a valid boolean, un'
        'able to interpret input","type":"bool_parsing"}]}'
    ),
    'list-unknown-bank': (
        404,
        '{"detail":"Bank \'nope\' not found"}'
    ),
    'get-ok': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'get-ok-metadata': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":null,"content":null,"'
        'tags":["t1"],"max_tokens":null,"trigger":null,"last_refreshed_at":null,"last_mem'
        'ory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null,"c'
        'reated_at":"<datetime>","is_knowledge_page":false,"reflect_response":null,"is_st'
        'ale":false}'
    ),
    'get-ok-content': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":null,"is'
        '_stale":false}'
    ),
    'get-ok-empty-detail': (
        200,
        '{"id":"m1","bank_id":"mm-bank","name":"One","source_query":"what?","content":"# '
        'doc","tags":["t1"],"max_tokens":2048,"trigger":{"budget":null,"mode":"full","ref'
        'resh_after_consolidation":false,"refresh_cron":null,"full_refresh_cron":null,"mi'
        'n_refresh_interval_seconds":null,"fact_types":null,"exclude_mental_models":false'
        ',"exclude_mental_model_ids":null,"tags_match":null,"tag_groups":null,"include_ch'
        'unks":null,"recall_max_tokens":null,"recall_chunks_max_tokens":null,"reflect_sea'
        'rch_observations_max_tokens":null,"reflect_search_observations_include_entities"'
        ':null,"response_schema":null,"keep_trace":false,"review":null},"last_refreshed_at":null,"last_'
        'memory_seen_at":null,"last_refresh_failed_at":null,"last_full_refreshed_at":null'
        ',"created_at":"<datetime>","is_knowledge_page":false,"reflect_response":{"text":'
        '"# doc"},"is_stale":false}'
    ),
    'get-detail': (
        422,
        '{"detail":[{"loc":["query","detail"],"msg":"Input should be \'metadata\', \'content'
        '\' or \'full\'","type":"literal_error"}]}'
    ),
    'get-unknown-model': (
        404,
        '{"detail":"Mental model \'nope\' not found"}'
    ),
    'history-ok': (
        200,
        '[{"previous_content":null,"previous_reflect_response":null,"changed_at":"<dateti'
        'me>","kind":"refresh_failed","outcome":"refresh_failed_empty_candidate","failure'
        '_reason":"empty_candidate","error_message":"boom","operation_id":"<uuid>","id":"'
        '<int>"},{"previous_content":"old","previous_reflect_response":{"text":"old"},"ch'
        'anged_at":"<datetime>","kind":"version","id":"<int>","cause":"refresh","changes"'
        ':{"changed":true,"sections":[{"id":"preamble","title":"","change":"changed","hea'
        'ding":null,"blocks":[{"id":"b-cba06b57","change":"removed","before":"old","after'
        '":null}]},{"id":"doc","title":"doc","change":"added","heading":null,"blocks":[]}'
        '],"counts":{"sections_added":1,"sections_removed":0,"sections_changed":1,"blocks'
        '_added":0,"blocks_removed":1,"blocks_changed":0,"lines_added":1,"lines_removed":'
        '1},"unified":"--- before\\n+++ after\\n@@ -1 +1 @@\\n-old\\n\\\\ No newline at end of '
        'file\\n+# doc\\n\\\\ No newline at end of file\\n"}}]'
    ),
    'delete-unknown-model': (
        404,
        '{"detail":"Mental model \'nope\' not found"}'
    ),
    'ops-list-ok': (
        200,
        '{"bank_id":"mm-bank","total":2,"limit":20,"offset":0,"operations":[{"id":"<uuid>'
        '","task_type":"retain","operation_id":"<uuid>","operation_type":"retain","items_'
        'count":1,"document_id":"d1","filename":null,"mental_model_id":null,"details":nul'
        'l,"created_at":"<datetime>","updated_at":"<datetime>","status":"pending","error_'
        'message":null,"retry_count":0,"next_retry_at":null,"progress":null},{"id":"<uuid'
        '>","task_type":"refresh_mental_model","operation_id":"<uuid>","operation_type":"'
        'refresh_mental_model","items_count":0,"document_id":null,"filename":null,"mental'
        '_model_id":"m1","details":{"operation_type":"refresh_mental_model","outcome":"co'
        'ntent_written","failure_reason":null},"created_at":"<datetime>","updated_at":"<d'
        'atetime>","status":"completed","error_message":null,"retry_count":0,"next_retry_'
        'at":null,"progress":null}]}'
    ),
    'ops-list-ok-params': (
        200,
        '{"bank_id":"mm-bank","total":0,"limit":5,"offset":1,"operations":[]}'
    ),
    'ops-list-ok-empty': (
        200,
        '{"bank_id":"mm-bank","total":2,"limit":20,"offset":0,"operations":[{"id":"<uuid>'
        '","task_type":"retain","operation_id":"<uuid>","operation_type":"retain","items_'
        'count":1,"document_id":"d1","filename":null,"mental_model_id":null,"details":nul'
        'l,"created_at":"<datetime>","updated_at":"<datetime>","status":"pending","error_'
        'message":null,"retry_count":0,"next_retry_at":null,"progress":null},{"id":"<uuid'
        '>","task_type":"refresh_mental_model","operation_id":"<uuid>","operation_type":"'
        'refresh_mental_model","items_count":0,"document_id":null,"filename":null,"mental'
        '_model_id":"m1","details":{"operation_type":"refresh_mental_model","outcome":"co'
        'ntent_written","failure_reason":null},"created_at":"<datetime>","updated_at":"<d'
        'atetime>","status":"completed","error_message":null,"retry_count":0,"next_retry_'
        'at":null,"progress":null}]}'
    ),
    'ops-list-status': (
        422,
        '{"detail":[{"loc":["query","status"],"msg":"Input should be \'pending\', \'processi'
        'ng\', \'completed\', \'failed\' or \'cancelled\'","type":"literal_error"}]}'
    ),
    'ops-list-limit-zero': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be greater than or equal'
        ' to 1","type":"greater_than_equal"}]}'
    ),
    'ops-list-limit-text': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be a valid integer, unab'
        'le to parse string as an integer","type":"int_parsing"}]}'
    ),
    'ops-list-limit-high': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be less than or equal to'
        ' 100","type":"less_than_equal"}]}'
    ),
    'ops-list-limit-empty': (
        200,
        '{"bank_id":"mm-bank","total":2,"limit":20,"offset":0,"operations":[{"id":"<uuid>'
        '","task_type":"retain","operation_id":"<uuid>","operation_type":"retain","items_'
        'count":1,"document_id":"d1","filename":null,"mental_model_id":null,"details":nul'
        'l,"created_at":"<datetime>","updated_at":"<datetime>","status":"pending","error_'
        'message":null,"retry_count":0,"next_retry_at":null,"progress":null},{"id":"<uuid'
        '>","task_type":"refresh_mental_model","operation_id":"<uuid>","operation_type":"'
        'refresh_mental_model","items_count":0,"document_id":null,"filename":null,"mental'
        '_model_id":"m1","details":{"operation_type":"refresh_mental_model","outcome":"co'
        'ntent_written","failure_reason":null},"created_at":"<datetime>","updated_at":"<d'
        'atetime>","status":"completed","error_message":null,"retry_count":0,"next_retry_'
        'at":null,"progress":null}]}'
    ),
    'ops-list-offset': (
        422,
        '{"detail":[{"loc":["query","offset"],"msg":"Input should be greater than or equa'
        'l to 0","type":"greater_than_equal"}]}'
    ),
    'ops-list-offset-huge': (
        422,
        '{"detail":[{"loc":["query","offset"],"msg":"Input should be less than or equal t'
        'o 2147483647","type":"less_than_equal"}]}'
    ),
    'ops-list-type-long': (
        422,
        '{"detail":[{"loc":["query","type"],"msg":"String should have at most 64 characte'
        'rs","type":"string_too_long"}]}'
    ),
    'ops-list-exclude-parents': (
        422,
        '{"detail":[{"loc":["query","exclude_parents"],"msg":"Input should be a valid boo'
        'lean, unable to interpret input","type":"bool_parsing"}]}'
    ),
    'ops-list-combined': (
        422,
        '{"detail":[{"loc":["query","status"],"msg":"Input should be \'pending\', \'processi'
        'ng\', \'completed\', \'failed\' or \'cancelled\'","type":"literal_error"},{"loc":["quer'
        'y","type"],"msg":"String should have at most 64 characters","type":"string_too_l'
        'ong"},{"loc":["query","limit"],"msg":"Input should be a valid integer, unable to'
        ' parse string as an integer","type":"int_parsing"},{"loc":["query","offset"],"ms'
        'g":"Input should be a valid integer, unable to parse string as an integer","type'
        '":"int_parsing"},{"loc":["query","exclude_parents"],"msg":"Input should be a val'
        'id boolean, unable to interpret input","type":"bool_parsing"}]}'
    ),
    'ops-list-unknown-bank': (
        404,
        '{"detail":"Bank \'nope\' not found"}'
    ),
    'ops-list-unknown-bank-bad-query': (
        422,
        '{"detail":[{"loc":["query","limit"],"msg":"Input should be greater than or equal'
        ' to 1","type":"greater_than_equal"}]}'
    ),
    'ops-get-bad-uuid': (
        400,
        '{"detail":"Invalid operation_id format: not-a-uuid"}'
    ),
    'ops-get-bad-uuid-bad-query': (
        400,
        '{"detail":"Invalid operation_id format: not-a-uuid"}'
    ),
    'ops-get-include-payload': (
        422,
        '{"detail":[{"loc":["query","include_payload"],"msg":"Input should be a valid boo'
        'lean, unable to interpret input","type":"bool_parsing"}]}'
    ),
    'ops-get-not-found': (
        200,
        '{"operation_id":"<uuid>","status":"not_found","operation_type":null,"id":null,"t'
        'ask_type":null,"mental_model_id":null,"created_at":null,"updated_at":null,"compl'
        'eted_at":null,"error_message":null,"retry_count":null,"next_retry_at":null,"prog'
        'ress":null,"result_metadata":null,"details":null,"child_operations":null,"task_p'
        'ayload":null}'
    ),
    'ops-get-ok': (
        200,
        '{"operation_id":"<uuid>","status":"completed","operation_type":"refresh_mental_m'
        'odel","id":"<uuid>","task_type":"refresh_mental_model","mental_model_id":"m1","c'
        'reated_at":"<datetime>","updated_at":"<datetime>","completed_at":null,"error_mes'
        'sage":null,"retry_count":0,"next_retry_at":null,"progress":null,"result_metadata'
        '":{"k":1},"details":{"operation_type":"refresh_mental_model","outcome":"content_'
        'written","failure_reason":null},"child_operations":null,"task_payload":{}}'
    ),
    'ops-get-ok-no-payload': (
        200,
        '{"operation_id":"<uuid>","status":"completed","operation_type":"refresh_mental_m'
        'odel","id":"<uuid>","task_type":"refresh_mental_model","mental_model_id":"m1","c'
        'reated_at":"<datetime>","updated_at":"<datetime>","completed_at":null,"error_mes'
        'sage":null,"retry_count":0,"next_retry_at":null,"progress":null,"result_metadata'
        '":{"k":1},"details":{"operation_type":"refresh_mental_model","outcome":"content_'
        'written","failure_reason":null},"child_operations":null,"task_payload":null}'
    ),
    'ops-cancel-bad-uuid': (
        400,
        '{"detail":"Invalid operation_id format: x"}'
    ),
    'ops-retry-bad-uuid': (
        400,
        '{"detail":"Invalid operation_id format: x"}'
    ),
    'ops-cancel-unknown': (
        404,
        '{"detail":"Operation \'00000000-0000-0000-0000-000000000000\' not found"}'
    ),
}


def test_every_case_has_an_expectation() -> None:
    check_cases(CASES, EXPECTED)


@pytest.mark.parametrize(("case_id", "method", "path", "body"), CASES,
                         ids=[case[0] for case in CASES])
def test_edge_answers_byte_for_byte(case_id: str, method: str, path: str, body: Any) -> None:
    make_bank("mm-bank", name="Mental model bank")
    model = make_mental_model("mm-bank", "m1", name="One", source_query="what?", tags=["t1"],
                              content="# doc", reflect_response={"text": "# doc"})
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="old",
                                      previous_reflect_response={"text": "old"})
    MentalModelHistory.objects.create(model=model, kind="refresh_failed",
                                      outcome="refresh_failed_empty_candidate",
                                      reason="empty_candidate", exception="boom",
                                      operation_id=UUID0)
    make_operation(bank_id="mm-bank", id=UUID1, mental_model_id="m1", status="completed",
                   details={"outcome": "content_written", "failure_reason": None},
                   result_metadata={"k": 1})
    make_operation(bank_id="mm-bank", operation_type="retain", status="pending",
                   payload={"items": [{"content": "x", "document_id": "d1"}]})
    api = APIClient(raise_request_exception=False)
    response = send(api, method, path, body)
    got = (response.status_code, _normalized(response.content.decode()))
    check_or_capture(case_id, got, EXPECTED)
