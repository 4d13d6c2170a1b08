"""The ``refresh_mental_model`` operation handler: runs one attempt of the refresh for a claimed
job, and records what a failed attempt leaves behind (failure entry, trace, pause after the last
one) in the engine's failure transaction, so a final failure and the pause commit together."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.conf import settings

from hindsight.banks.budget import budget_hold
from hindsight.infra import metrics
from hindsight.infra.vocabulary import RefreshOutcome
from mentalmodels.models import MentalModel
from mentalmodels.refresh.awaiting_llm import mental_model_await_llm
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.failures import FailureEntry
from mentalmodels.refresh.pipeline import refresh_run
from mentalmodels.refresh.records import MentalModelOperationType
from mentalmodels.services import mental_model_record_failure
from operations.errors import FenceLost
from operations.registry import Hold, Pending

if TYPE_CHECKING:
    from operations.jobs import Job


class RefreshMentalModelHandler:
    operation_type = MentalModelOperationType.REFRESH

    @property
    def wall_timeout_seconds(self) -> float:
        # docs/behaviour.md#the-wall-timeout: the engine's alarm is the backstop; the attempt's own
        # deadline (LLM calls) normally ends a slow refresh first, with a precise failure record.
        return settings.HINDSIGHT.reflect_wall_timeout_seconds + 1.0

    def hold(self, pending: Pending) -> Hold | None:
        # A spent bank's refreshes (automatic or not) wait for its budget to free.
        return budget_hold(pending)

    def run(self, job: Job) -> None:
        requested_mode = job.payload.get("mode") or "full"
        started = time.monotonic()
        # The refresh's LLM requests and tokens are logged under the job and stored in its
        # record, completed or failed.
        with job.llm_accounting():
            try:
                report = refresh_run(job=job)
            except RefreshFailed as exc:
                _observe(started, exc.outcome,
                         (exc.trace or {}).get("effective_mode") or requested_mode)
                raise
            except FenceLost:
                _observe(started, "superseded", requested_mode)
                raise
            except Exception:
                _observe(started, RefreshOutcome.REFRESH_FAILED_ERROR, requested_mode)
                raise
        _observe(started, report.outcome.outcome, report.plan.effective_mode)

    def on_attempt_failed_in_transaction(
        self, job: Job, exc: BaseException, *, final: bool
    ) -> None:
        # Inside the engine's transaction, the key's lease locked: the model row next (lock order).
        model = (
            MentalModel.objects.filter(
                bank_id=job.operation.bank_id, mental_model_id=job.operation.mental_model_id
            )
            .only("uid")
            .first()
        )
        if model is None:
            return
        entry = FailureEntry.of(exc)
        if entry.awaiting_llm:
            # A configuration not made yet: recorded, not paused, caught up once there is one.
            mental_model_await_llm(model_uid=model.uid, exception=entry.exception,
                                   operation_id=job.operation.id)
            return
        mental_model_record_failure(
            model_uid=model.uid,
            outcome=entry.outcome,
            reason=entry.reason,
            exception=entry.exception,
            operation_id=job.operation.id,
            final=final,
            trace=entry.trace,
            failure=entry.failure_class,
        )

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        entry = FailureEntry.of(exc)
        if final and not entry.awaiting_llm:
            metrics.refresh_failures_total.labels(failure_class=entry.failure_class.name).inc()


def _observe(started: float, outcome: str, mode: str) -> None:
    metrics.refreshes_total.labels(outcome=outcome).inc()
    metrics.refresh_duration_seconds.labels(outcome=outcome, mode=mode).observe(
        time.monotonic() - started
    )
