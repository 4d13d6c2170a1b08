"""The ``refresh_mental_model`` operation handler: runs the pipeline for a claimed job and
records what a failed attempt leaves behind (failure entry, trace, pause after the last one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from mentalmodels.awaiting_llm import mental_model_await_llm, refresh_failed_for_missing_llm
from mentalmodels.models import MentalModel
from mentalmodels.pipeline import OPERATION_TYPE, RefreshFailed, refresh_run
from mentalmodels.services import mental_model_record_failure
from operations.errors import OperationFailure

if TYPE_CHECKING:
    from operations.jobs import Job


class RefreshMentalModelHandler:
    operation_type = OPERATION_TYPE

    @property
    def wall_timeout_seconds(self) -> float:
        # RF-9: the engine's alarm is the backstop; the pipeline's own deadline (LLM calls)
        # normally ends a slow refresh first, with a precise failure record.
        return settings.HINDSIGHT.reflect_wall_timeout_seconds + 1.0

    def run(self, job: Job) -> None:
        # What an attempt cut short from outside (wall timeout, crash) reports on the operation.
        job.details = {
            "operation_type": OPERATION_TYPE,
            "outcome": "refresh_failed_error",
            "failure_reason": "unexpected_error",
        }
        mental_model_id = job.operation.mental_model_id
        if mental_model_id is None:  # not one of ours: no retry will give it a model
            raise OperationFailure("refresh operation without a mental_model_id", retryable=False)
        refresh_run(
            bank_id=job.operation.bank_id,
            mental_model_id=mental_model_id,
            mode=(job.payload or {}).get("mode"),
            automatic=job.operation.automatic,
            job=job,
        )

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        model = (
            MentalModel.objects.filter(
                bank_id=job.operation.bank_id, mental_model_id=job.operation.mental_model_id
            )
            .only("uid")
            .first()
        )
        if model is None:
            return
        if refresh_failed_for_missing_llm(exc):
            # A configuration not made yet: recorded, not paused, caught up once there is one.
            mental_model_await_llm(model_uid=model.uid, exception=f"{type(exc).__name__}: {exc}",
                                   operation_id=job.operation.id)
            return
        if isinstance(exc, RefreshFailed):
            reason, trace = exc.failure_reason, exc.trace
        else:
            # Timeouts enforced by the engine, lost workers and bugs: no finer reason to give.
            # The pipeline attached the trace so far (a lost worker leaves none).
            reason, trace = "unexpected_error", getattr(exc, "refresh_trace", None)
        mental_model_record_failure(
            model_uid=model.uid,
            reason=reason,
            exception=f"{type(exc).__name__}: {exc}",
            operation_id=job.operation.id,
            final=final,
            trace=trace,
        )
