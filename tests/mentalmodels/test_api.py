"""The mental-models HTTP API: paths, defaults, detail levels, ordering, validation (SPEC 2)."""

from __future__ import annotations

import re
from datetime import UTC

import pytest

from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.triggers import TRIGGER_DEFAULTS
from operations.models import Operation
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks/{bank}/mental-models"
WIRE_KEYS = [
    "id", "bank_id", "name", "source_query", "content", "tags", "max_tokens", "trigger",
    "last_refreshed_at", "last_memory_seen_at", "last_refresh_failed_at",
    "last_full_refreshed_at", "created_at", "is_knowledge_page", "reflect_response", "is_stale",
]


def url(bank: str = "mm-bank", *parts: str) -> str:
    return "/".join([BASE.format(bank=bank), *parts])


def create(api, bank="mm-bank", **body):
    body.setdefault("name", "Team")
    body.setdefault("source_query", "How does the team work?")
    return api.post(url(bank), body, format="json")


def locs(response) -> list[list]:
    return [e["loc"] for e in response.json()["detail"]]


def test_create_returns_ids_and_row_exists_at_once_with_empty_content(api, db):
    response = create(api, bank="fresh-bank", id="team-comms", tags=["team"])
    assert response.status_code == 200
    body = response.json()
    assert body["mental_model_id"] == "team-comms"
    operation = Operation.objects.get(id=body["operation_id"])
    assert operation.operation_type == "refresh_mental_model"
    assert operation.dedupe_key == "mm:fresh-bank:team-comms"
    assert operation.mental_model_id == "team-comms"
    assert operation.status == "pending"
    model = MentalModel.objects.get(bank_id="fresh-bank", mental_model_id="team-comms")
    assert model.content == "" and model.tags == ["team"] and model.max_tokens == 2048
    assert model.trigger == TRIGGER_DEFAULTS


def test_create_without_id_generates_mm_hex(api, bank):
    response = create(api)
    assert response.status_code == 200
    assert re.fullmatch(r"mm-[0-9a-f]{32}", response.json()["mental_model_id"])


def test_create_accepts_explicit_nulls_the_client_sends(api, bank):
    # A null is "not given": the defaults, exactly as if the keys were left out.
    response = create(api, id=None, tags=None, max_tokens=None, trigger=None)
    assert response.status_code == 200, response.content
    body = response.json()
    assert re.fullmatch(r"mm-[0-9a-f]{32}", body["mental_model_id"])
    operation = Operation.objects.get(id=body["operation_id"])
    assert operation.mental_model_id == body["mental_model_id"]
    model = MentalModel.objects.get(bank_id="mm-bank", mental_model_id=body["mental_model_id"])
    assert model.tags == [] and model.max_tokens == 2048 and model.trigger == TRIGGER_DEFAULTS


@pytest.mark.parametrize("bad_id", ["Bad ID!", "-leading", "x" * 65, "UPPER", "", 12])
def test_create_rejects_ids_breaking_the_rule_with_422_naming_id(api, bank, bad_id):
    response = create(api, id=bad_id)
    assert response.status_code == 422
    assert locs(response) == [["body", "id"]]
    assert MentalModel.objects.count() == 0


