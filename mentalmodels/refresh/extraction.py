"""Structured output (docs/behaviour.md#structured-output): when the trigger has a
``response_schema``, the final document is read once more by the LLM into a JSON object, validated
with jsonschema. An answer that does not match, or none at all, fails the attempt
(``structured_output_failed``); the document is not written without it."""

from __future__ import annotations

import time

import jsonschema

from hindsight.infra.llm import Deadline, get_llm
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.failures import LLM_FAILURES, STRUCTURED_OUTPUT, llm_failure, refused
from mentalmodels.refresh.records import Outcome, Plan

_EXTRACT_PROMPT = (
    "You extract structured data from a document. Read the document and answer with a JSON "
    "object that matches the given schema exactly. Use only what the document says; when it "
    "says nothing about a required field, give the most faithful empty value of its type."
)


def extract_structured_output(plan: Plan, decided: Outcome, attempt: RefreshAttempt) -> None:
    """Fill ``decided.structured_output`` from the final document, validated."""
    schema = plan.response_schema
    if not schema or not decided.content.strip():
        return

    try:
        attempt.check()
        started = time.monotonic()
        answer = get_llm(bank_id=plan.model.bank_id).structured(
            [
                {"role": "system", "content": _EXTRACT_PROMPT},
                {"role": "user", "content": f"Document:\n\n{decided.content}"},
            ],
            schema=schema,
            name="structured_output",
            # A user's schema need not meet strict mode's rules (every key required, no
            # additional properties); jsonschema validates the answer either way.
            strict=False,
            deadline=Deadline(max(attempt.remaining(), 0.001)),
            purpose="mental_model_structured_output",
        )
        attempt.add_usage(answer.usage)
        attempt.llm_calls.append(
            {"scope": "structured_output",
             "duration_ms": int(getattr(answer, "duration_ms", 0) or (time.monotonic() - started) * 1000)}
        )
        jsonschema.validate(answer.data, schema)
    except jsonschema.ValidationError as exc:
        raise refused(f"structured output does not match trigger.response_schema: {exc.message}",
                      outcome=STRUCTURED_OUTPUT.outcome, reason=STRUCTURED_OUTPUT.reason) from exc
    except LLM_FAILURES as exc:
        raise llm_failure(exc, step=STRUCTURED_OUTPUT, limit=attempt.limit) from exc
    decided.structured_output = answer.data
    decided.structured_extracted = True
