"""Refresh fault paths run by the engine in process: the engine's wall-timeout backstop still
leaves a failure trace (docs/behaviour.md#the-trace), a database error at the snapshot cutoff or in the precheck is
``retrieval_failed`` (docs/behaviour.md#a-failed-lookup-is-a-failure), and the pause flag is set once, by the final attempt (docs/behaviour.md#retries-and-the-pause)."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import OperationalError

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.handler import RefreshMentalModelHandler
from mentalmodels.refresh.pipeline import refresh_dry_run
from mentalmodels.services import mental_model_refresh_submit
from operations.engine import operation_execute
from operations.models import FAILED, PENDING, Operation
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db

KEPT = {"text": "kept", "outcome": "content_written", "based_on": {"world": []},
        "mental_models": []}


def test_engine_wall_timeout_backstop_stores_the_failure_trace_when_keep_trace_is_on(
    bank, llm, sent, settings, monkeypatch
):
    # The pipeline's own deadline is far away; the engine's alarm (the backstop) fires first,
    # while the refresh waits on the LLM.
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, reflect_wall_timeout_seconds=30.0, worker_max_retries=0
    )
    monkeypatch.setattr(RefreshMentalModelHandler, "wall_timeout_seconds", 0.5)
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept", trigger={"keep_trace": True},
                      reflect_response=dict(KEPT))
    llm.respond_with(lambda body: Reply.delay(3, Reply.text("too late")))
    op = mental_model_refresh_submit(model=model)

    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"

    done = Operation.objects.get(id=op.id)
    assert done.status == FAILED and "wall timeout" in done.error_message
    assert done.details["failure_reason"] == "unexpected_error"
    model.refresh_from_db()
    assert model.content == "kept" and model.reflect_response["text"] == "kept"
    trace = model.reflect_response.get("trace")
    assert trace is not None, "the backstop left no trace"
    assert trace["outcome"] == "refresh_failed_error"
    assert trace["failure_reason"] == "unexpected_error"
    assert "wall timeout" in trace["error"]
    assert trace["duration_ms"] >= 400
    [failure] = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert failure.reason == "unexpected_error" and "WallTimeout" in failure.exception


def _cutoff_fails(monkeypatch):
    def broken(bank_id: str):
        raise OperationalError("canceling statement due to lock timeout")

    monkeypatch.setattr("hindsight.banks.writeclock.take_cutoff", broken)


def test_database_error_taking_the_snapshot_cutoff_is_retrieval_failed(bank, llm, monkeypatch):
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept", reflect_response=dict(KEPT))
    _cutoff_fails(monkeypatch)
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="m")
    assert info.value.failure_reason == "retrieval_failed"
    assert info.value.details == {"operation_type": "refresh_mental_model",
                                  "outcome": "refresh_failed_error",
                                  "failure_reason": "retrieval_failed"}
    assert info.value.retryable is True
    assert "lock timeout" in str(info.value)
    assert llm.requests == []
    model.refresh_from_db()
    assert model.content == "kept" and model.last_memory_seen_at is None


def test_dry_run_with_a_database_error_at_the_cutoff_answers_503(bank, llm, monkeypatch):
    make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "m")
    _cutoff_fails(monkeypatch)
    with pytest.raises(Exception) as info:
        refresh_dry_run(bank_id=bank.id, mental_model_id="m")
    assert getattr(info.value, "status_code", None) == 503


def test_database_error_looking_for_sibling_models_in_reach_is_retrieval_failed(
    bank, llm, monkeypatch
):
    # Nothing of the model's own scope: the precheck then asks whether a sibling is in reach.
    make_mental_model(bank, "m", tags=["nothing-here"])

    def broken(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("mentalmodels.reflect.mm_search.visible_models", broken)
    with pytest.raises(RefreshFailed) as info:
        refresh_run(bank_id=bank.id, mental_model_id="m")
    assert info.value.failure_reason == "retrieval_failed"
    assert llm.requests == []


def test_pause_flag_is_set_once_by_the_final_attempt_and_not_before(bank, llm, sent, settings):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, worker_max_retries=2, worker_retry_backoff_seconds=0.0
    )
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept")
    llm.respond_with(lambda body: Reply.error(400, "prompt too large"))
    op = mental_model_refresh_submit(model=model)
    flags = []
    for expected in ("retrying", "retrying", "failed"):
        assert operation_execute(operation_id=str(op.id), holder="t") == expected
        model.refresh_from_db()
        flags.append(model.last_refresh_failed_at)
    assert flags[0] is None and flags[1] is None and flags[2] is not None
    assert MentalModelHistory.objects.filter(model=model, kind="refresh_failed").count() == 3
    # A redelivered message of the failed operation changes nothing (no second pause stamp).
    assert operation_execute(operation_id=str(op.id), holder="t") == "skipped"
    model.refresh_from_db()
    assert model.last_refresh_failed_at == flags[2]
    assert MentalModelHistory.objects.filter(model=model, kind="refresh_failed").count() == 3
    assert Operation.objects.get(id=op.id).retry_count == 2


def test_paused_model_cancels_the_automatic_refresh_queued_behind_the_failed_one(
    bank, llm, sent, settings
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept")
    llm.respond_with(lambda body: Reply.error(400, "prompt too large"))
    first = mental_model_refresh_submit(model=model)

    queued: list = []

    def queue_behind(job):
        # While the first attempt runs, an automatic trigger queues one behind it.
        queued.append(mental_model_refresh_submit(model=model, automatic=True))
        return original(job)

    handler = RefreshMentalModelHandler()
    original = handler.run
    handler.run = queue_behind  # type: ignore[method-assign]
    from operations import registry

    registry.register(handler)
    try:
        assert operation_execute(operation_id=str(first.id), holder="t") == "failed"
    finally:
        registry.register(RefreshMentalModelHandler)
    [behind] = queued
    assert behind.id != first.id and behind.status == PENDING
    model.refresh_from_db()
    assert model.last_refresh_failed_at is not None
    assert Operation.objects.get(id=behind.id).status == "cancelled"
    assert MentalModel.objects.filter(uid=model.uid).exists()


def test_a_worker_lost_on_the_final_attempt_pauses_the_model_once(bank, llm, sent, settings):
    from datetime import timedelta

    from django.utils import timezone

    from operations import engine
    from operations.leases import operation_claim

    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, worker_max_retries=0, recovery_threshold_seconds=30
    )
    model = make_mental_model(bank, "m", content="kept")
    op = mental_model_refresh_submit(model=model)
    assert isinstance(operation_claim(operation_id=op.id, holder="dead"), Operation)
    Operation.objects.filter(id=op.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    [record] = engine.recover().recovered
    assert record.final is True
    model.refresh_from_db()
    paused_at = model.last_refresh_failed_at
    assert paused_at is not None and model.content == "kept"
    [failure] = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert failure.reason == "unexpected_error" and "WorkerLost" in failure.exception
    assert engine.recover().recovered == []  # a second sweep finds nothing more to count
    model.refresh_from_db()
    assert model.last_refresh_failed_at == paused_at
    assert MentalModelHistory.objects.filter(model=model, kind="refresh_failed").count() == 1


class _Killed(BaseException):
    """The worker dies: nothing after this point runs (not an Exception, nothing catches it)."""


def test_final_failure_and_the_pause_commit_together_when_the_worker_dies_right_after(
    bank, llm, sent, settings, monkeypatch
):
    # The process dies the instant the failure transaction has committed: every after-commit
    # hook is impossible. The operation is failed and, in the same commit, the model paused.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept")
    llm.respond_with(lambda body: Reply.error(400, "prompt too large"))
    op = mental_model_refresh_submit(model=model)

    def die(*args, **kwargs):
        raise _Killed

    monkeypatch.setattr("operations.engine.call_hook", die)
    with pytest.raises(_Killed):
        operation_execute(operation_id=str(op.id), holder="t")

    assert Operation.objects.get(id=op.id).status == FAILED
    model.refresh_from_db()
    assert model.last_refresh_failed_at is not None and model.content == "kept"
    [failure] = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert failure.operation_id == op.id and failure.reason == "unexpected_error"


def test_a_failure_transaction_that_does_not_commit_leaves_no_pause_and_no_entry(
    bank, llm, sent, settings, monkeypatch
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    make_memory(bank, "fact", embed=True)
    model = make_mental_model(bank, "m", content="kept")
    llm.respond_with(lambda body: Reply.error(400, "prompt too large"))
    op = mental_model_refresh_submit(model=model)

    def die(*args, **kwargs):
        raise _Killed  # after the handler's bookkeeping, before the operation's row is written

    monkeypatch.setattr("operations.leases._fail_locked", die)
    with pytest.raises(_Killed):
        operation_execute(operation_id=str(op.id), holder="t")

    assert Operation.objects.get(id=op.id).status == "processing"  # recovery's to take
    model.refresh_from_db()
    assert model.last_refresh_failed_at is None
    assert not MentalModelHistory.objects.filter(model=model, kind="refresh_failed").exists()


def test_a_worker_lost_on_the_final_attempt_is_paused_by_the_fast_path_in_one_transaction(
    bank, llm, sent, settings
):
    from operations import engine
    from operations.leases import operation_claim

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    model = make_mental_model(bank, "m", content="kept")
    op = mental_model_refresh_submit(model=model)
    assert isinstance(operation_claim(operation_id=op.id, holder="host:1:t"), Operation)
    assert engine.operation_worker_lost(operation_id=str(op.id), holder="host:2:t",
                                        cause="another process") is None
    assert Operation.objects.get(id=op.id).status == "processing"  # not that holder's job
    record = engine.operation_worker_lost(operation_id=str(op.id), holder="host:1:t",
                                          cause="pool process 1 exited")
    assert record is not None and record.final is True
    done = Operation.objects.get(id=op.id)
    assert done.status == FAILED and "pool process 1 exited" in done.error_message
    model.refresh_from_db()
    assert model.last_refresh_failed_at is not None
    [failure] = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    assert "WorkerLost" in failure.exception
