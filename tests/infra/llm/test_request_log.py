"""The LLM request log: one row per HTTP request the gateway sent (each attempt), labelled by
the caller's ``llm_context``, prompt and response cut to their bound, purged after retention."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from fakes.llm_server import Reply
from hindsight.infra.config import read_config
from hindsight.infra.llm import LLMProviderError, get_llm
from hindsight.infra.llm.context import llm_context
from hindsight.infra.llm.log import llm_requests_purge
from hindsight.infra.llm.models import LLMRequest
from tests.durability import synchronous_commit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_rows_of_other_tests(db) -> None:
    # Retain's extraction threads log through connections of their own, outside a test's
    # transaction, so earlier tests can leave rows behind; these tests count every row.
    LLMRequest.objects.all().delete()


def test_every_attempt_is_one_row_with_the_callers_bank_operation_and_tokens(
    scripted_llm, settings
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=1)
    scripted_llm.script(Reply.error(503, "busy"),
                        Reply.text("hello", usage={"prompt_tokens": 7, "completion_tokens": 2}))
    op_id = str(uuid.uuid4())
    with llm_context(bank_id="b1", operation="consolidation", operation_id=op_id) as tally:
        get_llm().chat([{"role": "user", "content": "hi"}], purpose="probe")
    rows = list(LLMRequest.objects.order_by("attempt"))
    assert len(rows) == len(scripted_llm.requests) == 2
    failed, ok = rows
    assert (failed.status, failed.attempt, failed.input_tokens) == ("error", 1, 0)
    assert "busy" in (failed.error or "")
    assert (ok.status, ok.attempt, ok.input_tokens, ok.output_tokens) == ("success", 2, 7, 2)
    assert {(r.bank_id, r.operation, str(r.operation_id), r.scope) for r in rows} == {
        ("b1", "consolidation", op_id, "probe")}
    assert '"hi"' in ok.prompt and '"hello"' in ok.response
    assert tally.as_dict() == {"requests": 2, "errors": 1, "input_tokens": 7,
                               "output_tokens": 2, "total_tokens": 9}


def test_a_row_carries_its_kind_provider_timing_and_the_database_end_time(scripted_llm):
    scripted_llm.script(Reply.text("hello"))
    before = timezone.now()
    get_llm().chat([{"role": "user", "content": "hi"}], purpose="probe")
    [row] = LLMRequest.objects.all()
    assert (row.kind, row.provider, row.model, row.truncated) == ("chat", "openai", "scripted",
                                                                  False)
    assert before <= row.started_at <= row.ended_at <= timezone.now()
    assert row.duration_ms >= 0 and row.error is None


def test_prompt_and_response_are_cut_to_the_configured_bound(scripted_llm, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_request_log_max_chars=50)
    scripted_llm.script(Reply.text("y" * 500))
    get_llm().chat([{"role": "user", "content": "x" * 500}])
    row = LLMRequest.objects.get()
    assert len(row.prompt) == 50 and len(row.response) == 50 and row.truncated
    assert row.bank_id is None and row.operation is None  # no context: still logged


def test_a_refused_request_is_logged_and_the_error_still_raised(scripted_llm):
    scripted_llm.script(Reply.error(400, "too large"))
    with pytest.raises(LLMProviderError):
        get_llm().chat([{"role": "user", "content": "hi"}])
    assert LLMRequest.objects.get().status == "error"


def test_purge_deletes_only_rows_older_than_the_retention(settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             llm_request_log_retention_hours=24)
    now = timezone.now()
    for hours in (1, 23, 25, 100):
        LLMRequest.objects.create(status="success", started_at=now - timedelta(hours=hours))
    assert llm_requests_purge(now=now) == 2
    assert sorted(round((now - r.started_at).total_seconds() / 3600)
                  for r in LLMRequest.objects.all()) == [1, 23]


def test_retention_is_24_hours_unless_the_environment_says_otherwise():
    assert read_config({}).llm_request_log_retention_hours == 24.0
    env = {"HINDSIGHT_API_LLM_REQUEST_LOG_RETENTION_HOURS": "2"}
    assert read_config(env).llm_request_log_retention_hours == 2.0
    bad = read_config({"HINDSIGHT_API_LLM_REQUEST_LOG_RETENTION_HOURS": "soon"})
    assert [p.variable for p in bad.errors] == ["HINDSIGHT_API_LLM_REQUEST_LOG_RETENTION_HOURS"]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_row_commits_without_waiting_for_its_wal_flush(scripted_llm):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    scripted_llm.script(Reply.text("hello"))
    assert synchronous_commit("on") == "on"
    with CaptureQueriesContext(connection) as captured:
        get_llm().chat([{"role": "user", "content": "hi"}], purpose="probe")
    [insert] = [q["sql"] for q in captured.captured_queries if "llm_llmrequest" in q["sql"]]
    # In the insert's own statement: one round trip, and the setting ends with its implicit
    # transaction (the connection, pooled or kept, is durable again for whoever uses it next).
    assert insert.startswith("INSERT INTO llm_llmrequest")
    assert insert.endswith("; SET LOCAL synchronous_commit = off")
    assert LLMRequest.objects.count() == 1
    assert synchronous_commit() == "on"


def test_inside_a_callers_transaction_the_row_and_the_caller_stay_durable(scripted_llm):
    from django.db import transaction

    scripted_llm.script(Reply.text("hello"))
    with transaction.atomic():
        assert synchronous_commit("on") == "on"
        get_llm().chat([{"role": "user", "content": "hi"}], purpose="probe")
        assert synchronous_commit() == "on"
    assert LLMRequest.objects.count() == 1
