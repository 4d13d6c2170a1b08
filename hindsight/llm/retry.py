"""Which provider errors are worth another attempt, and how long to wait before it.

Shared by the LLM gateway and the OpenAI-compatible embedder so both retry the same things:
rate limits (429), server errors (5xx), timeouts of a single request and connection failures.
Everything else (400, 401, 404, 422, …) is the caller's mistake and fails at once.
"""

from __future__ import annotations

import random

import openai

BASE_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 2.0


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def backoff_seconds(attempt: int) -> float:
    """Full jitter over a short exponential ceiling: attempt 1 waits up to 0.2 s, then 0.4 s, …"""
    ceiling = min(MAX_BACKOFF_SECONDS, BASE_BACKOFF_SECONDS * (2 ** max(0, attempt - 1)))
    return random.uniform(ceiling / 2, ceiling)
