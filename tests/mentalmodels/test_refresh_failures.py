"""``mentalmodels.refresh.failures.llm_failure``: the one mapping of what an LLM call of a refresh
raised to the refusal the attempt records, per step."""

from __future__ import annotations

import pytest

from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.llm import LLMOutputError, LLMProviderError, LLMTimeout
from mentalmodels.refresh.awaiting_llm import refresh_failed_for_missing_llm
from mentalmodels.refresh.failures import (
    DELTA_OPERATIONS,
    GATHER,
    STRUCTURED_OUTPUT,
    FailureEntry,
    llm_failure,
)

TIMEOUTS = [LLMTimeout("slow"), TimeoutError("refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT (2 s)")]


@pytest.mark.parametrize(("step", "outcome", "reason"), [
    (GATHER, "refresh_failed_error", "unexpected_error"),
    (DELTA_OPERATIONS, "refresh_failed_delta_not_applied", "delta_ops_failed"),
    (STRUCTURED_OUTPUT, "refresh_failed_structured_output", "structured_output_failed"),
])
def test_a_provider_error_fails_with_the_steps_own_outcome_and_is_retryable(step, outcome, reason):
    failure = llm_failure(LLMProviderError("HTTP 400: prompt too large"), step=step, limit=2.0)
    assert (failure.outcome, failure.failure_reason) == (outcome, reason)
    assert failure.retryable and not failure.timed_out
    assert "LLMProviderError: HTTP 400: prompt too large" in failure.message


@pytest.mark.parametrize("exc", TIMEOUTS)
@pytest.mark.parametrize("step", [GATHER, DELTA_OPERATIONS])
def test_a_timeout_of_the_loop_or_the_ops_call_is_a_timed_out_unexpected_error(step, exc):
    failure = llm_failure(exc, step=step, limit=2.0)
    assert (failure.outcome, failure.failure_reason) == ("refresh_failed_error", "unexpected_error")
    assert failure.timed_out and failure.retryable
    assert "HINDSIGHT_API_REFLECT_WALL_TIMEOUT (2 s)" in failure.message


@pytest.mark.parametrize("exc", TIMEOUTS)
def test_a_timeout_of_the_structured_output_fails_the_extraction_not_the_refresh(exc):
    failure = llm_failure(exc, step=STRUCTURED_OUTPUT, limit=2.0)
    assert failure.failure_reason == "structured_output_failed" and not failure.timed_out


@pytest.mark.parametrize("step", [GATHER, DELTA_OPERATIONS, STRUCTURED_OUTPUT])
def test_no_llm_configured_is_not_retried_and_awaits_one(step):
    missing = LLMNotConfigured("set HINDSIGHT_API_LLM_PROVIDER")
    try:
        raise llm_failure(missing, step=step, limit=2.0) from missing
    except Exception as raised:
        failure = raised
    assert not failure.retryable
    assert "no LLM is configured" in str(failure)
    assert refresh_failed_for_missing_llm(failure)
    assert FailureEntry.of(failure).awaiting_llm


def test_an_unreadable_answer_of_the_loop_is_an_llm_error_like_any_other():
    failure = llm_failure(LLMOutputError("not JSON"), step=GATHER, limit=2.0)
    assert failure.failure_reason == "unexpected_error" and failure.message.startswith("LLM error: ")
