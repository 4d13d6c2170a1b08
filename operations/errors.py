"""Exceptions a handler raises (or meets) to tell the engine how an attempt ended."""

from __future__ import annotations

from typing import Any


class FenceLost(Exception):
    """The job no longer holds its key's fence: a newer claim or an edit superseded it.

    Raised by ``Job.check_fence`` / ``Job.finishing``; nothing in that transaction is written.
    The engine ends the operation ``cancelled`` (superseded) if it still carries the job's fence.
    """


class OperationFailure(Exception):
    """A failed attempt with a recorded message (and optional ``details`` / ``result_metadata``).

    ``retryable=False`` fails the operation at once, without retries.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        details: dict[str, Any] | None = None,
        result_metadata: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.details = details
        self.result_metadata = result_metadata


class WallTimeout(OperationFailure):
    """The handler ran past its wall timeout: a failed (retryable) attempt."""


class AttemptInterrupted(OperationFailure):
    """An attempt cut short by ``cause`` (a timeout, a soft time limit, a bug), raised again by
    a handler that adds what it knows about the attempt (a subclass's own attributes).

    Recorded exactly as ``cause`` would be: its message (an ``OperationFailure``'s own, else
    ``"<type>: <text>"``), whether it may be retried, its ``details`` and ``result_metadata``;
    the engine looks at ``cause`` where it tells causes apart (its wall timeout).
    """

    def __init__(self, cause: Exception):
        failure = cause if isinstance(cause, OperationFailure) else None
        super().__init__(
            failure.message if failure else f"{type(cause).__name__}: {cause}",
            retryable=failure.retryable if failure else True,
            details=failure.details if failure else None,
            result_metadata=failure.result_metadata if failure else None,
        )
        self.cause = cause


class WorkerLost(OperationFailure):
    """Recovery found the operation's worker silent past the heartbeat threshold."""


def requested_wait_seconds(exc: BaseException | None) -> float | None:
    """How long the service that failed an attempt asked to be left alone: the first
    ``retry_after`` (seconds) on ``exc`` or what it was raised from (an LLM provider's
    ``Retry-After``). The engine's next retry waits at least that long."""
    seen: list[BaseException] = []
    node = exc
    while node is not None and all(node is not other for other in seen):
        seen.append(node)
        wait = getattr(node, "retry_after", None)
        if isinstance(wait, (int, float)) and not isinstance(wait, bool):
            return float(wait)
        node = node.cause if isinstance(node, AttemptInterrupted) else node.__cause__
    return None
