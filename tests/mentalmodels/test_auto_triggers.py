"""Automatic refresh triggers: the cron tick (docs/behaviour.md#the-cron-tick), staleness gating (docs/behaviour.md#staleness-gating), the rate floor
(docs/behaviour.md#the-rate-floor) and pause after failure (docs/behaviour.md#retries-and-the-pause). ``now`` is passed explicitly; nothing sleeps on the clock
except the one end-to-end test with a real worker."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from mentalmodels.models import MentalModel
from mentalmodels.refresh.failure_class import FailureClass
from mentalmodels.services import mental_model_record_failure, mental_model_refresh_request
from mentalmodels.triggers_auto import (
    PARKED,
    QUEUED,
    REASON_CONSOLIDATION,
    SKIPPED_FRESH,
    SKIPPED_PAUSED,
    _claim_fires,
    cron_due,
    mental_model_refresh_auto,
    mental_models_cron_tick,
)
from operations.models import CANCELLED, PENDING, Operation
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

T0 = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)  # a model "created" at midnight UTC
DAILY_3AM = "0 3 * * *"


def cron_model(bank, mental_model_id="team", *, trigger=None, created_at=T0, **fields):
    model = make_mental_model(bank, mental_model_id, trigger=trigger or {"refresh_cron": DAILY_3AM},
                      **fields)
    MentalModel.objects.filter(uid=model.uid).update(created_at=created_at)
    model.refresh_from_db()
    return model


def make_fresh(model: MentalModel) -> MentalModel:
    """Watermark at the bank's newest memory: nothing in scope is newer."""
    from hindsight.banks.selectors import bank_last_memory_write_at

    newest = bank_last_memory_write_at(bank_id=model.bank_id)
    MentalModel.objects.filter(uid=model.uid).update(last_memory_seen_at=newest)
    model.refresh_from_db()
    return model


def ops(model: MentalModel):
    return Operation.objects.filter(mental_model_id=model.mental_model_id, bank_id=model.bank_id)


# ---------------------------------------------------------------------------------------------
# cron due / not due


@pytest.mark.django_db
def test_cron_not_due_before_its_first_fire_after_creation(bank):
    make_memory(bank, "fact")
    model = cron_model(bank)
    assert cron_due(model, now=T0 + timedelta(hours=2, minutes=59)) is None
    report = mental_models_cron_tick(now=T0 + timedelta(hours=2, minutes=59))
    assert report.evaluated == 1 and report.due == 0
    assert not ops(model).exists()


@pytest.mark.django_db
def test_due_stale_cron_model_gets_one_automatic_refresh_queued(bank):
    make_memory(bank, "fact")
    model = cron_model(bank)
    report = mental_models_cron_tick(now=T0 + timedelta(hours=3))
    assert [r.action for r in report.results] == [QUEUED]
    [op] = ops(model)
    assert op.status == PENDING and op.automatic is True and op.next_retry_at is None
    assert op.payload == {}  # a plain refresh: the model's own mode
    model.refresh_from_db()
    assert model.cron_checked_at == T0 + timedelta(hours=3)


@pytest.mark.django_db
def test_cron_due_counts_from_last_refresh_not_creation(bank):
    make_memory(bank, "fact")
    model = cron_model(bank, last_refreshed_at=T0 + timedelta(hours=3, minutes=30))
    # The 03:00 fire came before the last refresh: not due until tomorrow's.
    assert cron_due(model, now=T0 + timedelta(hours=23)) is None
    assert cron_due(model, now=T0 + timedelta(days=1, hours=3)) == "refresh_cron"


@pytest.mark.django_db
def test_tick_twice_in_a_row_queues_nothing_more_and_costs_one_query(bank):
    make_memory(bank, "fact")
    model = cron_model(bank)
    now = T0 + timedelta(hours=3, minutes=1)
    mental_models_cron_tick(now=now)
    assert ops(model).count() == 1
    with CaptureQueriesContext(connection) as queries:
        report = mental_models_cron_tick(now=now + timedelta(seconds=60))
    assert report.due == 0 and report.results == []
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert ops(model).count() == 1


@pytest.mark.django_db
def test_a_fire_is_claimed_once_even_by_concurrent_ticks(bank):
    make_memory(bank, "fact")
    model = cron_model(bank)
    read_by_both = MentalModel.objects.get(uid=model.uid)
    now = T0 + timedelta(hours=3)
    assert _claim_fires([read_by_both], now=now) == {model.uid}
    assert _claim_fires([read_by_both], now=now + timedelta(seconds=1)) == set()


