"""One refresh attempt's record: its deadline (docs/behaviour.md#the-wall-timeout), the plan it
made, what it read and called (tool and LLM calls, their outputs), what it spent (usage), what it
applied (delta operations), what it retracted, its warnings — and ``record_on``, the one writer of
that record onto the operation (``details`` and ``result_metadata``), however the attempt ends.

The dry run keeps the same record and renders it instead (``mentalmodels.refresh.trace.build_trace``
bounds what a trace keeps of it).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django.conf import settings

from hindsight.infra.vocabulary import BASED_ON_KEYS
from mentalmodels.refresh.records import refresh_details
from mentalmodels.refresh.trace import bounded_ops

if TYPE_CHECKING:
    from mentalmodels.models import MentalModel
    from mentalmodels.refresh.records import Outcome, Plan
    from mentalmodels.refresh.retraction import Retraction
    from operations.jobs import Job

class RefreshAttempt:
    """What one refresh attempt did so far, and the wall time it has left."""

    def __init__(self, model: MentalModel | None = None) -> None:
        self.model = model
        self.started = time.monotonic()
        self.limit = settings.HINDSIGHT.reflect_wall_timeout_seconds
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "cached_tokens": 0, "thoughts_tokens": 0}
        self.llm_calls: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.tool_outputs: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.plan: Plan | None = None
        # The directives the reflect loop's prompt carried, {id, name, content}, highest
        # priority first (docs/behaviour.md#directives).
        self.directives: list[dict[str, Any]] = []
        # A delta refresh's operations so far, {"applied": [...], "skipped": [...]}
        # (docs/behaviour.md#the-trace).
        self.delta_operations: dict[str, list[dict[str, Any]]] | None = None
        # A delta refresh's retracted facts and what became of them
        # (docs/behaviour.md#retracted-facts).
        self.retraction: Retraction | None = None

    # -- the deadline (docs/behaviour.md#the-wall-timeout) ---------------------------------------

    def remaining(self) -> float:
        return self.limit - (time.monotonic() - self.started)

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def check(self) -> None:
        if self.remaining() <= 0:
            raise TimeoutError(
                f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT ({self.limit:g} s)"
            )

    # -- what it spent ------------------------------------------------------------------------------

    def add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, 0)
            self.usage[key] += int(value or 0)

    # -- the record on the operation ----------------------------------------------------------------

    def record_on(
        self,
        job: Job,
        *,
        outcome: str,
        failure_reason: str | None = None,
        decided: Outcome | None = None,
    ) -> None:
        """Write how the attempt ended onto ``job``: the client's ``details`` and our
        ``result_metadata`` (``decided``: the result a completed refresh applies). The job adds
        its LLM tally when it stores them (``Job.record``)."""
        job.details = refresh_details(outcome=outcome, failure_reason=failure_reason)
        metadata: dict[str, Any] = {
            "outcome": outcome,
            "failure_reason": failure_reason,
            "effective_mode": self.plan.effective_mode if self.plan else None,
            **_delta_metadata(self.delta_operations),
            "retraction": self.retraction.as_json() if self.retraction else None,
        }
        if self.model is not None:
            metadata |= {"name": self.model.name, "mental_model_id": self.model.mental_model_id}
        if decided is not None:
            metadata |= {
                "content_len": len(decided.content),
                "based_on_counts": {key: len(decided.based_on.get(key) or [])
                                    for key in BASED_ON_KEYS},
                "populated_content": bool(decided.content),
                "mode_fallback_reason": self.plan.mode_fallback_reason if self.plan else None,
                "reflected": decided.reflected,
            }
        job.result_metadata = {**job.result_metadata, **metadata}


def _delta_metadata(ops: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any]:
    return {
        "delta_ops_applied": len(ops["applied"]) if ops else 0,
        "delta_ops_skipped": len(ops["skipped"]) if ops else 0,
        "delta_operations": bounded_ops(ops),
    }
