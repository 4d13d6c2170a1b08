"""History retention per kind and the switch, the pause's bookkeeping, failure traces, and an
automatic refresh re-checking staleness (docs/behaviour.md)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.handler import RefreshMentalModelHandler
from mentalmodels.services import (
    history_record_failure,
    history_record_version,
    mental_model_clear,
    mental_model_record_failure,
    mental_model_refresh_submit,
)
from operations.models import Operation
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db


def kinds(model) -> dict[str, int]:
    return {
        kind: MentalModelHistory.objects.filter(model=model, kind=kind).count()
        for kind in ("version", "refresh_failed")
    }


def test_retention_caps_each_kind_separately_so_failures_never_evict_versions(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, mental_model_history_max_entries=3)
    model = make_mental_model(bank, "m")
    for i in range(2):
        history_record_version(model=model, previous_content=f"v{i}", previous_reflect_response=None)
    for i in range(5):
        history_record_failure(model_uid=model.uid, reason="unexpected_error",
                               exception=f"boom {i}", operation_id=None)
    assert kinds(model) == {"version": 2, "refresh_failed": 3}
    newest_failures = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert sorted(f.exception for f in newest_failures) == ["boom 2", "boom 3", "boom 4"]
    for i in range(2, 6):
        history_record_version(model=model, previous_content=f"v{i}", previous_reflect_response=None)
    assert kinds(model) == {"version": 3, "refresh_failed": 3}
    kept = MentalModelHistory.objects.filter(model=model, kind="version")
    assert sorted(v.previous_content for v in kept) == ["v3", "v4", "v5"]


def test_history_switch_off_records_neither_kind(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, enable_mental_model_history=False)
    model = make_mental_model(bank, "m", content="doc")
    history_record_failure(model_uid=model.uid, reason="x", exception="y", operation_id=None)
    mental_model_clear(bank_id=bank.id, mental_model_id="m")
    assert MentalModelHistory.objects.count() == 0


def test_final_failure_sets_the_pause_flag_and_cancels_parked_automatic_refreshes(bank):
    model = make_mental_model(bank, "m")
    parked = mental_model_refresh_submit(
        model=model, automatic=True, not_before=timezone.now() + timedelta(hours=1)
    )
    assert parked.status == "pending" and parked.next_retry_at is not None
    mental_model_record_failure(model_uid=model.uid, reason="unexpected_error",
                                exception="boom", operation_id=uuid.uuid4(), final=False)
    model.refresh_from_db()
    assert model.last_refresh_failed_at is None
    assert Operation.objects.get(id=parked.id).status == "pending"
    mental_model_record_failure(model_uid=model.uid, reason="unexpected_error",
                                exception="boom", operation_id=uuid.uuid4(), final=True)
    model.refresh_from_db()
    assert model.last_refresh_failed_at is not None
    assert Operation.objects.get(id=parked.id).status == "cancelled"
    assert kinds(model) == {"version": 0, "refresh_failed": 2}


def test_failed_refresh_keeps_its_trace_when_keep_trace_is_on(bank, scripted_llm, openai_embeddings):
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept", trigger={"keep_trace": True},
                      reflect_response={"text": "kept", "outcome": "content_written",
                                        "based_on": {"world": []}, "mental_models": []})
    scripted_llm.respond_with(lambda body: Reply.error(400, "prompt too large"))
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="m")
    job = SimpleNamespace(operation=SimpleNamespace(bank_id=bank.id, mental_model_id="m",
                                                    id=uuid.uuid4()))
    RefreshMentalModelHandler().on_attempt_failed_in_transaction(job, info.value, final=True)
    model.refresh_from_db()
    assert model.content == "kept"
    trace = model.reflect_response["trace"]
    assert trace["outcome"] == "refresh_failed_error"
    assert trace["failure_reason"] == "unexpected_error" and "prompt too large" in trace["error"]
    assert model.reflect_response["text"] == "kept"
    assert len(json.dumps(trace)) < 16 * 1024
    [failure] = MentalModelHistory.objects.filter(model=model)
    assert failure.kind == "refresh_failed" and failure.reason == "unexpected_error"
    assert failure.operation_id == job.operation.id


def test_automatic_refresh_of_a_fresh_model_completes_without_an_llm_call(bank, scripted_llm):
    unit = make_memory(bank, "fact")
    model = make_mental_model(bank, "m", content="doc", last_memory_seen_at=unit.updated_at)
    report = refresh_run(bank_id=bank.id, mental_model_id="m", automatic=True)
    assert scripted_llm.requests == []
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    model.refresh_from_db()
    assert model.content == "doc" and model.last_refreshed_at is not None


def test_successful_refresh_clears_the_pause_flag(bank, scripted_llm):
    model = make_mental_model(bank, "m", tags=["nothing-here"], last_refresh_failed_at=timezone.now())
    refresh_run(bank_id=bank.id, mental_model_id="m")
    model.refresh_from_db()
    assert model.last_refresh_failed_at is None


def test_deleted_model_failure_bookkeeping_is_a_no_op(bank):
    model = make_mental_model(bank, "m")
    uid = model.uid
    model.delete()
    mental_model_record_failure(model_uid=uid, reason="x", exception="y", operation_id=None,
                                final=True)
    assert MentalModelHistory.objects.count() == 0
    assert not MentalModel.objects.filter(uid=uid).exists()