# ---------------------------------------------------------------------------------------------
# staleness gating (docs/behaviour.md#staleness-gating)


@pytest.mark.django_db
def test_due_cron_on_fresh_model_queues_nothing_and_sends_no_llm_request(bank, llm):
    make_memory(bank, "fact")
    model = make_fresh(cron_model(bank))
    report = mental_models_cron_tick(now=T0 + timedelta(hours=3))
    assert [r.action for r in report.results] == [SKIPPED_FRESH]
    assert not ops(model).exists()
    assert llm.requests == []


@pytest.mark.django_db
def test_skipped_fire_is_not_acted_on_when_the_model_turns_stale_later(bank):
    make_memory(bank, "fact")
    model = make_fresh(cron_model(bank))
    mental_models_cron_tick(now=T0 + timedelta(hours=3))
    make_memory(bank, "new fact")  # stale from now on
    assert mental_models_cron_tick(now=T0 + timedelta(hours=10)).due == 0
    assert not ops(model).exists()
    # The next fire finds it stale.
    report = mental_models_cron_tick(now=T0 + timedelta(days=1, hours=3))
    assert [r.action for r in report.results] == [QUEUED]


@pytest.mark.django_db
def test_tick_cost_does_not_grow_with_the_number_of_fresh_due_models(bank):
    make_memory(bank, "fact")
    other = Bank.objects.create(id="other-bank")
    make_memory(other, "fact")

    def tick_queries(count: int, offset: int) -> int:
        for i in range(count):
            b = bank if i % 2 else other
            make_fresh(cron_model(b, f"m{offset + i}"))
        with CaptureQueriesContext(connection) as queries:
            report = mental_models_cron_tick(now=T0 + timedelta(hours=3))
        assert report.due == count
        MentalModel.objects.all().delete()
        return len(queries)

    assert tick_queries(3, 0) == tick_queries(12, 100)


@pytest.mark.django_db
def test_full_refresh_cron_queues_a_full_rebuild_even_when_fresh(bank):
    make_memory(bank, "fact")
    model = make_fresh(cron_model(bank, trigger={"mode": "delta", "full_refresh_cron": "0 4 * * 0",
                                                 "refresh_cron": DAILY_3AM}))
    # 2026-01-04 is a Sunday: both crons fired; the full rebuild wins.
    report = mental_models_cron_tick(now=datetime(2026, 1, 4, 5, tzinfo=UTC))
    assert [(r.reason, r.action) for r in report.results] == [("full_refresh_cron", QUEUED)]
    [op] = ops(model)
    assert op.payload == {"mode": "full"} and op.automatic is True


@pytest.mark.django_db
def test_full_cron_due_counts_from_last_full_refresh(bank):
    make_memory(bank, "fact")
    model = cron_model(bank, trigger={"full_refresh_cron": "0 4 * * *"},
                       last_refreshed_at=T0 + timedelta(hours=5),
                       last_full_refreshed_at=T0 + timedelta(hours=3))
    assert cron_due(model, now=T0 + timedelta(hours=6)) == "full_refresh_cron"


@pytest.mark.django_db
def test_automatic_full_run_rebuilds_a_fresh_model_but_plain_automatic_run_spends_nothing(
    bank, llm
):
    fact = make_memory(bank, "Alice prefers async", embed=True)
    model = make_fresh(make_mental_model(bank, "team", content="old doc"))

    refresh_run(bank_id=bank.id, mental_model_id="team", automatic=True)
    assert llm.requests == []

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        return Reply.tool_calls([("done", {"answer": "rebuilt doc", "memory_ids": [str(fact.id)],
                                           "mental_model_ids": []})])

    llm.respond_with(respond)
    refresh_run(bank_id=bank.id, mental_model_id="team", automatic=True, mode="full")
    assert llm.requests
    model.refresh_from_db()
    assert model.content == "rebuilt doc"


# ---------------------------------------------------------------------------------------------
# rate floor (docs/behaviour.md#the-rate-floor)


def _recently_refreshed(bank, mental_model_id="team", seconds_ago=60, **trigger):
    make_memory(bank, "fact")
    last = timezone.now() - timedelta(seconds=seconds_ago)
    model = make_mental_model(bank, mental_model_id, trigger=trigger or None, last_refreshed_at=last)
    return model, last


