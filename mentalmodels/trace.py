"""What one refresh records about itself: its clock (RF-9), usage, tool and LLM calls, and the
trace stored on the model, the history entry and the dry run (bounded in size).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from mentalmodels.refresh_types import RefreshMode

if TYPE_CHECKING:
    from mentalmodels.refresh_types import Plan

TRACE_MAX_TOOL_CALLS = 64
TRACE_MAX_STRING = 400
TRACE_MAX_WARNINGS = 20


class RefreshClock:
    """The wall timeout of one refresh (RF-9) and the usage/trace collected along the way."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.limit = settings.HINDSIGHT.reflect_wall_timeout_seconds
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "cached_tokens": 0, "thoughts_tokens": 0}
        self.llm_calls: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.tool_outputs: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.plan: Plan | None = None
        # A delta refresh's operations so far, {"applied": [...], "skipped": [...]} (RF-11).
        self.delta_operations: dict[str, list[dict[str, Any]]] | None = None

    def remaining(self) -> float:
        return self.limit - (time.monotonic() - self.started)

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def check(self) -> None:
        if self.remaining() <= 0:
            raise TimeoutError(
                f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT ({self.limit:g} s)"
            )

    def add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, 0)
            self.usage[key] += int(value or 0)


def iso_z(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
    clock: RefreshClock,
    *,
    outcome: str,
    failure_reason: str | None = None,
    error: str | None = None,
    with_outputs: bool = False,
) -> dict[str, Any]:
    tool_calls = []
    for index, call in enumerate(clock.tool_calls[:TRACE_MAX_TOOL_CALLS]):
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
            outputs = clock.tool_outputs
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
            for i, c in enumerate(clock.llm_calls[:TRACE_MAX_TOOL_CALLS])
        ],
        "delta_operations": bounded_ops(clock.delta_operations),
        "retraction": None,
        "usage": dict(clock.usage),
        "duration_ms": clock.elapsed_ms(),
        "warnings": [_bounded(w) for w in clock.warnings[:TRACE_MAX_WARNINGS]],
    }
    if failure_reason is not None:
        trace["failure_reason"] = failure_reason
        trace["error"] = _bounded(error or "")
    return trace
