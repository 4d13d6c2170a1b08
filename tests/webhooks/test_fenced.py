"""A page event is written by the refresh's one fenced write: a refresh that completes sends
``mental_model.refreshed``; one whose fence moved before its write (an edit meanwhile) sends
nothing, since its transaction writes nothing. Beat runs the sweep; workers know both tasks."""

from __future__ import annotations

from typing import Any

import pytest
from django_celery_beat.models import PeriodicTask

from hindsight.project.celery import app
from hindsight.webhooks.models import Webhook, WebhookDelivery
from mentalmodels.refresh import persistence
from mentalmodels.services import refresh_dedupe_key
from operations.errors import FenceLost
from operations.leases import lease_bump
from operations.schedules import ensure_beat_schedules
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run
from tests.mentalmodels.test_refresh_worker import answering

pytestmark = pytest.mark.django_db


def test_a_fenced_out_refresh_sends_no_page_event(bank: Any, llm, monkeypatch):
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    make_mental_model(bank, "team")
    Webhook.objects.create(bank_id=bank.id, url="https://hooks.example.com/in",
                           event_types=["mental_model.refreshed"])
    answering(llm, ["## Team\n\nAlice prefers async.",
                    "## Team\n\nAlice prefers async.\n\nShe writes first."], [str(fact.id)])
    refresh_run(bank_id=bank.id, mental_model_id="team")
    (sent,) = WebhookDelivery.objects.all()
    assert '"outcome":"content_written"' in sent.payload

    real_embed = persistence._embed

    def edited_meanwhile(*args: Any, **kwargs: Any) -> Any:
        lease_bump(key=refresh_dedupe_key(bank_id=bank.id, mental_model_id="team"))
        return real_embed(*args, **kwargs)

    monkeypatch.setattr(persistence, "_embed", edited_meanwhile)
    with pytest.raises(FenceLost):
        refresh_run(bank_id=bank.id, mental_model_id="team")
    assert list(WebhookDelivery.objects.all()) == [sent]


def test_beat_runs_the_webhook_sweep_and_workers_know_both_tasks(settings):
    ensure_beat_schedules()
    sweep = PeriodicTask.objects.get(name="webhooks.sweep")
    assert sweep.task == "webhooks.sweep" and sweep.enabled
    assert sweep.interval.every == 5  # HINDSIGHT_API_WEBHOOK_SWEEP_INTERVAL_SECONDS
    app.loader.import_default_modules()
    assert {"webhooks.deliver", "webhooks.sweep"} <= set(app.tasks)