def test_duplicate_id_is_409_with_upstream_message(api, bank):
    assert create(api, id="team-comms").status_code == 200
    response = create(api, id="team-comms")
    assert response.status_code == 409
    assert response.json() == {"detail": "Mental model 'team-comms' already exists in bank 'mm-bank'"}
    assert Operation.objects.count() == 1


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"name": None}, ["body", "name"]),
        ({"source_query": "  "}, ["body", "source_query"]),
        ({"max_tokens": 10}, ["body", "max_tokens"]),
        ({"max_tokens": 9000}, ["body", "max_tokens"]),
        ({"max_tokens": "big"}, ["body", "max_tokens"]),
        ({"tags": "team"}, ["body", "tags"]),
        ({"bogus": 1}, ["body", "bogus"]),
        ({"trigger": {"refersh_cron": "0 3 * * *"}}, ["body", "trigger", "refersh_cron"]),
        ({"trigger": {"refresh_cron": "not a cron"}}, ["body", "trigger", "refresh_cron"]),
        ({"trigger": {"refresh_cron": "0 3 * * * *"}}, ["body", "trigger", "refresh_cron"]),
        ({"trigger": {"full_refresh_cron": "61 * * * *"}}, ["body", "trigger", "full_refresh_cron"]),
        ({"trigger": {"refresh_cron": "0 3 * * *", "refresh_after_consolidation": True}},
         ["body", "trigger", "refresh_cron"]),
        ({"trigger": {"fact_types": []}}, ["body", "trigger", "fact_types"]),
        ({"trigger": {"fact_types": ["opinion"]}}, ["body", "trigger", "fact_types", 0]),
        ({"trigger": {"mode": "partial"}}, ["body", "trigger", "mode"]),
        ({"trigger": {"tags_match": "some"}}, ["body", "trigger", "tags_match"]),
        ({"trigger": {"tag_groups": [{"tags": ["a"], "match": "nope"}]}},
         ["body", "trigger", "tag_groups", 0, "match"]),
        ({"trigger": {"min_refresh_interval_seconds": -1}},
         ["body", "trigger", "min_refresh_interval_seconds"]),
        ({"trigger": {"keep_trace": "yes"}}, ["body", "trigger", "keep_trace"]),
        ({"trigger": {"response_schema": {"type": "object"}}}, ["body", "trigger", "response_schema"]),
        ({"trigger": {"response_schema": {"type": "array", "items": {"type": "string"}}}},
         ["body", "trigger", "response_schema"]),
        ({"trigger": {"response_schema": {"properties": {"x": {"type": "date"}}}}},
         ["body", "trigger", "response_schema", "properties", "x"]),
        ({"trigger": {"response_schema": {"properties": {"x": {"type": "string"}},
                                          "required": ["y"]}}},
         ["body", "trigger", "response_schema", "required"]),
        ({"trigger": {"response_schema": {"properties": {
            "o": {"type": "object", "properties": {"deep": {"type": "when"}}}}}}},
         ["body", "trigger", "response_schema", "properties", "o", "properties", "deep"]),
    ],
)
def test_create_validation_is_422_naming_the_field_and_changes_nothing(api, bank, body, loc):
    response = create(api, **body)
    assert response.status_code == 422, response.json()
    assert loc in locs(response)
    assert all(e["msg"] for e in response.json()["detail"])
    assert MentalModel.objects.count() == 0 and Operation.objects.count() == 0


def test_response_schema_messages_match_upstream(api, bank):
    response = create(api, trigger={"response_schema": {"type": "object"}})
    assert response.json()["detail"][0]["msg"] == (
        "response_schema must define a non-empty 'properties' object"
    )


def test_valid_trigger_is_stored_normalised_with_every_key(api, bank):
    schema = {"type": "object", "properties": {
        "risk": {"type": "string"},
        "questions": {"type": "array", "items": {"type": "string"}},
        "owner": {"type": "object", "properties": {"name": {"type": "string"}}},
    }, "required": ["risk"]}
    response = create(api, id="t", trigger={
        "refresh_cron": "0 3 * * *", "fact_types": ["world", "observation"],
        "tags_match": "any", "response_schema": schema, "keep_trace": True,
        "tag_groups": [{"or": [{"tags": ["a"]}, {"not": {"tags": ["b"], "match": "all_strict"}}]}],
    })
    assert response.status_code == 200, response.json()
    trigger = api.get(url("mm-bank", "t")).json()["trigger"]
    assert list(trigger) == list(TRIGGER_DEFAULTS)
    assert trigger["refresh_cron"] == "0 3 * * *"
    assert trigger["response_schema"] == schema
    assert trigger["mode"] == "full" and trigger["refresh_after_consolidation"] is False


def test_get_defaults_to_full_and_every_key_is_present(api, bank):
    make_mental_model(bank, "team", content="doc", reflect_response={"text": "doc", "outcome": "content_written"})
    body = api.get(url("mm-bank", "team")).json()
    assert list(body) == WIRE_KEYS
    assert body["content"] == "doc" and body["reflect_response"]["text"] == "doc"
    assert body["is_knowledge_page"] is False and body["is_stale"] is False


