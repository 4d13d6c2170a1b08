"""Values the LLM gateway hands back: usage, tool calls, results, the deadline, the errors."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


class LLMError(Exception):
    """An LLM call failed; ``attempts`` is how many HTTP requests it made.

    ``transient``: whether the same request may succeed later unchanged (the provider is down,
    overloaded or slow) — as opposed to one it refused or answered unusably, which will fail
    the same way until something is changed. ``retry_after``: the seconds the provider asked
    the caller to wait (its ``Retry-After`` header), when it said."""

    def __init__(self, message: str, *, attempts: int = 0, retry_after: float | None = None):
        super().__init__(message)
        self.attempts = attempts
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return False


class LLMTimeout(LLMError):
    """The call chain's deadline (or the per-request timeout on the last attempt) ran out."""

    @property
    def transient(self) -> bool:
        return True


class LLMOutputError(LLMError):
    """The model answered, but not in a usable way (not JSON, schema violated, truncated)."""


class LLMCutOff(LLMOutputError):
    """Every answer stopped at the token limit (``finish_reason: length``) before it was whole.

    Transient: a cut-off answer is asked again within the call (with a doubled budget when the
    caller set one), and a call whose every answer was cut off may be whole on a later try."""

    @property
    def transient(self) -> bool:
        return True


class LLMProviderError(LLMError):
    """The provider refused or failed the request (HTTP error, connection error)."""

    def __init__(self, message: str, *, attempts: int = 0, status_code: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message, attempts=attempts, retry_after=retry_after)
        self.status_code = status_code

    @property
    def transient(self) -> bool:
        """No status (a connection error), 429 and 5xx: the provider may answer later; any
        other status (400, 401, 403, 404, 422, …) refused the request as it is."""
        return is_transient_status(self.status_code)


class LLMToolsUnsupported(LLMProviderError):
    """The model refused a request carrying tools (a 400 saying it does not support them).

    The gateway remembers it for the server and model (``LLMGateway.tools_supported``), so a
    caller with a tool-less way of working takes it without asking again."""


def is_transient_status(status_code: int | None) -> bool:
    """The one rule for an HTTP status from the provider (None: no answer at all)."""
    return status_code is None or status_code == 429 or status_code >= 500


@dataclass(frozen=True)
class Usage:
    """Token counts in the client's wire shape (``usage{input_tokens, …}``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    thoughts_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            thoughts_tokens=self.thoughts_tokens + other.thoughts_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_openai(cls, usage: Any) -> Usage:
        if usage is None:
            return cls()
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        total = int(getattr(usage, "total_tokens", 0) or 0) or prompt + completion
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        completion_details = getattr(usage, "completion_tokens_details", None)
        return cls(
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=total,
            cached_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
            thoughts_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0),
        )


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. When its arguments are not a JSON object,
    ``arguments`` is ``{}`` and ``arguments_error`` says why (the caller can tell the model)."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None


@dataclass(frozen=True)
class ChatResult:
    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    duration_ms: int
    # The assistant message to append to the conversation before the tool results.
    message: dict[str, Any]
    finish_reason: str | None = None
    model: str = ""
    attempts: int = 1


@dataclass(frozen=True)
class StructuredResult:
    data: Any
    usage: Usage
    duration_ms: int
    # The structured-output step that answered: "json_schema" (the server enforces the schema),
    # "json_object" (JSON mode, the schema in the prompt) or "prompt" (the schema in the prompt
    # alone, no response_format).
    mode: str = "json_schema"
    attempts: int = 1


@dataclass(frozen=True)
class LLMCallRecord:
    """One logical call, for traces: what it was for, how long, what it cost, how it ended."""

    purpose: str
    model: str
    duration_ms: int
    usage: Usage
    tool_calls: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: int = 1
    kind: str = "chat"  # or "structured"

    def as_dict(self) -> dict[str, Any]:
        return {
            "purpose": self.purpose,
            "scope": self.purpose,  # the wire's trace.llm_calls[].scope
            "model": self.model,
            "kind": self.kind,
            "duration_ms": self.duration_ms,
            "usage": self.usage.as_dict(),
            "tool_calls": list(self.tool_calls),
            "error": self.error,
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class LLMRequestEvent:
    """One HTTP request to the provider (one attempt of a call), for the request log."""

    purpose: str
    kind: str
    model: str
    attempt: int
    started_at: datetime
    duration_ms: int
    usage: Usage
    request: dict[str, Any]
    response: Any
    error: str | None
    # A structured call's step for this request ("json_schema", "json_object", "prompt"); "" for
    # a chat request.
    structured_step: str = ""
    provider: str = "openai"


class Deadline:
    """A point in (monotonic) time shared by a chain of calls; each call gets what is left."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    @classmethod
    def never(cls) -> Deadline:
        return cls(math.inf)

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._end

    def within(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now, but never later than this one."""
        child = Deadline(seconds)
        child._end = min(child._end, self._end)
        return child

    def __repr__(self) -> str:
        return f"Deadline(remaining={self.remaining():.3f}s)"
