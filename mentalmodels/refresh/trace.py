"""The trace of one refresh attempt, as the model (``keep_trace``), the failure entry and the dry
run store it: what the attempt's record (``mentalmodels.refresh.attempt.RefreshAttempt``) holds,
bounded in size.

The trace reads the record through ``AttemptRecord``, the few fields it needs, so this module
sits below the attempt and never imports it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from hindsight.infra.vocabulary import RefreshMode, iso_z
from mentalmodels.refresh.records import Plan
from mentalmodels.refresh.retraction import Retraction


class AttemptRecord(Protocol):
    """What a trace reads of an attempt's record (``RefreshAttempt`` has it)."""

    tool_calls: list[dict[str, Any]]
    tool_outputs: list[dict[str, Any]]
    llm_calls: list[dict[str, Any]]
    delta_operations: dict[str, list[dict[str, Any]]] | None
    retraction: Retraction | None
    directives: list[dict[str, Any]]
    usage: dict[str, int]
    warnings: list[str]

    def elapsed_ms(self) -> int: ...

TRACE_MAX_TOOL_CALLS = 64
TRACE_MAX_STRING = 400
TRACE_MAX_WARNINGS = 20


def _bounded(value: Any, depth: int = 0) -> Any:
    """Tool inputs as the trace keeps them: short strings, short lists, shallow objects."""
    if isinstance(value, str):
        return value if len(value) <= TRACE_MAX_STRING else value[:TRACE_MAX_STRING] + "…"
    if depth >= 3:
        return None
    if isinstance(value, dict):
        return {str(k)[:64]: _bounded(v, depth + 1) for k, v in list(value.items())[:20]}
    if isinstance(value, (list, tuple)):
        return [_bounded(v, depth + 1) for v in list(value)[:20]]
    return value


def bounded_ops(ops: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any] | None:
    """Delta operations as the trace keeps them: every one, markdown cut short."""
    if ops is None:
        return None
    return {
        key: [{**_bounded({k: v for k, v in entry.items() if k != "operation"}),
               "operation": _bounded(entry.get("operation"))}
              for entry in ops.get(key, [])[:TRACE_MAX_TOOL_CALLS]]
        for key in ("applied", "skipped")
    }


def build_trace(
    plan: Plan | None,
    attempt: AttemptRecord,
    *,
    outcome: str,
    failure_reason: str | None = None,
    error: str | None = None,
    with_outputs: bool = False,
) -> dict[str, Any]:
    tool_calls = []
    for index, call in enumerate(attempt.tool_calls[:TRACE_MAX_TOOL_CALLS]):
        entry = {
            "tool": str(call.get("name") or call.get("tool") or "unknown"),
            "reason": None,
            "input": _bounded(call.get("input") or {}),
            "updated_at": iso_z(plan.window_after) if plan else None,
            "result_count": call.get("result_count"),
            "duration_ms": int(call.get("duration_ms") or 0),
            "iteration": int(call.get("iteration") or 0),
        }
        if with_outputs:
            outputs = attempt.tool_outputs
            entry["output"] = outputs[index] if index < len(outputs) else None
        tool_calls.append(entry)
    trace: dict[str, Any] = {
        "recorded_at": iso_z(datetime.now(UTC)),
        "effective_mode": plan.effective_mode if plan else RefreshMode.FULL,
        "mode_fallback_reason": plan.mode_fallback_reason if plan else None,
        "outcome": outcome,
        "tool_calls": tool_calls,
        "llm_calls": [
            {"scope": str(c.get("scope") or f"agent_{i + 1}"), "duration_ms": int(c.get("duration_ms") or 0)}
            for i, c in enumerate(attempt.llm_calls[:TRACE_MAX_TOOL_CALLS])
        ],
        # Which directives the prompts carried, by id and name (docs/behaviour.md#directives).
        "directives": [{"id": str(d.get("id")), "name": _bounded(str(d.get("name") or ""))}
                       for d in attempt.directives[:TRACE_MAX_TOOL_CALLS]],
        "delta_operations": bounded_ops(attempt.delta_operations),
        # docs/behaviour.md#retracted-facts
        "retraction": attempt.retraction.as_json() if attempt.retraction else None,
        "usage": dict(attempt.usage),
        "duration_ms": attempt.elapsed_ms(),
        "warnings": [_bounded(w) for w in attempt.warnings[:TRACE_MAX_WARNINGS]],
    }
    if failure_reason is not None:
        trace["failure_reason"] = failure_reason
        trace["error"] = _bounded(error or "")
    return trace
