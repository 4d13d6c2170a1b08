"""How a refresh attempt fails — the one place that decides it.

Every refusal a refresh raises is a ``RefreshFailed`` built here: the client's outcome and
failure reason, the message, whether a retry may help, whether the wall time ran out.

- ``llm_failure``: the one mapping of what an LLM call raised (a provider error, the gateway's
  timeout, the attempt's own deadline, no LLM configured) to the refusal, per ``LLMStep`` —
  where in the refresh the LLM was asked decides what its failure means there;
- ``retrieval_guarded``: a database read that fails is ``retrieval_failed``
(docs/behaviour.md#a-failed-lookup-is-a-failure);
- ``FailureEntry.of``: what the failure entry (history, the trace kept with ``keep_trace``) of
  any failed attempt records — a refusal, an interrupted attempt, a lost worker — and its class
  (``mentalmodels.refresh.failure_class``: transient or permanent, what the last failure does).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.llm import LLMError, LLMTimeout
from hindsight.infra.vocabulary import RefreshFailureReason, RefreshOutcome
from mentalmodels.refresh.awaiting_llm import llm_missing_message, refresh_failed_for_missing_llm
from mentalmodels.refresh.errors import RefreshFailed, RefreshInterrupted
from mentalmodels.refresh.failure_class import FailureClass, failure_class

# What a failed delta refresh left alone (every one of its refusals says so).
DELTA_UNTOUCHED = "; the document, its structure and the window were left as they are"


def refused(
    message: str, *, outcome: str, reason: str, retryable: bool = True, timed_out: bool = False
) -> RefreshFailed:
    return RefreshFailed(message, outcome=outcome, failure_reason=reason, retryable=retryable,
                         timed_out=timed_out)


@dataclass(frozen=True)
class LLMStep:
    """A step of the refresh that asks the LLM, and what an LLM error means in it."""

    says: str  # how a provider error is reported
    outcome: str  # the outcome and reason of a provider error here
    reason: str
    suffix: str = ""
    # What a timeout was waiting for; None: a timeout fails the step like a provider error
    # (structured output: the document it would have come from is not the failure,
    # docs/behaviour.md#structured-output).
    waiting_for: str | None = None


GATHER = LLMStep(
    waiting_for="the LLM", says="LLM error",
    outcome=RefreshOutcome.REFRESH_FAILED_ERROR, reason=RefreshFailureReason.UNEXPECTED_ERROR,
)
DELTA_OPERATIONS = LLMStep(
    waiting_for="the delta operations", says="the delta operations call failed",
    outcome=RefreshOutcome.REFRESH_FAILED_DELTA_NOT_APPLIED,
    reason=RefreshFailureReason.DELTA_OPS_FAILED, suffix=DELTA_UNTOUCHED,
)
STRUCTURED_OUTPUT = LLMStep(
    says="structured output could not be produced",
    outcome=RefreshOutcome.REFRESH_FAILED_STRUCTURED_OUTPUT,
    reason=RefreshFailureReason.STRUCTURED_OUTPUT_FAILED,
)

# What an LLM call in a refresh may raise (``TimeoutError``: the attempt's own deadline).
LLM_FAILURES = (LLMError, LLMNotConfigured, TimeoutError)


def llm_failure(exc: Exception, *, step: LLMStep, limit: float) -> RefreshFailed:
    """The refusal for ``exc`` raised by an LLM call of ``step`` (``limit``: the wall time)."""
    if isinstance(exc, LLMNotConfigured):
        # A configuration not made yet: no retry on a timer will make it (awaiting_llm).
        return refused(llm_missing_message(exc), outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                       reason=RefreshFailureReason.UNEXPECTED_ERROR, retryable=False)
    if isinstance(exc, (LLMTimeout, TimeoutError)) and step.waiting_for is not None:
        message = str(exc) if not isinstance(exc, LLMTimeout) else (
            f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT ({limit:g} s) "
            f"waiting for {step.waiting_for}: {exc}")
        return refused(message, outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                       reason=RefreshFailureReason.UNEXPECTED_ERROR, timed_out=True)
    return refused(f"{step.says}: {type(exc).__name__}: {exc}{step.suffix}",
                   outcome=step.outcome, reason=step.reason)


@contextmanager
def retrieval_guarded(step: str) -> Iterator[None]:
    """docs/behaviour.md#a-failed-lookup-is-a-failure: a database read of the snapshot or the
    precheck that raises is retrieval_failed."""
    try:
        yield
    except DatabaseError as exc:
        raise refused(f"retrieval failed ({step}): {exc}",
                      outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                      reason=RefreshFailureReason.RETRIEVAL_FAILED) from exc


@dataclass(frozen=True)
class FailureEntry:
    """What the failure entry of a failed attempt records."""

    outcome: str
    reason: str
    exception: str  # "<type>: <text>" of what ended the attempt
    trace: dict[str, Any] | None
    awaiting_llm: bool  # failed only for want of an LLM: recorded, not paused (awaiting_llm)
    # Transient (not paused, automatic refreshes back off) or permanent (paused after the last
    # retry): mentalmodels.refresh.failure_class.
    failure_class: FailureClass

    @classmethod
    def of(cls, exc: BaseException) -> FailureEntry:
        # An interrupted refresh is recorded under what interrupted it; its trace so far came
        # with it. A lost worker (any other exception) leaves no trace.
        shown = exc.cause if isinstance(exc, RefreshInterrupted) else exc
        if isinstance(exc, RefreshFailed):
            outcome, reason, trace = exc.outcome, exc.failure_reason, exc.trace
        else:
            outcome = RefreshOutcome.REFRESH_FAILED_ERROR
            reason = RefreshFailureReason.UNEXPECTED_ERROR
            trace = exc.trace if isinstance(exc, RefreshInterrupted) else None
        return cls(outcome=outcome, reason=reason, exception=f"{type(shown).__name__}: {shown}", trace=trace,
                   awaiting_llm=refresh_failed_for_missing_llm(exc),
                   failure_class=failure_class(exc))