@pytest.mark.parametrize("detail", ["metadata", "content", "full"])
def test_detail_levels_null_what_they_leave_out_and_always_compute_is_stale(api, bank, detail):
    make_memory(bank, "a fact")
    make_mental_model(bank, "team", content="doc", reflect_response={"text": "doc"})
    body = api.get(url("mm-bank", "team") + f"?detail={detail}").json()
    assert list(body) == WIRE_KEYS
    assert body["is_stale"] is True  # null watermark, a memory in scope
    assert (body["source_query"] is None) == (detail == "metadata")
    assert (body["content"] is None) == (detail == "metadata")
    assert (body["max_tokens"] is None) == (detail == "metadata")
    assert (body["trigger"] is None) == (detail == "metadata")
    assert (body["reflect_response"] is None) == (detail != "full")
    listed = api.get(url() + f"?detail={detail}").json()["items"][0]
    assert listed == body


def test_bad_detail_is_422_on_query(api, bank):
    make_mental_model(bank, "team")
    response = api.get(url("mm-bank", "team") + "?detail=bogus")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "detail"]
    assert response.json()["detail"][0]["msg"] == "Input should be 'metadata', 'content' or 'full'"


def test_list_defaults_metadata_limit_100_and_orders_by_last_refreshed_then_id(api, bank):
    from datetime import datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    make_mental_model(bank, "a", last_refreshed_at=t0)
    make_mental_model(bank, "b", last_refreshed_at=t0 + timedelta(hours=1))
    make_mental_model(bank, "c", last_refreshed_at=t0)
    make_mental_model(bank, "never")
    body = api.get(url()).json()
    assert body["limit"] == 100 and body["offset"] == 0 and body["total"] == 4
    assert [i["id"] for i in body["items"]] == ["never", "b", "c", "a"]
    assert all(i["content"] is None and i["source_query"] is None for i in body["items"])
    page = api.get(url() + "?limit=2&offset=1").json()
    assert [i["id"] for i in page["items"]] == ["b", "c"] and page["total"] == 4


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "offset=-1", "tags_match=some"])
def test_list_query_problems_are_422(api, bank, query):
    response = api.get(url() + "?" + query)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "query"


def test_list_filters_tags_as_arrays(api, bank):
    make_mental_model(bank, "ab", tags=["a", "b"])
    make_mental_model(bank, "a", tags=["a"])
    make_mental_model(bank, "c", tags=["c"])
    make_mental_model(bank, "none")

    def ids(q: str) -> set[str]:
        return {i["id"] for i in api.get(url() + "?" + q).json()["items"]}

    assert ids("tags=a") == {"ab", "a"}
    assert ids("tags=a&tags=c") == {"ab", "a", "c"}
    assert ids("tags=a&tags=b&tags_match=all") == {"ab"}
    assert ids("tags=a&tags_match=exact") == {"a"}
    assert ids("") == {"ab", "a", "c", "none"}
    assert ids("exclude_knowledge_pages=true") == {"ab", "a", "c", "none"}


def test_list_total_counts_the_filter_on_every_page_and_past_the_end(api, bank):
    for i in range(5):
        make_mental_model(bank, f"m{i}", tags=["a"] if i % 2 else [])
    make_mental_model(bank, "b", tags=["b"])

    def page(q: str) -> tuple[int, int]:
        body = api.get(url() + "?" + q).json()
        return len(body["items"]), body["total"]

    assert page("limit=2") == (2, 6)
    assert page("limit=2&offset=4") == (2, 6)
    assert page("limit=2&offset=9") == (0, 6)
    assert page("tags=a&limit=1") == (1, 2)
    assert page("tags=a&offset=5") == (0, 2)
    assert page("tags=zz") == (0, 0)


def test_list_at_metadata_reads_no_content_and_renders_it_null(api, bank):
    make_mental_model(bank, "m", content="# Doc", reflect_response={"text": "# Doc"})
    (item,) = api.get(url() + "?detail=metadata").json()["items"]
    assert item["content"] is None and item["reflect_response"] is None
    (item,) = api.get(url() + "?detail=full").json()["items"]
    assert item["content"] == "# Doc" and item["reflect_response"] == {"text": "# Doc"}