@pytest.mark.django_db
def test_trigger_inside_the_floor_is_parked_until_the_window_closes(bank):
    model, last = _recently_refreshed(bank, min_refresh_interval_seconds=3600)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.action == PARKED
    [op] = ops(model)
    assert op.status == PENDING and op.automatic is True
    assert op.next_retry_at == last + timedelta(seconds=3600) == result.not_before
    assert op.dispatched_at is None  # not sent: beat's release_due sends it when due
    # A second trigger in the window folds into the same parked refresh.
    again = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert again.action == PARKED and again.operation.id == op.id
    assert ops(model).count() == 1


@pytest.mark.django_db
def test_trigger_after_the_floor_runs_now(bank):
    model, _ = _recently_refreshed(bank, seconds_ago=120, min_refresh_interval_seconds=60)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.action == QUEUED and result.operation.next_retry_at is None


@pytest.mark.django_db
def test_bank_floor_applies_when_the_model_sets_none(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, mental_model_min_refresh_interval_seconds=100
    )
    Bank.objects.filter(id=bank.id).update(
        config={"mental_model_min_refresh_interval_seconds": 600}
    )
    model, last = _recently_refreshed(bank)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.operation.next_retry_at == last + timedelta(seconds=600)


@pytest.mark.django_db
def test_global_floor_applies_when_model_and_bank_set_none(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, mental_model_min_refresh_interval_seconds=100
    )
    model, last = _recently_refreshed(bank)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.operation.next_retry_at == last + timedelta(seconds=100)


@pytest.mark.django_db
def test_model_floor_wins_over_the_bank_floor(bank):
    Bank.objects.filter(id=bank.id).update(
        config={"mental_model_min_refresh_interval_seconds": 600}
    )
    model, last = _recently_refreshed(bank, min_refresh_interval_seconds=300)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.operation.next_retry_at == last + timedelta(seconds=300)


@pytest.mark.django_db
def test_model_floor_zero_exempts_it_from_bank_and_global_floors(bank, settings):
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, mental_model_min_refresh_interval_seconds=900
    )
    Bank.objects.filter(id=bank.id).update(
        config={"mental_model_min_refresh_interval_seconds": 600}
    )
    model, _ = _recently_refreshed(bank, min_refresh_interval_seconds=0)
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.action == QUEUED and result.operation.next_retry_at is None


@pytest.mark.django_db
def test_cron_trigger_inside_the_floor_is_parked_too(bank):
    make_memory(bank, "fact")
    last = timezone.now() - timedelta(seconds=30)
    model = make_mental_model(bank, "team", trigger={"refresh_cron": "* * * * *",
                                             "min_refresh_interval_seconds": 3600},
                      last_refreshed_at=last)
    report = mental_models_cron_tick(now=timezone.now() + timedelta(minutes=1))
    assert [r.action for r in report.results] == [PARKED]
    assert ops(model).get().next_retry_at == last + timedelta(seconds=3600)


@pytest.mark.django_db
def test_manual_refresh_ignores_the_floor_and_releases_the_parked_refresh(bank):
    model, _ = _recently_refreshed(bank, min_refresh_interval_seconds=3600)
    parked = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).operation
    manual = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    assert manual.id == parked.id
    manual.refresh_from_db()
    assert manual.next_retry_at is None and manual.automatic is False
    assert manual.status == PENDING


# ---------------------------------------------------------------------------------------------
# pause (docs/behaviour.md#retries-and-the-pause)


@pytest.mark.django_db
def test_paused_model_gets_no_automatic_refresh_from_tick_or_gate(bank):
    make_memory(bank, "fact")
    model = cron_model(bank, last_refresh_failed_at=T0)
    report = mental_models_cron_tick(now=T0 + timedelta(hours=3))
    assert [r.action for r in report.results] == [SKIPPED_PAUSED]
    assert mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).action == SKIPPED_PAUSED
    assert not ops(model).exists()


@pytest.mark.django_db
def test_model_paused_after_it_was_read_gets_nothing(bank):
    make_memory(bank, "fact")
    model = make_mental_model(bank, "team")  # read while active
    MentalModel.objects.filter(uid=model.uid).update(last_refresh_failed_at=timezone.now())
    assert mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).action == SKIPPED_PAUSED
    assert not ops(model).exists()


