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
        '{"mental_model_id":"team","name":"Team","requested_mode":"full","effective_mode":"full'
        '","mode_fallback_reason":null,"outcome":"content_written","would_persist":true,"scope"'
        ':{"tags":null,"tags_match":"any","tag_groups":null,"fact_types":null,"exclude_mental_m'
        'odels":false,"exclude_mental_model_ids":["team"]},"window":{"created_after":null,"crea'
        'ted_before":"<datetime>","watermark":"<datetime>"},"facts":{"retrieved":{"world":1},"u'
        'sed":{"world":1}},"based_on":{"world":[{"id":"<uuid>","text":"Alice prefers async","ty'
        'pe":"world","context":null,"tags":[],"occurred_start":null,"occurred_end":null,"mentio'
        'ned_at":null,"updated_at":"<datetime>","document_id":null}]},"current_content":"old li'
        'ne\\n","candidate_content":"new line","preview_content":"new line","diff":"--- current\\'
        'n+++ preview\\n@@ -1 +1 @@\\n-old line\\n+new line","delta_operations":null,"retraction":'
        'null,"trace":{"recorded_at":"<datetime>","effective_mode":"full","mode_fallback_reason'
        '":null,"outcome":"content_written","tool_calls":[{"tool":"search_observations","reason'
        '":null,"input":{"query":"team"},"updated_at":null,"result_count":0,"duration_ms":"<ms>'
        '","iteration":1,"output":{"observations":[],"count":0}},{"tool":"recall","reason":null'
        ',"input":{"query":"team"},"updated_at":null,"result_count":1,"duration_ms":"<ms>","ite'
        'ration":2,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Alice prefers async'
        '","updated_at":"<datetime>"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_m'
        's":"<ms>"},{"scope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":"'
        '<ms>"}],"directives":[],"delta_operations":null,"retraction":null,"usage":{"input_toke'
        'ns":492,"output_tokens":11,"total_tokens":503,"cached_tokens":0,"thoughts_tokens":0},"'
        'duration_ms":"<ms>","warnings":[]},"usage":{"input_tokens":492,"output_tokens":11,"tot'
        'al_tokens":503,"cached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":'
        '[]}'
    ),
    'full-scoped-nothing-new': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"full","effective_mode":"full'
        '","mode_fallback_reason":null,"outcome":"content_preserved_no_new_facts","would_persis'
        't":false,"scope":{"tags":["team"],"tags_match":"all","tag_groups":null,"fact_types":["'
        'world","experience"],"exclude_mental_models":false,"exclude_mental_model_ids":["other"'
        ',"team"]},"window":{"created_after":null,"created_before":"<datetime>","watermark":"<d'
        'atetime>"},"facts":{"retrieved":{"world":1},"used":{}},"based_on":{},"current_content"'
        ':"kept\\n","candidate_content":"nothing on that","preview_content":"kept\\n","diff":"","'
        'delta_operations":null,"retraction":null,"trace":{"recorded_at":"<datetime>","effectiv'
        'e_mode":"full","mode_fallback_reason":null,"outcome":"content_preserved_no_new_facts",'
        '"tool_calls":[{"tool":"recall","reason":null,"input":{"query":"team"},"updated_at":nul'
        'l,"result_count":1,"duration_ms":"<ms>","iteration":1,"output":{"facts":[{"id":"<uuid>'
        '","type":"world","text":"Alice prefers async","tags":["team"],"updated_at":"<datetime>'
        '"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"scope":"agent'
        '_2","duration_ms":"<ms>"}],"directives":[],"delta_operations":null,"retraction":null,"'
        'usage":{"input_tokens":329,"output_tokens":10,"total_tokens":339,"cached_tokens":0,"th'
        'oughts_tokens":0},"duration_ms":"<ms>","warnings":["The reflect loop answered without '
        'citing any memory or mental model, so the document was left as it is and only the wate'
        'rmark advanced."]},"usage":{"input_tokens":329,"output_tokens":10,"total_tokens":339,"'
        'cached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["The reflect lo'
        'op answered without citing any memory or mental model, so the document was left as it '
        'is and only the watermark advanced."]}'
    ),
    'delta-applied-and-skipped': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"delta","effective_mode":"del'
        'ta","mode_fallback_reason":null,"outcome":"content_written","would_persist":true,"scop'
        'e":{"tags":null,"tags_match":"any","tag_groups":null,"fact_types":null,"exclude_mental'
        '_models":false,"exclude_mental_model_ids":["team"]},"window":{"created_after":"<dateti'
        'me>","created_before":"<datetime>","watermark":"<datetime>"},"facts":{"retrieved":{"wo'
        'rld":1},"used":{"world":1}},"based_on":{"world":[{"id":"<uuid>","tags":[],"text":"Alic'
        'e leads the team","type":"world","context":null,"updated_at":"<datetime>","document_id'
        '":null,"mentioned_at":null,"occurred_end":null,"occurred_start":null},{"id":"<uuid>","'
        'text":"Bob joined","type":"world","context":null,"tags":[],"occurred_start":null,"occu'
        'rred_end":null,"mentioned_at":null,"updated_at":"<datetime>","document_id":null}]},"cu'
        'rrent_content":"## Team\\n\\nAlice leads the team.\\n\\n| who | role |\\n|---|---|\\n| Alice'
        ' | lead |\\n\\n## Log\\n\\n- started","candidate_content":"## Notes\\n\\nnew facts","preview'
        '_content":"## Team\\n\\nAlice leads the team.\\n\\n| who | role |\\n|---|---|\\n| Alice | le'
        'ad |\\n\\n## Log\\n\\n- started\\n\\n- Bob joined","diff":"--- current\\n+++ preview\\n@@ -8,4'
        ' +8,6 @@\\n \\n ## Log\\n \\n-- started+- started\\n+\\n+- Bob joined","delta_operations":{"'
        'applied":[{"index":0,"operation":{"op":"append_block","section_id":"log","markdown":"-'
        ' Bob joined"},"attempt":1}],"skipped":[{"index":1,"operation":{"op":"remove_block","se'
        'ction_id":"log","block_id":"b-nope"},"reason":"block_id \'b-nope\': no such block in the'
        ' document","attempt":1}]},"retraction":null,"trace":{"recorded_at":"<datetime>","effec'
        'tive_mode":"delta","mode_fallback_reason":null,"outcome":"content_written","tool_calls'
        '":[{"tool":"search_observations","reason":null,"input":{"query":"team"},"updated_at":"'
        '<datetime>","result_count":0,"duration_ms":"<ms>","iteration":1,"output":{"observation'
        's":[],"count":0}},{"tool":"recall","reason":null,"input":{"query":"team"},"updated_at"'
        ':"<datetime>","result_count":1,"duration_ms":"<ms>","iteration":2,"output":{"facts":[{'
        '"id":"<uuid>","type":"world","text":"Bob joined","updated_at":"<datetime>"}],"count":1'
        '}}],"llm_calls":[{"scope":"agent_1","duration_ms":"<ms>"},{"scope":"agent_2","duration'
        '_ms":"<ms>"},{"scope":"agent_3","duration_ms":"<ms>"},{"scope":"delta_1","duration_ms"'
        ':"<ms>"}],"directives":[],"delta_operations":{"applied":[{"index":0,"attempt":1,"opera'
        'tion":{"op":"append_block","section_id":"log","markdown":"- Bob joined"}}],"skipped":['
        '{"index":1,"reason":"block_id \'b-nope\': no such block in the document","attempt":1,"op'
        'eration":{"op":"remove_block","section_id":"log","block_id":"b-nope"}}]},"retraction":'
        'null,"usage":{"input_tokens":846,"output_tokens":27,"total_tokens":873,"cached_tokens"'
        ':0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["1 delta operation(s) were dr'
        'opped; see delta_operations.skipped for what did not make it into the document"]},"usa'
        'ge":{"input_tokens":846,"output_tokens":27,"total_tokens":873,"cached_tokens":0,"thoug'
        'hts_tokens":0},"duration_ms":"<ms>","warnings":["1 delta operation(s) were dropped; se'
        'e delta_operations.skipped for what did not make it into the document"]}'
    ),
    'delta-not-applied': (
        200,
        '{"mental_model_id":"team","name":"Team","requested_mode":"delta","effective_mode":"del'
        'ta","mode_fallback_reason":null,"outcome":"refresh_failed_delta_not_applied","would_pe'
        'rsist":false,"scope":{"tags":null,"tags_match":"any","tag_groups":null,"fact_types":nu'
        'll,"exclude_mental_models":false,"exclude_mental_model_ids":["team"]},"window":{"creat'
        'ed_after":"<datetime>","created_before":"<datetime>","watermark":"<datetime>"},"facts"'
        ':{"retrieved":{},"used":{}},"based_on":{},"current_content":"## Team\\n\\nAlice leads th'
        'e team.\\n\\n| who | role |\\n|---|---|\\n| Alice | lead |\\n\\n## Log\\n\\n- started","candid'
        'ate_content":"","preview_content":"## Team\\n\\nAlice leads the team.\\n\\n| who | role |\\'
        'n|---|---|\\n| Alice | lead |\\n\\n## Log\\n\\n- started","diff":"","delta_operations":{"ap'
        'plied":[],"skipped":[{"index":0,"operation":{"op":"remove_section","section_id":"nope"'
        '},"reason":"section_id \'nope\': no such section in the document","attempt":1},{"index":'
        '0,"operation":{"op":"remove_section","section_id":"nope"},"reason":"section_id \'nope\':'
        ' no such section in the document","attempt":2}]},"retraction":null,"trace":{"recorded_'
        'at":"<datetime>","effective_mode":"delta","mode_fallback_reason":null,"outcome":"refre'
        'sh_failed_delta_not_applied","tool_calls":[{"tool":"search_observations","reason":null'
        ',"input":{"query":"team"},"updated_at":"<datetime>","result_count":0,"duration_ms":"<m'
        's>","iteration":1,"output":{"observations":[],"count":0}},{"tool":"recall","reason":nu'
        'll,"input":{"query":"team"},"updated_at":"<datetime>","result_count":1,"duration_ms":"'
        '<ms>","iteration":2,"output":{"facts":[{"id":"<uuid>","type":"world","text":"Bob joine'
        'd","updated_at":"<datetime>"}],"count":1}}],"llm_calls":[{"scope":"agent_1","duration_'
        'ms":"<ms>"},{"scope":"agent_2","duration_ms":"<ms>"},{"scope":"agent_3","duration_ms":'
        '"<ms>"},{"scope":"delta_1","duration_ms":"<ms>"},{"scope":"delta_2","duration_ms":"<ms'
        '>"}],"directives":[],"delta_operations":{"applied":[],"skipped":[{"index":0,"reason":"'
        'section_id \'nope\': no such section in the document","attempt":1,"operation":{"op":"rem'
        'ove_section","section_id":"nope"}},{"index":0,"reason":"section_id \'nope\': no such sec'
        'tion in the document","attempt":2,"operation":{"op":"remove_section","section_id":"nop'
        'e"}}]},"retraction":null,"usage":{"input_tokens":1277,"output_tokens":22,"total_tokens'
        '":1299,"cached_tokens":0,"thoughts_tokens":0},"duration_ms":"<ms>","warnings":["every '
        "delta operation was dropped, twice (last: section_id 'nope': no such section in the do"
        'cument); the document, its structure and the window were left as they are"]},"usage":{'
        '"input_tokens":1277,"output_tokens":22,"total_tokens":1299,"cached_tokens":0,"thoughts'
        '_tokens":0},"duration_ms":"<ms>","warnings":["every delta operation was dropped, twice'
        " (last: section_id 'nope': no such section in the document); the document, its structu"
        're and the window were left as they are"]}'
    ),
}


@pytest.mark.parametrize("case_id", list(CASES))
def test_dry_run_answers_byte_for_byte(bank: Any, scripted_llm: ScriptedLLMServer,
                                       case_id: str) -> None:
    CASES[case_id](bank, scripted_llm)
    response = APIClient().post(DRY_RUN)
    got = (response.status_code, _normalized(response.content.decode()))
    check_or_capture(case_id, got, EXPECTED)
