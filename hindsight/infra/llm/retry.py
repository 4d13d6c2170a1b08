"""Which provider errors are worth another attempt, and how long to wait before it.

Shared by the LLM gateway and the OpenAI-compatible embedder so both retry the same things:
rate limits (429), server errors (5xx), timeouts of a single request and connection failures.
Everything else (400, 401, 404, 422, …) is the caller's mistake and fails at once.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from hindsight.infra.lazy import openai  # imported at the first use

BASE_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 2.0


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


# A provider asking for longer than this is waited for this long (then asked again).
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0


def retry_after_seconds(exc: BaseException) -> float | None:
    """The ``Retry-After`` of a provider's answer, in seconds (delta-seconds or an HTTP date;
    capped at a day), or None when it sent none or it cannot be read."""
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(MAX_RETRY_AFTER_SECONDS, max(0.0, seconds))


def backoff_seconds(attempt: int) -> float:
    """Full jitter over a short exponential ceiling: attempt 1 waits up to 0.2 s, then 0.4 s, …"""
    ceiling = min(MAX_BACKOFF_SECONDS, BASE_BACKOFF_SECONDS * (2 ** max(0, attempt - 1)))
    return random.uniform(ceiling / 2, ceiling)
