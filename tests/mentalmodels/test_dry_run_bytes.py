"""The dry run's answers, byte for byte: ``POST …/mental-models/{id}/dry-run-refresh`` for a few
refreshes (full and delta, written and not), compared with the literal bodies the hand-written
``render_preview`` answered before the result serializer took over its rendering (captured once
from that code).

Each body is compared as the raw response text, so the order of keys counts. Values that change
from run to run (date-times, uuids, durations) are replaced by placeholders first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.delta_llm import delta_llm
from fakes.llm_server import ScriptedLLMServer
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.test_delta import baseline
from tests.mentalmodels.test_pipeline import answer_with
from tests.wirebytes import DATETIME, DURATION_MS, check_or_capture

pytestmark = pytest.mark.django_db

DRY_RUN = "/v1/default/banks/mm-bank/mental-models/team/dry-run-refresh"

_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


def _normalized(text: str) -> str:
    text = DURATION_MS.sub('"duration_ms":"<ms>"', text)
    return _UUID.sub("<uuid>", DATETIME.sub('"<datetime>"', text))


@pytest.fixture(autouse=True)
def _scripted(scripted_llm: ScriptedLLMServer, openai_embeddings: Any) -> ScriptedLLMServer:
    return scripted_llm


def _full_written(bank: Any, llm: ScriptedLLMServer) -> None:
    unit = make_memory(bank, "Alice prefers async", embed=True)
    make_mental_model(bank, "team", content="old line\n")
    answer_with(llm, "new line", [str(unit.id)])


def _full_scoped_nothing_new(bank: Any, llm: ScriptedLLMServer) -> None:
    make_memory(bank, "Alice prefers async", embed=True, tags=["team"])
    make_mental_model(bank, "team", content="kept\n", tags=["team"],
                      trigger={"fact_types": ["world", "experience"], "tags_match": "all",
                               "exclude_mental_model_ids": ["other"]})
    answer_with(llm, "nothing on that")


def _delta_applied_and_skipped(bank: Any, llm: ScriptedLLMServer) -> None:
    baseline(bank, llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(llm, lambda call: [
        {"op": "append_block", "section_id": "log", "markdown": "- Bob joined"},
        {"op": "remove_block", "section_id": "log", "block_id": "b-nope"},
    ])


def _delta_not_applied(bank: Any, llm: ScriptedLLMServer) -> None:
    baseline(bank, llm)
    make_memory(bank, "Bob joined", embed=True)
    delta_llm(llm, lambda call: [{"op": "remove_section", "section_id": "nope"}])


CASES: dict[str, Callable[[Any, ScriptedLLMServer], None]] = {
    "full-written": _full_written,
    "full-scoped-nothing-new": _full_scoped_nothing_new,
    "delta-applied-and-skipped": _delta_applied_and_skipped,
    "delta-not-applied": _delta_not_applied,
}

EXPECTED: dict[str, tuple[int, str]] = {
    'full-written': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"full","effective_mode":"full",'
        '"mode_fallback_reason":null,"outcome":"content_written","would_persist":true,"scope":{"t'
        'ags":null,"tags_match":"any","tag_groups":null,"fact_types":null,"exclude_mental_models"'
        ':false,"exclude_mental_model_ids":["team"]},"window":{"created_after":null,"created_befo'
        're":"<datetime>","watermark":"<datetime>"},"facts":{"retrieved":{"world":1},"used":{"wor'
        'ld":1}},"based_on":{"world":[{"id":"<uuid>","text":"Alice prefers async","type":"world",'
        '"context":null,"tags":[],"occurred_start":null,"occurred_end":null,"mentioned_at":null,"'
        'updated_at":"<datetime>","document_id":null}]},"current_content":"old line\\n","candidate'
        '_content":"new line","preview_content":"new line","diff":"--- current\\n+++ preview\\n@@ -'
        '1 +1 @@\\n-old line\\n+new line","changes":{"changed":true,"sections":[{"id":"preamble","t'
        'itle":"","change":"changed","heading":null,"blocks":[{"id":"b-42b2829d","change":"added"'
        ',"before":null,"after":"new line"},{"id":"b-3e247142","change":"removed","before":"old l'
        'ine","after":null}]}],"counts":{"sections_added":0,"sections_removed":0,"sections_change'
        'd":1,"blocks_added":1,"blocks_removed":1,"blocks_changed":0,"lines_added":1,"lines_remov'
        'ed":1},"unified":"--- before\\n+++ after\\n@@ -1 +1 @@\\n-old line\\n+new line\\n\\\\ No newlin'
        'e at end of file\\n"},"delta_operations":null,"retraction":null,"trace":{"recorded_at":"<'
        'datetime>","effective_mode":"full","mode_fallback_reason":null,"outcome":"content_writte'
        'n","tool_calls":[{"tool":"search_observations","reason":null,"input":{"query":"team"},"u'
        'pdated_at":null,"result_count":0,"duration_ms":"<ms>","iteration":1,"output":{"observati'
        'ons":[],"count":0}},{"tool":"recall","reason":null,"input":{"query":"team"},"updated_at"'
        ':null,"result_count":1,"duration_ms":"<ms>","iteration":2,"output":{"facts":[{"id":"<uui'
        'd>","type":"world","text":"Alice prefers async","updated_at":"<datetime>"}],"count":1}}]'
        ',"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"scope":"agent_2","duration_ms":'
        '"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"}],"directives":[],"delta_operations":nul'
        'l,"retraction":null,"usage":{"input_tokens":492,"output_tokens":11,"total_tokens":503,"c'
        'ached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":[]},"usage":{"input'
        '_tokens":492,"output_tokens":11,"total_tokens":503,"cached_tokens":0,"thoughts_tokens":0'
        '},"duration_ms":"<ms>","warnings":[]}'
    ),
    'full-scoped-nothing-new': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"full","effective_mode":"full",'
        '"mode_fallback_reason":null,"outcome":"content_preserved_no_new_facts","would_persist":f'
        'alse,"scope":{"tags":["team"],"tags_match":"all","tag_groups":null,"fact_types":["world"'
        ',"experience"],"exclude_mental_models":false,"exclude_mental_model_ids":["other","team"]'
        '},"window":{"created_after":null,"created_before":"<datetime>","watermark":"<datetime>"}'
        ',"facts":{"retrieved":{"world":1},"used":{}},"based_on":{},"current_content":"kept\\n","c'
        'andidate_content":"nothing on that","preview_content":"kept\\n","diff":"","changes":{"cha'
        'nged":false,"sections":[],"counts":{"sections_added":0,"sections_removed":0,"sections_ch'
        'anged":0,"blocks_added":0,"blocks_removed":0,"blocks_changed":0,"lines_added":0,"lines_r'
        'emoved":0},"unified":""},"delta_operations":null,"retraction":null,"trace":{"recorded_at'
        '":"<datetime>","effective_mode":"full","mode_fallback_reason":null,"outcome":"content_pr'
        'eserved_no_new_facts","tool_calls":[{"tool":"recall","reason":null,"input":{"query":"tea'
        'm"},"updated_at":null,"result_count":1,"duration_ms":"<ms>","iteration":1,"output":{"fac'
        'ts":[{"id":"<uuid>","type":"world","text":"Alice prefers async","tags":["team"],"updated'
        '_at":"<datetime>"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{'
        '"scope":"agent_2","duration_ms":"<ms>"}],"directives":[],"delta_operations":null,"retrac'
        'tion":null,"usage":{"input_tokens":329,"output_tokens":10,"total_tokens":339,"cached_tok'
        'ens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["The reflect loop answered '
        'without citing any memory or mental model, so the document was left as it is and only th'
        'e watermark advanced."]},"usage":{"input_tokens":329,"output_tokens":10,"total_tokens":3'
        '39,"cached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["The reflect '
        'loop answered without citing any memory or mental model, so the document was left as it '
        'is and only the watermark advanced."]}'
    ),
    'delta-applied-and-skipped': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"delta","effective_mode":"delta'
        '","mode_fallback_reason":null,"outcome":"content_written","would_persist":true,"scope":{'
        '"tags":null,"tags_match":"any","tag_groups":null,"fact_types":null,"exclude_mental_model'
        's":false,"exclude_mental_model_ids":["team"]},"window":{"created_after":"<datetime>","cr'
        'eated_before":"<datetime>","watermark":"<datetime>"},"facts":{"retrieved":{"world":1},"u'
        'sed":{"world":1}},"based_on":{"world":[{"id":"<uuid>","tags":[],"text":"Alice leads the '
        'team","type":"world","context":null,"updated_at":"<datetime>","document_id":null,"mentio'
        'ned_at":null,"occurred_end":null,"occurred_start":null},{"id":"<uuid>","text":"Bob joine'
        'd","type":"world","context":null,"tags":[],"occurred_start":null,"occurred_end":null,"me'
        'ntioned_at":null,"updated_at":"<datetime>","document_id":null}]},"current_content":"## T'
        'eam\\n\\nAlice leads the team.\\n\\n| who | role |\\n|---|---|\\n| Alice | lead |\\n\\n## Log\\n\\'
        'n- started","candidate_content":"## Notes\\n\\nnew facts","preview_content":"## Team\\n\\nAl'
        'ice leads the team.\\n\\n| who | role |\\n|---|---|\\n| Alice | lead |\\n\\n## Log\\n\\n- starte'
        'd\\n\\n- Bob joined","diff":"--- current\\n+++ preview\\n@@ -8,4 +8,6 @@\\n \\n ## Log\\n \\n-- '
        'started+- started\\n+\\n+- Bob joined","changes":{"changed":true,"sections":[{"id":"log","'
        'title":"Log","change":"changed","heading":null,"blocks":[{"id":"b-0bc598e3","change":"ad'
        'ded","before":null,"after":"- Bob joined"}]}],"counts":{"sections_added":0,"sections_rem'
        'oved":0,"sections_changed":1,"blocks_added":1,"blocks_removed":0,"blocks_changed":0,"lin'
        'es_added":3,"lines_removed":1},"unified":"--- before\\n+++ after\\n@@ -8,4 +8,6 @@\\n \\n ##'
        ' Log\\n \\n-- started\\n\\\\ No newline at end of file\\n+- started\\n+\\n+- Bob joined\\n\\\\ No n'
        'ewline at end of file\\n"},"delta_operations":{"applied":[{"index":0,"operation":{"op":"a'
        'ppend_block","section_id":"log","markdown":"- Bob joined"},"attempt":1}],"skipped":[{"in'
        'dex":1,"operation":{"op":"remove_block","section_id":"log","block_id":"b-nope"},"reason"'
        ':"block_id \'b-nope\': no such block in the document","attempt":1}]},"retraction":null,"tr'
        'ace":{"recorded_at":"<datetime>","effective_mode":"delta","mode_fallback_reason":null,"o'
        'utcome":"content_written","tool_calls":[{"tool":"search_observations","reason":null,"inp'
        'ut":{"query":"team"},"updated_at":"<datetime>","result_count":0,"duration_ms":"<ms>","it'
        'eration":1,"output":{"observations":[],"count":0}},{"tool":"recall","reason":null,"input'
        '":{"query":"team"},"updated_at":"<datetime>","result_count":1,"duration_ms":"<ms>","iter'
        'ation":2,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Bob joined","updated_a'
        't":"<datetime>"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"s'
        'cope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"},{"scope":'
        '"delta_1","duration_ms":"<ms>"}],"directives":[],"delta_operations":{"applied":[{"index"'
        ':0,"attempt":1,"operation":{"op":"append_block","section_id":"log","markdown":"- Bob joi'
        'ned"}}],"skipped":[{"index":1,"reason":"block_id \'b-nope\': no such block in the document'
        '","attempt":1,"operation":{"op":"remove_block","section_id":"log","block_id":"b-nope"}}]'
        '},"retraction":null,"usage":{"input_tokens":846,"output_tokens":27,"total_tokens":873,"c'
        'ached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["1 delta operation'
        '(s) were dropped; see delta_operations.skipped for what did not make it into the documen'
        't"]},"usage":{"input_tokens":846,"output_tokens":27,"total_tokens":873,"cached_tokens":0'
        ',"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["1 delta operation(s) were droppe'
        'd; see delta_operations.skipped for what did not make it into the document"]}'
    ),
    'delta-not-applied': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"delta","effective_mode":"delta'
        '","mode_fallback_reason":null,"outcome":"refresh_failed_delta_not_applied","would_persis'
        't":false,"scope":{"tags":null,"tags_match":"any","tag_groups":null,"fact_types":null,"ex'
        'clude_mental_models":false,"exclude_mental_model_ids":["team"]},"window":{"created_after'
        '":"<datetime>","created_before":"<datetime>","watermark":"<datetime>"},"facts":{"retriev'
        'ed":{},"used":{}},"based_on":{},"current_content":"## Team\\n\\nAlice leads the team.\\n\\n|'
        ' who | role |\\n|---|---|\\n| Alice | lead |\\n\\n## Log\\n\\n- started","candidate_content":"'
        '","preview_content":"## Team\\n\\nAlice leads the team.\\n\\n| who | role |\\n|---|---|\\n| Al'
        'ice | lead |\\n\\n## Log\\n\\n- started","diff":"","changes":{"changed":false,"sections":[],'
        '"counts":{"sections_added":0,"sections_removed":0,"sections_changed":0,"blocks_added":0,'
        '"blocks_removed":0,"blocks_changed":0,"lines_added":0,"lines_removed":0},"unified":""},"'
        'delta_operations":{"applied":[],"skipped":[{"index":0,"operation":{"op":"remove_section"'
        ',"section_id":"nope"},"reason":"section_id \'nope\': no such section in the document","att'
        'empt":1},{"index":0,"operation":{"op":"remove_section","section_id":"nope"},"reason":"se'
        'ction_id \'nope\': no such section in the document","attempt":2}]},"retraction":null,"trac'
        'e":{"recorded_at":"<datetime>","effective_mode":"delta","mode_fallback_reason":null,"out'
        'come":"refresh_failed_delta_not_applied","tool_calls":[{"tool":"search_observations","re'
        'ason":null,"input":{"query":"team"},"updated_at":"<datetime>","result_count":0,"duration'
        '_ms":"<ms>","iteration":1,"output":{"observations":[],"count":0}},{"tool":"recall","reas'
        'on":null,"input":{"query":"team"},"updated_at":"<datetime>","result_count":1,"duration_m'
        's":"<ms>","iteration":2,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Bob joi'
        'ned","updated_at":"<datetime>"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_'
        'ms":"<ms>"},{"scope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<'
        'ms>"},{"scope":"delta_1","duration_ms":"<ms>"},{"scope":"delta_2","duration_ms":"<ms>"}]'
        ',"directives":[],"delta_operations":{"applied":[],"skipped":[{"index":0,"reason":"sectio'
        'n_id \'nope\': no such section in the document","attempt":1,"operation":{"op":"remove_sect'
        'ion","section_id":"nope"}},{"index":0,"reason":"section_id \'nope\': no such section in th'
        'e document","attempt":2,"operation":{"op":"remove_section","section_id":"nope"}}]},"retr'
        'action":null,"usage":{"input_tokens":1277,"output_tokens":22,"total_tokens":1299,"cached'
        '_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["every delta operation '
        "was dropped, twice (last: section_id 'nope': no such section in the document); the docum"
        'ent, its structure and the window were left as they are"]},"usage":{"input_tokens":1277,'
        '"output_tokens":22,"total_tokens":1299,"cached_tokens":0,"thoughts_tokens":0},"duration_'
        'ms":"<ms>","warnings":["every delta operation was dropped, twice (last: section_id \'nope'
        "': no such section in the document); the document, its structure and the window were lef"
        't as they are"]}'
    ),
}


@pytest.mark.parametrize("case_id", list(CASES))
def test_dry_run_answers_byte_for_byte(bank: Any, scripted_llm: ScriptedLLMServer,
                                       case_id: str) -> None:
    CASES[case_id](bank, scripted_llm)
    response = APIClient().post(DRY_RUN)
    got = (response.status_code, _normalized(response.content.decode()))
    check_or_capture(case_id, got, EXPECTED)
