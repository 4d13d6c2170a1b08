"""The ``refresh_mental_model`` operation handler: runs the pipeline for a claimed job and
records what a failed attempt leaves behind (failure entry, trace, pause after the last one) in
the engine's failure transaction, so a final failure and the pause commit together."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.conf import settings

from hindsight import metrics
from hindsight.banks.budget import budget_hold
from mentalmodels.awaiting_llm import mental_model_await_llm, refresh_failed_for_missing_llm
from mentalmodels.errors import RefreshInterrupted
from mentalmodels.failure_class import failure_class
from mentalmodels.models import MentalModel
from mentalmodels.pipeline import RefreshFailed, refresh_run
from mentalmodels.refresh_types import MentalModelOperationType, RefreshFailureReason, RefreshOutcome
from mentalmodels.services import mental_model_record_failure
from operations.errors import FenceLost, OperationFailure
from operations.registry import Hold, Pending

if TYPE_CHECKING:
    from operations.jobs import Job


class RefreshMentalModelHandler:
    operation_type = MentalModelOperationType.REFRESH

    @property
    def wall_timeout_seconds(self) -> float:
        # RF-9: the engine's alarm is the backstop; the pipeline's own deadline (LLM calls)
        # normally ends a slow refresh first, with a precise failure record.
        return settings.HINDSIGHT.reflect_wall_timeout_seconds + 1.0

    def hold(self, pending: Pending) -> Hold | None:
        # A spent bank's refreshes (automatic or not) wait for its budget to free.
        return budget_hold(pending)

    def run(self, job: Job) -> None:
        # What an attempt cut short from outside (wall timeout, crash) reports on the operation.
        job.details = {
            "operation_type": MentalModelOperationType.REFRESH,
            "outcome": RefreshOutcome.REFRESH_FAILED_ERROR,
            "failure_reason": RefreshFailureReason.UNEXPECTED_ERROR,
        }
        mental_model_id = job.operation.mental_model_id
        if mental_model_id is None:  # not one of ours: no retry will give it a model
            raise OperationFailure("refresh operation without a mental_model_id", retryable=False)
        requested_mode = (job.payload or {}).get("mode") or "full"
        started = time.monotonic()
        # The refresh's LLM requests and tokens go into result_metadata["llm"], also when the
        # attempt fails (a refused refresh carries result_metadata of its own).
        with job.llm_accounting() as tally:
            try:
                report = refresh_run(
                    bank_id=job.operation.bank_id,
                    mental_model_id=mental_model_id,
                    mode=(job.payload or {}).get("mode"),
                    automatic=job.operation.automatic,
                    job=job,
                )
            except RefreshFailed as exc:
                exc.result_metadata = {**(exc.result_metadata or {}), "llm": tally.as_dict()}
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
        # An interrupted refresh is recorded under what interrupted it.
        shown = exc.cause if isinstance(exc, RefreshInterrupted) else exc
        if refresh_failed_for_missing_llm(exc):
            # A configuration not made yet: recorded, not paused, caught up once there is one.
            mental_model_await_llm(model_uid=model.uid,
                                   exception=f"{type(shown).__name__}: {shown}",
                                   operation_id=job.operation.id)
            return
        outcome: str = RefreshOutcome.REFRESH_FAILED_ERROR
        if isinstance(exc, RefreshFailed):
            outcome, reason, trace = exc.outcome, exc.failure_reason, exc.trace
        elif isinstance(exc, RefreshInterrupted):
            # Timeouts enforced by the engine or the task, and bugs: no finer reason to give;
            # the trace so far came with it.
            reason, trace = RefreshFailureReason.UNEXPECTED_ERROR, exc.trace
        else:
            # A lost worker: no trace.
            reason, trace = RefreshFailureReason.UNEXPECTED_ERROR, None
        mental_model_record_failure(
            model_uid=model.uid,
            outcome=outcome,
            reason=reason,
            exception=f"{type(shown).__name__}: {shown}",
            operation_id=job.operation.id,
            final=final,
            trace=trace,
            failure=failure_class(exc),
        )

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        if final and not refresh_failed_for_missing_llm(exc):
            metrics.refresh_failures_total.labels(failure_class=failure_class(exc).name).inc()


def _observe(started: float, outcome: str, mode: str) -> None:
    metrics.refreshes_total.labels(outcome=outcome).inc()
    metrics.refresh_duration_seconds.labels(outcome=outcome, mode=mode).observe(
        time.monotonic() - started
    )
