"""The reflect loop's answer and the outcome it allows — all a full refresh is, and the first
half of a delta refresh.

``gather`` runs the reflect agent loop under the attempt's deadline
(docs/behaviour.md#the-wall-timeout; in delta mode over the window ``(watermark, cutoff]`` only,
mental models whatever their age); ``decide`` turns its answer into an outcome with the guards: an
empty answer fails, one citing nothing never overwrites (docs/behaviour.md#never-lose-a-document).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from hindsight.infra.llm import Deadline
from hindsight.infra.vocabulary import BASED_ON_KEYS, RefreshFailureReason, RefreshOutcome
from mentalmodels.reflect import RetrievalError, reflect_run
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.failures import GATHER, LLM_FAILURES, llm_failure, refused
from mentalmodels.refresh.records import Outcome, Plan

NOTHING_CITED = (
    "The reflect loop answered without citing any memory or mental model, so the document "
    "was left as it is and only the watermark advanced."
)


def gather(plan: Plan, attempt: RefreshAttempt) -> Any:
    """The reflect loop's answer; what it read and called goes into the attempt's record."""
    try:
        attempt.check()
        result = reflect_run(
            bank_id=plan.model.bank_id,
            query=plan.model.source_query,
            budget=plan.budget,
            max_tokens=plan.model.max_tokens,
            scope=plan.scope,
            cutoff=plan.cutoff,
            updated_after=plan.window_after,
            exclude_mental_model_ids=plan.exclude_ids,
            include_mental_models=not plan.exclude_mental_models,
            response_schema=None,
            deadline=Deadline(max(attempt.remaining(), 0.001)),
            observations_max_tokens=(plan.model.trigger or {}).get(
                "reflect_search_observations_max_tokens"
            ),
        )
    except RetrievalError as exc:
        _directives_of_partial(exc, attempt)
        raise refused(f"retrieval failed: {exc}", outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                      reason=RefreshFailureReason.RETRIEVAL_FAILED) from exc
    except LLM_FAILURES as exc:
        _directives_of_partial(exc, attempt)
        raise llm_failure(exc, step=GATHER, limit=attempt.limit) from exc
    attempt.directives = list(result.directives)
    attempt.add_usage(result.usage)
    attempt.llm_calls.extend(result.llm_calls)
    attempt.tool_calls.extend(result.tool_calls)
    attempt.tool_outputs.extend(getattr(result, "tool_outputs", []) or [])
    attempt.warnings.extend(result.warnings)
    try:
        attempt.check()
    except TimeoutError as exc:
        raise llm_failure(exc, step=GATHER, limit=attempt.limit) from exc
    return result


def _directives_of_partial(exc: BaseException, attempt: RefreshAttempt) -> None:
    """A failed loop's trace still says which directives its prompt carried."""
    partial = getattr(exc, "reflect_partial", None)
    attempt.directives = list(getattr(partial, "directives", None) or [])


def normalise_based_on(based_on: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    based_on = based_on or {}
    return {key: list(based_on.get(key) or []) for key in BASED_ON_KEYS}


def decide(plan: Plan, result: Any, watermark: datetime | None) -> Outcome:
    current = plan.model.content or ""
    candidate = (result.text or "").strip()
    based_on = normalise_based_on(result.based_on)
    retrieved = Counter(ref.fact_type for ref in result.memories_read)
    models_seen = len(result.mental_models_used or [])
    if models_seen:
        retrieved["mental-models"] += models_seen
    # Directives are applied, not cited: they ground no document on their own.
    cited_keys = [k for k in BASED_ON_KEYS if k != "directives"]
    used = Counter({k: len(based_on[k]) for k in cited_keys if based_on[k]})
    cited = any(based_on[k] for k in cited_keys)
    if not candidate:
        raise refused(
            "the reflect loop produced an empty answer; the document was left as it is",
            outcome=RefreshOutcome.REFRESH_FAILED_EMPTY_CANDIDATE,
            reason=RefreshFailureReason.EMPTY_CANDIDATE,
        )
    if not cited:
        # docs/behaviour.md#never-lose-a-document: nothing relevant is an answer, but not one that
        # may replace a document.
        return Outcome(
            outcome=RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS, content=current, candidate=candidate,
            watermark=watermark, based_on=based_on, mental_models=[],
            reflected=True, facts_retrieved=dict(retrieved), facts_used=dict(used),
        )
    return Outcome(
        outcome=RefreshOutcome.CONTENT_UNCHANGED if candidate == current
        else RefreshOutcome.CONTENT_WRITTEN,
        content=candidate, candidate=candidate, watermark=watermark, based_on=based_on,
        mental_models=list(result.mental_models_used or []), reflected=True,
        facts_retrieved=dict(retrieved), facts_used=dict(used),
    )
