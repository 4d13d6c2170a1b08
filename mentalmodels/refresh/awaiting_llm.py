"""Refreshes that could not run because this server has no LLM yet, and their catch-up.

A missing LLM is a configuration that is not there yet, not a refresh that cannot work: pausing the
model (docs/behaviour.md#retries-and-the-pause) would leave every model created before the LLM was
connected empty until someone refreshed each by hand. So a refresh that fails only for that reason

- is recorded: a ``failure`` history entry with reason ``llm_not_configured`` and a message
  naming the variables to set (the operation itself keeps upstream's ``unexpected_error``
  failure reason, the only one the official client's enum has for it);
- does not pause the model (``last_refresh_failed_at`` stays as it was) and marks it
  ``awaiting_llm_since``;

and once a process with an LLM configured looks (a worker at start, every cron tick), each
model still awaiting one gets the refresh it was owed, without a manual call per model
(``mental_models_refresh_awaiting_llm``). A model paused by an earlier, real failure stays
paused: only a refresh by hand lifts a pause, as before.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import LLMNotConfigured
from mentalmodels.models import PAUSED, MentalModel
from mentalmodels.services import history_record_failure, mental_model_refresh_submit

log = logging.getLogger(__name__)

LLM_NOT_CONFIGURED = "llm_not_configured"
# Models handed a refresh per round (bounds one transaction's row locks).
BATCH = 200


def llm_missing_message(exc: LLMNotConfigured) -> str:
    """What the operation's ``error_message`` and the history entry say."""
    variables = str(exc).split("set ", 1)[-1]
    return (
        "no LLM is configured on this server, so the document could not be written; set "
        f"{variables}, then restart the worker: the model is not paused and is refreshed by "
        "itself once a worker with an LLM runs"
    )


def refresh_failed_for_missing_llm(exc: BaseException) -> bool:
    """Did this refresh attempt fail only because no LLM is configured?"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, LLMNotConfigured):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def mental_model_await_llm(
    *, model_uid: int, exception: str, operation_id: uuid.UUID | str | None
) -> None:
    """Record the attempt (history) and mark the model as owed a refresh, without pausing it."""
    history_record_failure(
        model_uid=model_uid, reason=LLM_NOT_CONFIGURED, exception=exception,
        operation_id=operation_id,
    )
    MentalModel.objects.filter(uid=model_uid, awaiting_llm_since__isnull=True).update(
        awaiting_llm_since=ClockTimestamp()
    )


def mental_models_refresh_awaiting_llm() -> list[Any]:
    """Queue the owed refresh of every model awaiting an LLM, if this process has one.

    Each model is unmarked and its refresh queued in one transaction under its row lock, so two
    workers starting together queue one refresh per model (and a refresh queued already is
    joined, not doubled: the engine coalesces per model). Without an LLM it does nothing: the
    refresh would only fail again. Returns the operations queued.
    """
    if not settings.HINDSIGHT.llm_configured:
        return []
    awaiting = MentalModel.objects.filter(awaiting_llm_since__isnull=False)
    # Refreshed since (by hand, say): nothing is owed any more.
    awaiting.filter(last_refreshed_at__gte=F("awaiting_llm_since")).update(awaiting_llm_since=None)
    queued: list[Any] = []
    while True:
        with transaction.atomic():
            batch = list(
                MentalModel.objects.select_for_update(skip_locked=True)
                .filter(awaiting_llm_since__isnull=False)
                .exclude(PAUSED)
                .filter(Q(last_refreshed_at__isnull=True)
                        | Q(last_refreshed_at__lt=F("awaiting_llm_since")))
                .order_by("uid")[:BATCH]
            )
            for model in batch:
                model.awaiting_llm_since = None
                model.save(update_fields=["awaiting_llm_since"])
                queued.append(mental_model_refresh_submit(model=model))
        if len(batch) < BATCH:
            break
    if queued:
        log.info("an LLM is configured: queued the first refresh of %d mental model(s) that "
                 "were waiting for one", len(queued))
    return queued


def refresh_awaiting_llm_at_worker_start(**kwargs: Any) -> None:
    """``celery.signals.worker_ready`` receiver: a worker that starts with an LLM catches up at
    once instead of at the next cron tick. Never stops the worker from starting."""
    try:
        mental_models_refresh_awaiting_llm()
    except Exception:
        log.exception("could not queue the refreshes of models awaiting an LLM")
    finally:
        connection.close()  # the main process must not hold a connection its children share
