"""The mental-model app's own failures: a refused refresh, what the dry run answers for it, and
what a failed reflect run answers.

``RefreshFailed`` is an ``OperationFailure`` (the engine records it as a failed attempt) that
carries the client's ``details`` and the attempt's trace (``mentalmodels.refresh.failures``
builds every one); ``RefreshInterrupted`` carries the trace of a refresh cut short from outside
or by a bug, around the exception that did it. The rest of the attempt's record is on the job
(``mentalmodels.refresh.attempt.RefreshAttempt.record_on``). The dry run's and reflect's
failures are domain errors whose class picks the HTTP status (``hindsight.infra.edge.errors``
maps them by class).
"""

from __future__ import annotations

from typing import Any

from hindsight.infra.errors import DomainError, Unavailable, UpstreamFailed, UpstreamTimedOut
from hindsight.infra.vocabulary import RefreshFailureReason
from mentalmodels.refresh.records import refresh_details
from operations.errors import AttemptInterrupted, OperationFailure


class RefreshFailed(OperationFailure):
    """A refused refresh: the client's outcome/failure_reason, the exception text, the trace."""

    def __init__(
        self,
        message: str,
        *,
        outcome: str,
        failure_reason: str,
        retryable: bool = True,
        trace: dict[str, Any] | None = None,
        timed_out: bool = False,
    ):
        super().__init__(message, retryable=retryable,
                         details=refresh_details(outcome=outcome, failure_reason=failure_reason))
        self.outcome = outcome
        self.failure_reason = failure_reason
        self.trace = trace
        # The refresh ran out of its wall time (HINDSIGHT_API_REFLECT_WALL_TIMEOUT).
        self.timed_out = timed_out


class RefreshInterrupted(AttemptInterrupted):
    """A refresh cut short by ``cause`` (the engine's wall-timeout backstop, the task's soft time
    limit, a bug): no finer reason than ``unexpected_error``, and the trace of what the attempt did
    so far (docs/behaviour.md#the-trace; None if it could not be built). The engine records it as it
    would ``cause``; the history entry names ``cause``."""

    def __init__(self, cause: Exception, *, trace: dict[str, Any] | None):
        super().__init__(cause)
        self.trace = trace


class DryRunFailed(DomainError):
    """The dry run met what would fail a real refresh (the preview enums have no failure)."""

    status_code = 502

    @classmethod
    def for_refusal(cls, exc: RefreshFailed) -> DryRunFailed:
        """The same statuses reflect answers with: a lookup that failed, a timeout, the rest."""
        kind: type[DryRunFailed] = cls
        if exc.failure_reason == RefreshFailureReason.RETRIEVAL_FAILED:
            kind = DryRunRetrievalFailed
        elif exc.timed_out:
            kind = DryRunTimedOut
        return kind(f"Dry run: a refresh would fail ({exc.outcome}, {exc.failure_reason}): {exc}")


class DryRunRetrievalFailed(DryRunFailed):
    status_code = 503


class DryRunTimedOut(DryRunFailed):
    status_code = 504


class ReflectRetrievalFailed(Unavailable):
    """A reflect run could not look (the database, the embedder): no answer, a 503."""


class ReflectLLMFailed(UpstreamFailed):
    """A reflect run's LLM call failed: a 502."""


class ReflectLLMTimedOut(UpstreamTimedOut):
    """A reflect run's LLM calls ran past ``HINDSIGHT_API_REFLECT_WALL_TIMEOUT``: a 504."""