def _list_item_cases(bank) -> None:
    """Models whose every list column varies: nulls, timestamps with and without microseconds,
    non-ASCII and line-separator text, tag groups, stale and fresh."""
    from datetime import datetime

    make_memory(bank, "untagged")
    newest = make_memory(bank, "tagged", tags=["é", "team"], fact_type="experience")
    make_mental_model(bank, "never", tags=["team"])  # every timestamp but created_at null
    make_mental_model(
        bank, "unicode", name="Ünïcødé 名前 \u2028 \"q\"", source_query="Was ist \u2029 los?",
        content="# Dok\n\n\u00e9\u2028😀\t\\", tags=["é", "日本"], max_tokens=4096,
        trigger={"tags_match": "any", "fact_types": ["experience", "world"]},
        last_refreshed_at=datetime(2026, 1, 1, tzinfo=UTC),
        last_memory_seen_at=newest.updated_at,
        last_refresh_failed_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        last_full_refreshed_at=datetime(2025, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        reflect_response={"text": "naïve \u2029", "based_on": {"world": [{"id": "x", "n": 1.5}]},
                          "mental_models": [], "none": None},
    )
    make_mental_model(
        bank, "grouped", content="",
        trigger={"tag_groups": [{"or": [{"tags": ["team"]}, {"not": {"tags": ["x"],
                                                                   "match": "all"}}]}]},
        last_refreshed_at=datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        last_memory_seen_at=datetime(2000, 1, 1, tzinfo=UTC),
    )
    make_mental_model(bank, "fresh", tags=["nobody"], fresh=True, reflect_response=None)


@pytest.mark.parametrize("detail", ["metadata", "content", "full"])
@pytest.mark.parametrize("query", ["", "&limit=2&offset=1", "&tags=%C3%A9&tags=team",
                                   "&tags=team&tags_match=exact"])
def test_list_items_are_the_single_model_answers_byte_for_byte(api, bank, detail, query):
    """The list reads rows, not models, but renders them as the single-model GET does: its body
    is the GET bodies of its items at the same detail level, joined, byte for byte."""
    _list_item_cases(bank)
    response = api.get(url() + f"?detail={detail}{query}")
    body = response.json()
    assert body["items"], "every case lists something"
    gets = [api.get(url("mm-bank", item["id"]) + f"?detail={detail}").content
            for item in body["items"]]
    tail = f'],"total":{body["total"]},"limit":{body["limit"]},"offset":{body["offset"]}}}'
    assert response.content == b'{"items":[' + b",".join(gets) + tail.encode()


def test_list_item_cases_cover_nulls_staleness_and_escapes(api, bank):
    _list_item_cases(bank)
    items = {i["id"]: i for i in api.get(url() + "?detail=full").json()["items"]}
    assert {k: i["is_stale"] for k, i in items.items()} == {
        "never": True, "unicode": False, "grouped": True, "fresh": False}
    assert items["never"]["last_refreshed_at"] is None
    assert items["unicode"]["last_refreshed_at"] == "2026-01-01T00:00:00+00:00"
    assert items["grouped"]["last_refreshed_at"] == "2026-01-01T00:00:00.000001+00:00"
    assert items["fresh"]["reflect_response"] is None
    raw = api.get(url() + "?detail=full").content
    assert b"\\u2028" in raw and "名前".encode() in raw


def test_list_of_unknown_bank_is_404(api, db):
    response = api.get(url("no-such-bank"))
    assert response.status_code == 404
    assert response.json() == {"detail": "Bank 'no-such-bank' not found"}


@pytest.mark.parametrize(
    "method, suffix, message",
    [
        ("get", "", "Mental model 'nope' not found"),
        ("patch", "", "Mental model 'nope' not found"),
        ("delete", "", "Mental model 'nope' not found"),
        ("post", "clear", "Mental model 'nope' not found"),
        ("get", "history", "Mental model 'nope' not found"),
        ("post", "refresh", "Mental model nope not found in bank mm-bank"),
        ("post", "dry-run-refresh", "Mental model nope not found"),
    ],
)
def test_unknown_model_is_404_with_upstream_messages(api, bank, method, suffix, message):
    path = url("mm-bank", "nope", *( [suffix] if suffix else []))
    response = getattr(api, method)(path, {} if method in ("patch", "post") else None, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": message}


def test_another_banks_model_is_unknown(api, bank):
    from hindsight.banks.models import Bank

    make_mental_model(bank, "team")
    Bank.objects.create(id="other")
    assert api.get(url("other", "team")).status_code == 404


def test_patch_changes_only_what_is_sent_and_merges_trigger_key_by_key(api, bank):
    make_mental_model(bank, "team", tags=["a"], trigger={"mode": "delta", "keep_trace": True,
                                                  "refresh_cron": "0 3 * * *"})
    response = api.patch(url("mm-bank", "team"), {
        "name": "Team v2", "source_query": None, "tags": None, "max_tokens": None,
        "trigger": {"refresh_cron": None, "fact_types": ["world"]},
    }, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["name"] == "Team v2" and body["tags"] == ["a"]
    assert body["source_query"] == "How does the team work?"
    assert body["trigger"]["mode"] == "delta" and body["trigger"]["keep_trace"] is True
    assert body["trigger"]["refresh_cron"] is None  # null resets to the default
    assert body["trigger"]["fact_types"] == ["world"]
    assert list(body) == WIRE_KEYS


def test_patch_that_would_combine_cron_and_after_consolidation_is_422_and_changes_nothing(api, bank):
    make_mental_model(bank, "team", trigger={"refresh_after_consolidation": True})
    response = api.patch(url("mm-bank", "team"), {"name": "x", "trigger": {"refresh_cron": "0 3 * * *"}},
                         format="json")
    assert response.status_code == 422
    assert ["body", "trigger", "refresh_cron"] in locs(response)
    model = MentalModel.objects.get(mental_model_id="team")
    assert model.name == "Team" and model.trigger["refresh_cron"] is None


@pytest.mark.parametrize("body, loc", [
    ({"bogus": 1}, ["body", "bogus"]),
    ({"max_tokens": 100}, ["body", "max_tokens"]),
    ({"name": ""}, ["body", "name"]),
    ({"trigger": {"fact_types": []}}, ["body", "trigger", "fact_types"]),
])
def test_patch_validation_is_422(api, bank, body, loc):
    make_mental_model(bank, "team")
    response = api.patch(url("mm-bank", "team"), body, format="json")
    assert response.status_code == 422
    assert loc in locs(response)


def test_delete_removes_model_and_history_and_second_delete_is_404(api, bank):
    model = make_mental_model(bank, "team", content="x")
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="")
    assert api.delete(url("mm-bank", "team")).json() == {"status": "deleted"}
    assert MentalModelHistory.objects.count() == 0
    assert api.delete(url("mm-bank", "team")).status_code == 404


def test_refresh_queues_an_operation_and_coalesces_while_pending(api, bank):
    make_mental_model(bank, "team")
    first = api.post(url("mm-bank", "team", "refresh"), format="json")
    assert first.status_code == 200
    assert first.json()["status"] == "queued"
    second = api.post(url("mm-bank", "team", "refresh"), {"mode": "full"}, format="json")
    assert second.json()["operation_id"] == first.json()["operation_id"]
    op = Operation.objects.get(id=first.json()["operation_id"])
    assert op.payload == {"mode": "full"} and op.automatic is False


def test_a_refresh_request_does_not_read_the_models_stored_answer(api, bank):
    """Every refresh request reads the model it queues for: its name and ids, not its stored
    answer (with a kept trace, the bulk of a row) nor its document, parsed for nothing."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    make_mental_model(bank, "team")
    with CaptureQueriesContext(connection) as captured:
        assert api.post(url("mm-bank", "team", "refresh"), format="json").status_code == 200
    reads = [q["sql"].split(" FROM ")[0] for q in captured.captured_queries
             if ' FROM "mentalmodels_mentalmodel"' in q["sql"]]
    assert reads and all('"reflect_response"' not in r and '"document"' not in r for r in reads)
    op = Operation.objects.get(mental_model_id="team")
    assert op.result_metadata == {"name": "Team", "mental_model_id": "team"}


@pytest.mark.parametrize("body, loc", [
    ({"mode": "delta"}, ["body", "mode"]),
    ({"mode": "full", "extra": 1}, ["body", "extra"]),
])
def test_refresh_body_problems_are_422(api, bank, body, loc):
    make_mental_model(bank, "team")
    response = api.post(url("mm-bank", "team", "refresh"), body, format="json")
    assert response.status_code == 422
    assert loc in locs(response)
    assert Operation.objects.count() == 0


def test_clear_keeps_content_as_version_and_resets_document_and_watermark(api, bank):
    from datetime import datetime

    seen = datetime(2026, 1, 1, tzinfo=UTC)
    make_mental_model(bank, "team", content="old doc", last_memory_seen_at=seen,
              last_refresh_source_query="How does the team work?",
              reflect_response={"text": "old doc", "outcome": "content_written",
                                "based_on": {"world": [{"id": "m1"}]}, "mental_models": []},
              document={"sections": []}, last_refreshed_at=seen)
    response = api.post(url("mm-bank", "team", "clear"), format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["content"] == "" and body["last_memory_seen_at"] is None
    assert body["reflect_response"]["text"] == "old doc"  # kept
    assert body["last_refreshed_at"] is not None
    model = MentalModel.objects.get(mental_model_id="team")
    assert model.document is None and model.last_refresh_source_query is None
    history = api.get(url("mm-bank", "team", "history")).json()
    entry = MentalModelHistory.objects.get(model__mental_model_id="team")
    assert history == [{
        "kind": "version", "changed_at": history[0]["changed_at"],
        "previous_content": "old doc",
        "previous_reflect_response": {"based_on": {"world": [{"id": "m1"}]}},
        "id": entry.id, "cause": "cleared", "changes": history[0]["changes"],
    }]
    assert history[0]["changes"]["unified"] == (
        "--- before\n+++ after\n@@ -1 +0,0 @@\n-old doc\n\\ No newline at end of file\n")


def test_cleared_model_reads_stale_as_soon_as_scope_holds_a_memory(api, bank):
    make_memory(bank, "fact", tags=["t"])
    make_mental_model(bank, "team", tags=["t"], content="doc", last_memory_seen_at=None)
    api.post(url("mm-bank", "team", "clear"), format="json")
    assert api.get(url("mm-bank", "team")).json()["is_stale"] is True


def test_history_lists_newest_first_with_kind_shapes(api, bank):
    model = make_mental_model(bank, "team")
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="",
                                      previous_reflect_response={"based_on": {}})
    MentalModelHistory.objects.create(model=model, kind="refresh_failed",
                                      outcome="refresh_failed_error", reason="retrieval_failed",
                                      exception="RetrievalError: down")
    history = api.get(url("mm-bank", "team", "history")).json()
    assert [h["kind"] for h in history] == ["refresh_failed", "version"]
    assert set(history[0]) == {"kind", "changed_at", "outcome", "failure_reason", "error_message",
                               "operation_id", "previous_content", "previous_reflect_response",
                               "id"}
    assert history[0]["previous_content"] is None and history[0]["previous_reflect_response"] is None
    assert (history[0]["outcome"], history[0]["failure_reason"], history[0]["error_message"]) == \
        ("refresh_failed_error", "retrieval_failed", "RetrievalError: down")
    assert set(history[1]) == {"kind", "changed_at", "previous_content", "previous_reflect_response",
                               "id", "cause", "changes"}


def test_tags_source_mental_models_lists_model_tags_with_counts(api, bank):
    make_mental_model(bank, "a", tags=["team", "Alpha"])
    make_mental_model(bank, "b", tags=["team"])
    make_memory(bank, "memory tags are another space", tags=["memory-only"])
    tags = "/v1/default/banks/mm-bank/tags?source=mental_models"
    assert api.get(tags).json() == {
        "items": [{"tag": "team", "count": 2}, {"tag": "Alpha", "count": 1}],
        "total": 2, "limit": 100, "offset": 0,
    }
    assert api.get(tags + "&q=al*").json()["items"] == [{"tag": "Alpha", "count": 1}]
    page = api.get(tags + "&limit=1&offset=1").json()
    assert page["items"] == [{"tag": "Alpha", "count": 1}] and page["total"] == 2
    assert api.get(tags + "&q=zzz*").json() == {"items": [], "total": 0, "limit": 100, "offset": 0}


def test_delete_cancels_the_models_queued_refresh(api, bank):
    created = create(api, id="team").json()
    assert api.delete(url("mm-bank", "team")).status_code == 200
    assert Operation.objects.get(id=created["operation_id"]).status == "cancelled"
