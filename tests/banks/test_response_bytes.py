"""The banks API's answers (200s), byte for byte: one literal body per endpoint and variant,
captured from the hand-built dicts the views answered before the response serializers rendered
them (``EDGE_BYTES_CAPTURE``, see ``tests.wirebytes``).

Each body is compared as the raw response text, so the order of keys counts. Values that change
from run to run (date-times, uuids, timings) are replaced by placeholders first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from hindsight.infra.llm.models import LLMRequest
from tests.factories import make_bank, make_memory, make_mental_model, make_operation
from tests.wirebytes import DATETIME, DURATION_MS, check_cases, check_or_capture, j, send

pytestmark = pytest.mark.django_db

B = "/v1/default/banks/bb"
UUID1 = "11111111-1111-1111-1111-111111111111"

_UUID = re.compile(r'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"')
_TIME_SECONDS = re.compile(r'"time_seconds":[0-9.e-]+')


def _normalized(text: str) -> str:
    text = _TIME_SECONDS.sub('"time_seconds":"<s>"', DURATION_MS.sub('"duration_ms":"<ms>"', text))
    return _UUID.sub('"<uuid>"', DATETIME.sub('"<datetime>"', text))


# (id, method, path, body): body None sends none.
CASES: list[tuple[str, str, str, Any]] = [
    ("list-banks", "get", "/v1/default/banks", None),
    ("list-banks-page", "get", "/v1/default/banks?q=b&limit=1&offset=0", None),
    ("list-banks-past-end", "get", "/v1/default/banks?offset=50", None),
    ("get-bank", "get", B, None),
    ("get-bank-bare", "get", "/v1/default/banks/bare", None),
    ("put-bank", "put", B, j({"name": "Renamed", "mission": "m2",
                             "disposition": {"skepticism": 1, "literalism": 2, "empathy": 3}})),
    ("put-new-bank", "put", "/v1/default/banks/fresh", j({})),
    ("patch-bank", "patch", B, j({"name": "Patched"})),
    ("delete-bank", "delete", "/v1/default/banks/bare", None),
    ("get-profile", "get", f"{B}/profile", None),
    ("put-profile", "put", f"{B}/profile",
     j({"disposition": {"skepticism": 5, "literalism": 4, "empathy": 1}})),
    ("get-config", "get", f"{B}/config", None),
    ("get-config-bare", "get", "/v1/default/banks/bare/config", None),
    ("patch-config", "patch", f"{B}/config", j({"updates": {"reflect_mission": "new"}})),
    ("reset-config", "delete", f"{B}/config", None),
    ("stats", "get", f"{B}/stats", None),
    ("stats-bare", "get", "/v1/default/banks/bare/stats?refresh=true", None),
    ("retain-sync", "post", f"{B}/memories",
     j({"items": [{"content": "Carol drinks coffee.", "tags": ["x"]}]})),
    ("retain-async", "post", f"{B}/memories",
     j({"items": [{"content": "Dan runs."}, {"content": "Eve swims."}], "async": True})),
    ("retain-async-id", "post", f"{B}/memories",
     j({"items": [{"content": "Fay reads."}], "async": True, "operation_id": UUID1})),
    ("recall", "post", f"{B}/memories/recall", j({"query": "Alice prefers tea."})),
    ("recall-trace", "post", f"{B}/memories/recall",
     j({"query": "Alice", "trace": True, "types": ["world", "experience"]})),
    ("recall-none", "post", "/v1/default/banks/bare/memories/recall", j({"query": "x"})),
    ("memory-list", "get", f"{B}/memories/list", None),
    ("memory-list-filtered", "get",
     f"{B}/memories/list?type=world&tags=team&limit=1&offset=0&time_field=mentioned_at", None),
    ("memory-list-empty", "get", "/v1/default/banks/bare/memories/list", None),
    ("tags", "get", f"{B}/tags", None),
    ("tags-q", "get", f"{B}/tags?q=t*&limit=1", None),
    ("tags-mental-models", "get", f"{B}/tags?source=mental_models", None),
    ("tags-past-end", "get", f"{B}/tags?offset=100", None),
    ("consolidate", "post", f"{B}/consolidate", None),
    ("consolidate-body", "post", f"{B}/consolidate", j({})),
    ("llm-requests", "get", f"{B}/llm-requests", None),
    ("llm-requests-nothing", "get", f"{B}/llm-requests?call_type=embedding", None),
    ("llm-requests-filtered", "get", f"{B}/llm-requests?status=error&limit=1", None),
    ("llm-stats", "get", f"{B}/llm-requests/stats", None),
    ("llm-stats-other-kind", "get", f"{B}/llm-requests/stats?call_type=rerank&period=1d", None),
]


EXPECTED: dict[str, tuple[int, str]] = {
    'list-banks': (
        200,
        '{"banks":[{"bank_id":"bare","name":"","disposition":{"skepticism":3,"literalism":3,"e'
        'mpathy":3},"mission":"","created_at":"<datetime>","updated_at":"<datetime>","fact_cou'
        'nt":0,"last_document_at":null,"last_write_at":null,"display_alias":null,"matched_alia'
        'ses":[]},{"bank_id":"bb","name":"Bank B","disposition":{"skepticism":3,"literalism":3'
        ',"empathy":3},"mission":"Mission override","created_at":"<datetime>","updated_at":"<d'
        'atetime>","fact_count":2,"last_document_at":"<datetime>","last_write_at":"<datetime>"'
        ',"display_alias":null,"matched_aliases":[]}],"total":2,"limit":100,"offset":0}'
    ),
    'list-banks-page': (
        200,
        '{"banks":[{"bank_id":"bare","name":"","disposition":{"skepticism":3,"literalism":3,"e'
        'mpathy":3},"mission":"","created_at":"<datetime>","updated_at":"<datetime>","fact_cou'
        'nt":0,"last_document_at":null,"last_write_at":null,"display_alias":null,"matched_alia'
        'ses":[]}],"total":2,"limit":1,"offset":0}'
    ),
    'list-banks-past-end': (
        200,
        '{"banks":[],"total":2,"limit":100,"offset":50}'
    ),
    'get-bank': (
        200,
        '{"bank_id":"bb","name":"Bank B","disposition":{"skepticism":3,"literalism":3,"empathy'
        '":3},"mission":"Mission override","background":"Mission override"}'
    ),
    'get-bank-bare': (
        200,
        '{"bank_id":"bare","name":"","disposition":{"skepticism":3,"literalism":3,"empathy":3}'
        ',"mission":"","background":""}'
    ),
    'put-bank': (
        200,
        '{"bank_id":"bb","name":"Renamed","disposition":{"skepticism":1,"literalism":2,"empath'
        'y":3},"mission":"m2","background":"m2"}'
    ),
    'put-new-bank': (
        200,
        '{"bank_id":"fresh","name":"","disposition":{"skepticism":3,"literalism":3,"empathy":3'
        '},"mission":"","background":""}'
    ),
    'patch-bank': (
        200,
        '{"bank_id":"bb","name":"Patched","disposition":{"skepticism":3,"literalism":3,"empath'
        'y":3},"mission":"Mission override","background":"Mission override"}'
    ),
    'delete-bank': (
        200,
        '{"success":true,"message":"Bank \'bare\' deleted","deleted_count":0}'
    ),
    'get-profile': (
        200,
        '{"bank_id":"bb","name":"Bank B","disposition":{"skepticism":3,"literalism":3,"empathy'
        '":3},"mission":"Mission override","background":"Mission override"}'
    ),
    'put-profile': (
        200,
        '{"bank_id":"bb","name":"Bank B","disposition":{"skepticism":5,"literalism":4,"empathy'
        '":1},"mission":"Mission override","background":"Mission override"}'
    ),
    'get-config': (
        200,
        '{"bank_id":"bb","config":{"mental_model_min_refresh_interval_seconds":0,"enable_'
        'observations":true,"enable_auto_consolidation":true,"reflect_mission":"Mission o'
        'verride","retain_mission":null,"retain_extraction_mode":"concise","retain_custom'
        '_instructions":null,"retain_chunk_size":3000,"retain_structured_chunk_size":null'
        ',"retain_max_attachments_per_chunk":null,"observations_mission":null,"enable_tex'
        't_search":true,"enable_temporal_retrieval":true,"enable_graph_retrieval":false,"'
        'enable_reranking":false,"disposition_skepticism":3,"disposition_literalism":3,"d'
        'isposition_empathy":3,"reflect_source_facts_max_tokens":null,"retain_default_str'
        'ategy":null,"retain_strategies":null,"retain_chunk_batch_size":null,"store_docum'
        'ent_text":null,"entity_labels":null,"entities_allow_free_form":null,"max_observa'
        'tions_per_scope":null,"observation_scope_limits":null,"consolidation_strategies"'
        ':null,"default_observation_scopes":null,"consolidation_use_decision_model":null,'
        '"consolidation_llm_parallelism":null,"consolidation_max_memories_per_round":null'
        ',"knowledge_page_default_trigger":null,"reflect_default_options":null,"reflect_u'
        'se_decision_model":null,"mental_model_refresh_use_decision_model":null,"mental_m'
        'odel_delta_use_decision_model":null,"consolidation_llm_batch_size":null,"consoli'
        'dation_source_facts_max_tokens":null,"consolidation_source_facts_max_tokens_per_'
        'observation":null,"recall_max_tokens":null,"recall_include_chunks":null,"recall_'
        'prefer_observations":null,"recall_chunks_max_tokens":null,"recall_budget_functio'
        'n":null,"recall_budget_fixed_low":null,"recall_budget_fixed_mid":null,"recall_bu'
        'dget_fixed_high":null,"recall_budget_adaptive_low":null,"recall_budget_adaptive_'
        'mid":null,"recall_budget_adaptive_high":null,"recall_budget_min":null,"recall_bu'
        'dget_max":null,"mcp_enabled_tools":null,"llm_gemini_safety_settings":null,"memor'
        'y_defense":null,"audit_log_enabled":null,"llm_token_budget_per_day":null,"mental'
        '_model_review":false},"overrides":{"reflect_mission":"Mission override"}}'
    ),
    'get-config-bare': (
        200,
        '{"bank_id":"bare","config":{"mental_model_min_refresh_interval_seconds":0,"enabl'
        'e_observations":true,"enable_auto_consolidation":true,"reflect_mission":null,"re'
        'tain_mission":null,"retain_extraction_mode":"concise","retain_custom_instruction'
        's":null,"retain_chunk_size":3000,"retain_structured_chunk_size":null,"retain_max'
        '_attachments_per_chunk":null,"observations_mission":null,"enable_text_search":tr'
        'ue,"enable_temporal_retrieval":true,"enable_graph_retrieval":false,"enable_reran'
        'king":false,"disposition_skepticism":3,"disposition_literalism":3,"disposition_e'
        'mpathy":3,"reflect_source_facts_max_tokens":null,"retain_default_strategy":null,'
        '"retain_strategies":null,"retain_chunk_batch_size":null,"store_document_text":nu'
        'll,"entity_labels":null,"entities_allow_free_form":null,"max_observations_per_sc'
        'ope":null,"observation_scope_limits":null,"consolidation_strategies":null,"defau'
        'lt_observation_scopes":null,"consolidation_use_decision_model":null,"consolidati'
        'on_llm_parallelism":null,"consolidation_max_memories_per_round":null,"knowledge_'
        'page_default_trigger":null,"reflect_default_options":null,"reflect_use_decision_'
        'model":null,"mental_model_refresh_use_decision_model":null,"mental_model_delta_u'
        'se_decision_model":null,"consolidation_llm_batch_size":null,"consolidation_sourc'
        'e_facts_max_tokens":null,"consolidation_source_facts_max_tokens_per_observation"'
        ':null,"recall_max_tokens":null,"recall_include_chunks":null,"recall_prefer_obser'
        'vations":null,"recall_chunks_max_tokens":null,"recall_budget_function":null,"rec'
        'all_budget_fixed_low":null,"recall_budget_fixed_mid":null,"recall_budget_fixed_h'
        'igh":null,"recall_budget_adaptive_low":null,"recall_budget_adaptive_mid":null,"r'
        'ecall_budget_adaptive_high":null,"recall_budget_min":null,"recall_budget_max":nu'
        'll,"mcp_enabled_tools":null,"llm_gemini_safety_settings":null,"memory_defense":n'
        'ull,"audit_log_enabled":null,"llm_token_budget_per_day":null,"mental_model_revie'
        'w":false},"overrides":{}}'
    ),
    'patch-config': (
        200,
        '{"bank_id":"bb","config":{"mental_model_min_refresh_interval_seconds":0,"enable_'
        'observations":true,"enable_auto_consolidation":true,"reflect_mission":"new","ret'
        'ain_mission":null,"retain_extraction_mode":"concise","retain_custom_instructions'
        '":null,"retain_chunk_size":3000,"retain_structured_chunk_size":null,"retain_max_'
        'attachments_per_chunk":null,"observations_mission":null,"enable_text_search":tru'
        'e,"enable_temporal_retrieval":true,"enable_graph_retrieval":false,"enable_rerank'
        'ing":false,"disposition_skepticism":3,"disposition_literalism":3,"disposition_em'
        'pathy":3,"reflect_source_facts_max_tokens":null,"retain_default_strategy":null,"'
        'retain_strategies":null,"retain_chunk_batch_size":null,"store_document_text":nul'
        'l,"entity_labels":null,"entities_allow_free_form":null,"max_observations_per_sco'
        'pe":null,"observation_scope_limits":null,"consolidation_strategies":null,"defaul'
        't_observation_scopes":null,"consolidation_use_decision_model":null,"consolidatio'
        'n_llm_parallelism":null,"consolidation_max_memories_per_round":null,"knowledge_p'
        'age_default_trigger":null,"reflect_default_options":null,"reflect_use_decision_m'
        'odel":null,"mental_model_refresh_use_decision_model":null,"mental_model_delta_us'
        'e_decision_model":null,"consolidation_llm_batch_size":null,"consolidation_source'
        '_facts_max_tokens":null,"consolidation_source_facts_max_tokens_per_observation":'
        'null,"recall_max_tokens":null,"recall_include_chunks":null,"recall_prefer_observ'
        'ations":null,"recall_chunks_max_tokens":null,"recall_budget_function":null,"reca'
        'll_budget_fixed_low":null,"recall_budget_fixed_mid":null,"recall_budget_fixed_hi'
        'gh":null,"recall_budget_adaptive_low":null,"recall_budget_adaptive_mid":null,"re'
        'call_budget_adaptive_high":null,"recall_budget_min":null,"recall_budget_max":nul'
        'l,"mcp_enabled_tools":null,"llm_gemini_safety_settings":null,"memory_defense":nu'
        'll,"audit_log_enabled":null,"llm_token_budget_per_day":null,"mental_model_review'
        '":false},"overrides":{"reflect_mission":"new"}}'
    ),
    'reset-config': (
        200,
        '{"bank_id":"bb","config":{"mental_model_min_refresh_interval_seconds":0,"enable_'
        'observations":true,"enable_auto_consolidation":true,"reflect_mission":null,"reta'
        'in_mission":null,"retain_extraction_mode":"concise","retain_custom_instructions"'
        ':null,"retain_chunk_size":3000,"retain_structured_chunk_size":null,"retain_max_a'
        'ttachments_per_chunk":null,"observations_mission":null,"enable_text_search":true'
        ',"enable_temporal_retrieval":true,"enable_graph_retrieval":false,"enable_reranki'
        'ng":false,"disposition_skepticism":3,"disposition_literalism":3,"disposition_emp'
        'athy":3,"reflect_source_facts_max_tokens":null,"retain_default_strategy":null,"r'
        'etain_strategies":null,"retain_chunk_batch_size":null,"store_document_text":null'
        ',"entity_labels":null,"entities_allow_free_form":null,"max_observations_per_scop'
        'e":null,"observation_scope_limits":null,"consolidation_strategies":null,"default'
        '_observation_scopes":null,"consolidation_use_decision_model":null,"consolidation'
        '_llm_parallelism":null,"consolidation_max_memories_per_round":null,"knowledge_pa'
        'ge_default_trigger":null,"reflect_default_options":null,"reflect_use_decision_mo'
        'del":null,"mental_model_refresh_use_decision_model":null,"mental_model_delta_use'
        '_decision_model":null,"consolidation_llm_batch_size":null,"consolidation_source_'
        'facts_max_tokens":null,"consolidation_source_facts_max_tokens_per_observation":n'
        'ull,"recall_max_tokens":null,"recall_include_chunks":null,"recall_prefer_observa'
        'tions":null,"recall_chunks_max_tokens":null,"recall_budget_function":null,"recal'
        'l_budget_fixed_low":null,"recall_budget_fixed_mid":null,"recall_budget_fixed_hig'
        'h":null,"recall_budget_adaptive_low":null,"recall_budget_adaptive_mid":null,"rec'
        'all_budget_adaptive_high":null,"recall_budget_min":null,"recall_budget_max":null'
        ',"mcp_enabled_tools":null,"llm_gemini_safety_settings":null,"memory_defense":nul'
        'l,"audit_log_enabled":null,"llm_token_budget_per_day":null,"mental_model_review"'
        ':false},"overrides":{}}'
    ),
    'stats': (
        200,
        '{"bank_id":"bb","total_nodes":3,"total_links":0,"total_documents":1,"nodes_by_fact_ty'
        'pe":{"experience":1,"observation":1,"world":1},"links_by_link_type":{},"links_by_fact'
        '_type":{},"links_breakdown":{},"pending_operations":0,"failed_operations":1,"operatio'
        'ns_by_status":{"pending":0,"processing":0,"completed":0,"failed":1,"cancelled":0},"la'
        'st_consolidated_at":null,"last_memory_write_at":"<datetime>","pending_consolidation":'
        '2,"failed_consolidation":0,"total_observations":1,"llm_tokens_last_24h":0,"llm_token_'
        'budget_per_day":null}'
    ),
    'stats-bare': (
        200,
        '{"bank_id":"bare","total_nodes":0,"total_links":0,"total_documents":0,"nodes_by_fact_'
        'type":{},"links_by_link_type":{},"links_by_fact_type":{},"links_breakdown":{},"pendin'
        'g_operations":0,"failed_operations":0,"operations_by_status":{"pending":0,"processing'
        '":0,"completed":0,"failed":0,"cancelled":0},"last_consolidated_at":null,"last_memory_'
        'write_at":null,"pending_consolidation":0,"failed_consolidation":0,"total_observations'
        '":0,"llm_tokens_last_24h":0,"llm_token_budget_per_day":null}'
    ),
    'retain-sync': (
        200,
        '{"success":true,"bank_id":"bb","items_count":1,"async":false,"operation_id":null,"ope'
        'ration_ids":null,"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cached'
        '_tokens":0,"thoughts_tokens":0}}'
    ),
    'retain-async': (
        200,
        '{"success":true,"bank_id":"bb","items_count":2,"async":true,"operation_id":"<uuid>","'
        'operation_ids":["<uuid>"],"usage":null}'
    ),
    'retain-async-id': (
        200,
        '{"success":true,"bank_id":"bb","items_count":1,"async":true,"operation_id":"<uuid>","'
        'operation_ids":["<uuid>"],"usage":null}'
    ),
    'recall': (
        200,
        '{"results":[{"id":"<uuid>","text":"Alice prefers tea.","type":"world","entities":["Al'
        'ice"],"context":"chat","occurred_start":"<datetime>","occurred_end":"<datetime>","men'
        'tioned_at":"<datetime>","document_id":"d1","metadata":{"k":"v"},"chunk_id":null,"tags'
        '":["team","tea"],"source_fact_ids":null,"scores":{"final":0.03278688524590164,"rerank'
        'er":null,"semantic":1.0,"keyword":0.3}},{"id":"<uuid>","text":"Alice and Bob like tea'
        '.","type":"observation","entities":null,"context":null,"occurred_start":null,"occurre'
        'd_end":null,"mentioned_at":null,"document_id":null,"metadata":null,"chunk_id":null,"t'
        'ags":["tea"],"source_fact_ids":["<uuid>"],"scores":{"final":0.03225806451612903,"rera'
        'nker":null,"semantic":0.8186763525009155,"keyword":0.2}},{"id":"<uuid>","text":"Bob l'
        'ikes tea too.","type":"experience","entities":null,"context":null,"occurred_start":nu'
        'll,"occurred_end":null,"mentioned_at":null,"document_id":null,"metadata":null,"chunk_'
        'id":null,"tags":["team"],"source_fact_ids":null,"scores":{"final":0.03174603174603174'
        '4,"reranker":null,"semantic":0.6671122908592224,"keyword":0.1}}],"trace":null,"entiti'
        'es":null,"chunks":null,"source_facts":null,"source_facts_truncated":null}'
    ),
    'recall-trace': (
        200,
        '{"results":[{"id":"<uuid>","text":"Alice prefers tea.","type":"world","entities":["Al'
        'ice"],"context":"chat","occurred_start":"<datetime>","occurred_end":"<datetime>","men'
        'tioned_at":"<datetime>","document_id":"d1","metadata":{"k":"v"},"chunk_id":null,"tags'
        '":["team","tea"],"source_fact_ids":null,"scores":{"final":0.03278688524590164,"rerank'
        'er":null,"semantic":0.6231391058481284,"keyword":0.1}},{"id":"<uuid>","text":"Bob lik'
        'es tea too.","type":"experience","entities":null,"context":null,"occurred_start":null'
        ',"occurred_end":null,"mentioned_at":null,"document_id":null,"metadata":null,"chunk_id'
        '":null,"tags":["team"],"source_fact_ids":null,"scores":{"final":0.016129032258064516,'
        '"reranker":null,"semantic":0.25857160934379086,"keyword":null}}],"trace":{"query":"Al'
        'ice","num_results":2,"time_seconds":"<s>","total_tokens":9,"max_tokens":4096,"arms":{'
        '"<uuid>":["keyword","semantic"],"<uuid>":["semantic"]}},"entities":null,"chunks":null'
        ',"source_facts":null,"source_facts_truncated":null}'
    ),
    'recall-none': (
        200,
        '{"results":[],"trace":null,"entities":null,"chunks":null,"source_facts":null,"source_'
        'facts_truncated":null}'
    ),
    'memory-list': (
        200,
        '{"items":[{"id":"<uuid>","text":"Alice and Bob like tea.","context":"","date":"","fac'
        't_type":"observation","document_id":null,"mentioned_at":null,"occurred_start":null,"o'
        'ccurred_end":null,"entities":"","chunk_id":null,"proof_count":1,"tags":["tea"],"metad'
        'ata":{},"consolidated_at":null,"consolidation_failed_at":null,"state":"valid","invali'
        'dation_reason":null,"invalidated_at":null,"edited_at":null,"updated_at":"<datetime>",'
        '"source_memory_ids":["<uuid>"]},{"id":"<uuid>","text":"Bob likes tea too.","context":'
        '"","date":"","fact_type":"experience","document_id":null,"mentioned_at":null,"occurre'
        'd_start":null,"occurred_end":null,"entities":"","chunk_id":null,"proof_count":1,"tags'
        '":["team"],"metadata":{},"consolidated_at":null,"consolidation_failed_at":null,"state'
        '":"valid","invalidation_reason":null,"invalidated_at":null,"edited_at":null,"updated_'
        'at":"<datetime>","source_memory_ids":[]},{"id":"<uuid>","text":"Alice prefers tea.","'
        'context":"chat","date":"<datetime>","fact_type":"world","document_id":"d1","mentioned'
        '_at":"<datetime>","occurred_start":"<datetime>","occurred_end":"<datetime>","entities'
        '":"Alice","chunk_id":null,"proof_count":1,"tags":["team","tea"],"metadata":{"k":"v"},'
        '"consolidated_at":null,"consolidation_failed_at":null,"state":"valid","invalidation_r'
        'eason":null,"invalidated_at":null,"edited_at":null,"updated_at":"<datetime>","source_'
        'memory_ids":[]}],"total":3,"limit":100,"offset":0}'
    ),
    'memory-list-filtered': (
        200,
        '{"items":[{"id":"<uuid>","text":"Alice prefers tea.","context":"chat","date":"<dateti'
        'me>","fact_type":"world","document_id":"d1","mentioned_at":"<datetime>","occurred_sta'
        'rt":"<datetime>","occurred_end":"<datetime>","entities":"Alice","chunk_id":null,"proo'
        'f_count":1,"tags":["team","tea"],"metadata":{"k":"v"},"consolidated_at":null,"consoli'
        'dation_failed_at":null,"state":"valid","invalidation_reason":null,"invalidated_at":nu'
        'll,"edited_at":null,"updated_at":"<datetime>","source_memory_ids":[]}],"total":1,"lim'
        'it":1,"offset":0}'
    ),
    'memory-list-empty': (
        200,
        '{"items":[],"total":0,"limit":100,"offset":0}'
    ),
    'tags': (
        200,
        '{"items":[{"tag":"tea","count":2},{"tag":"team","count":2}],"total":2,"limit":100,"of'
        'fset":0}'
    ),
    'tags-q': (
        200,
        '{"items":[{"tag":"tea","count":2}],"total":2,"limit":1,"offset":0}'
    ),
    'tags-mental-models': (
        200,
        '{"items":[{"tag":"mm-tag","count":1}],"total":1,"limit":100,"offset":0}'
    ),
    'tags-past-end': (
        200,
        '{"items":[],"total":2,"limit":100,"offset":100}'
    ),
    'consolidate': (
        200,
        '{"operation_id":"<uuid>","deduplicated":false}'
    ),
    'consolidate-body': (
        200,
        '{"operation_id":"<uuid>","deduplicated":false}'
    ),
    'llm-requests': (
        200,
        '{"bank_id":"bb","total":2,"limit":50,"offset":0,"items":[{"id":"<uuid>","bank_id":"bb'
        '","operation":"consolidation","scope":null,"trace_id":null,"span_id":"<uuid>","parent'
        '_span_id":null,"provider":"openai","model":null,"status":"error","started_at":"<datet'
        'ime>","ended_at":"<datetime>","duration_ms":"<ms>","input_tokens":0,"output_tokens":0'
        ',"cached_tokens":0,"thoughts_tokens":null,"total_tokens":0,"input":"{\\"cut","output":'
        'null,"error":"boom","llm_info":{"kind":"structured","attempt":2},"metadata":{"truncat'
        'ed":true}},{"id":"<uuid>","bank_id":"bb","operation":"retain","scope":"extract","trac'
        'e_id":"<uuid>","span_id":"<uuid>","parent_span_id":null,"provider":"openai","model":"'
        'gpt-x","status":"success","started_at":"<datetime>","ended_at":"<datetime>","duration'
        '_ms":"<ms>","input_tokens":3,"output_tokens":4,"cached_tokens":0,"thoughts_tokens":nu'
        'll,"total_tokens":7,"input":{"a":1},"output":"plain text","error":null,"llm_info":{"k'
        'ind":"chat","attempt":1},"metadata":{"truncated":false}}]}'
    ),
    'llm-requests-nothing': (
        200,
        '{"bank_id":"bb","total":0,"limit":50,"offset":0,"items":[]}'
    ),
    'llm-requests-filtered': (
        200,
        '{"bank_id":"bb","total":1,"limit":1,"offset":0,"items":[{"id":"<uuid>","bank_id":"bb"'
        ',"operation":"consolidation","scope":null,"trace_id":null,"span_id":"<uuid>","parent_'
        'span_id":null,"provider":"openai","model":null,"status":"error","started_at":"<dateti'
        'me>","ended_at":"<datetime>","duration_ms":"<ms>","input_tokens":0,"output_tokens":0,'
        '"cached_tokens":0,"thoughts_tokens":null,"total_tokens":0,"input":"{\\"cut","output":n'
        'ull,"error":"boom","llm_info":{"kind":"structured","attempt":2},"metadata":{"truncate'
        'd":true}}]}'
    ),
    'llm-stats': (
        200,
        '{"bank_id":"bb","period":"7d","trunc":"day","start":"<datetime>","buckets":[{"time":"'
        '<datetime>","statuses":{"error":1},"total":1,"tokens":{"input":0,"output":0,"cached":'
        '0,"thoughts":null,"total":0}}]}'
    ),
    'llm-stats-other-kind': (
        200,
        '{"bank_id":"bb","period":"1d","trunc":"hour","start":"<datetime>","buckets":[]}'
    ),
}


def test_every_case_has_an_expectation() -> None:
    check_cases(CASES, EXPECTED)


@pytest.mark.parametrize(("case_id", "method", "path", "body"), CASES,
                         ids=[case[0] for case in CASES])
def test_banks_answers_byte_for_byte(case_id: str, method: str, path: str, body: Any,
                                     request: pytest.FixtureRequest) -> None:
    if case_id.startswith("consolidate"):
        request.getfixturevalue("scripted_llm")  # consolidation needs an LLM configured
    make_bank("bb", name="Bank B", mission="Remember things.",
              config={"reflect_mission": "Mission override"})
    make_bank("bare")
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    make_memory("bb", "Alice prefers tea.", tags=["team", "tea"], context="chat", embed=True,
                document_id="d1", metadata={"k": "v"}, entities=["Alice"],
                mentioned_at=when, occurred_start=when, occurred_end=when)
    make_memory("bb", "Bob likes tea too.", tags=["team"], embed=True, fact_type="experience")
    make_memory("bb", "Alice and Bob like tea.", fact_type="observation", embed=True,
                tags=["tea"], source_memory_ids=[UUID1])
    make_mental_model("bb", "m1", name="One", source_query="q", tags=["mm-tag"])
    make_operation(bank_id="bb", status="failed")
    LLMRequest.objects.create(bank_id="bb", operation="retain", operation_id=UUID1,
                              scope="extract", model="gpt-x", status="success", started_at=when,
                              ended_at=when, duration_ms=12, input_tokens=3, output_tokens=4,
                              prompt='{"a": 1}', response="plain text")
    LLMRequest.objects.create(bank_id="bb", operation="consolidation", status="error",
                              started_at=datetime.now(UTC), error="boom", truncated=True,
                              prompt='{"cut', kind="structured", attempt=2)
    api = APIClient(raise_request_exception=False)
    response = send(api, method, path, body)
    got = (response.status_code, _normalized(response.content.decode()))
    check_or_capture(case_id, got, EXPECTED)