@pytest.mark.django_db
def test_model_failed_transiently_after_it_was_read_gets_its_refresh_parked_until_the_backoff(
    bank,
):
    # The trigger read the model before its refresh failed (as consolidation's trigger does while
    # a refresh of the model is still in its last attempt): the backoff that failure set must
    # still hold, or the automatic refresh runs at once against an LLM that is down.
    make_memory(bank, "fact")
    model = make_mental_model(bank, "team")  # read before the failure
    mental_model_record_failure(model_uid=model.uid, reason="llm_error",
                                exception="APIStatusError: 503", operation_id=None, final=True,
                                failure=FailureClass(transient=True))
    backoff = MentalModel.objects.get(uid=model.uid).auto_refresh_not_before
    assert backoff is not None and backoff > timezone.now()
    assert model.auto_refresh_not_before is None  # the stale read the trigger holds
    result = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert result.action == PARKED
    assert result.operation.next_retry_at == backoff


@pytest.mark.django_db
def test_final_failure_pauses_and_cancels_the_parked_automatic_refresh(bank):
    model, _ = _recently_refreshed(bank, min_refresh_interval_seconds=3600)
    parked = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).operation
    mental_model_record_failure(model_uid=model.uid, reason="unexpected_error",
                                exception="RuntimeError: boom", operation_id=None, final=True)
    parked.refresh_from_db()
    assert parked.status == CANCELLED
    model.refresh_from_db()
    assert model.last_refresh_failed_at is not None


@pytest.mark.django_db
def test_final_failure_cancels_an_automatic_refresh_queued_behind_but_keeps_a_manual_one(bank):
    make_memory(bank, "fact")
    model = make_mental_model(bank, "team")
    queued = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).operation
    assert queued.next_retry_at is None
    mental_model_record_failure(model_uid=model.uid, reason="unexpected_error",
                                exception="RuntimeError: boom", operation_id=None, final=True)
    queued.refresh_from_db()
    assert queued.status == CANCELLED
    assert "paused" in queued.error_message

    other = make_mental_model(bank, "other")
    manual = mental_model_refresh_request(bank_id=bank.id, mental_model_id="other")
    mental_model_record_failure(model_uid=other.uid, reason="unexpected_error",
                                exception="RuntimeError: boom", operation_id=None, final=True)
    manual.refresh_from_db()
    assert manual.status == PENDING


@pytest.mark.django_db
def test_non_final_failure_keeps_the_parked_refresh(bank):
    model, _ = _recently_refreshed(bank, min_refresh_interval_seconds=3600)
    parked = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION).operation
    mental_model_record_failure(model_uid=model.uid, reason="unexpected_error",
                                exception="RuntimeError: boom", operation_id=None, final=False)
    parked.refresh_from_db()
    assert parked.status == PENDING


# ---------------------------------------------------------------------------------------------
# beat schedule


@pytest.mark.django_db
def test_cron_tick_is_a_beat_schedule_at_the_configured_interval(settings):
    from django_celery_beat.models import PeriodicTask

    from hindsight.project.celery import app
    from operations.schedules import ensure_beat_schedules

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, mental_model_refresh_tick_seconds=7)
    ensure_beat_schedules()
    task = PeriodicTask.objects.get(name="mentalmodels.cron_tick")
    assert task.task == "mentalmodels.cron_tick" and task.enabled
    assert task.interval.every == 7 and task.interval.period == "seconds"
    app.loader.import_default_modules()
    assert "mentalmodels.cron_tick" in app.tasks


# ---------------------------------------------------------------------------------------------
# end to end: beat's task on a real worker, scripted LLM


@pytest.mark.integration
def test_tick_run_by_a_worker_refreshes_a_due_stale_model(transactional_db, worker_factory, llm,
                                                          settings):
    from mentalmodels.tasks import cron_tick
    from tests.workers import wait_until

    bank = Bank.objects.create(id="cron-bank")
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    model = make_mental_model(bank, "team", trigger={"refresh_cron": "* * * * *"})
    MentalModel.objects.filter(uid=model.uid).update(
        created_at=timezone.now() - timedelta(minutes=2)
    )

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        return Reply.tool_calls([("done", {"answer": "## Team\n\nAlice prefers async.",
                                           "memory_ids": [str(fact.id)], "mental_model_ids": []})])

    llm.respond_with(respond)
    worker_factory(env=llm.env)
    cron_tick.apply_async(queue=settings.HINDSIGHT.task_queue)

    op = wait_until(lambda: ops(model).filter(status="completed").first(), 60,
                    message="the tick's refresh to complete")
    assert op.automatic is True
    model.refresh_from_db()
    assert model.content == "## Team\n\nAlice prefers async."
    assert model.cron_checked_at is not None
    assert llm.requests
