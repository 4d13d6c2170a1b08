"""Domain errors of our own; ``hindsight.infra.edge.errors`` maps them to HTTP in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class DomainError(Exception):
    status_code = 400

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail

    def body_extra(self) -> dict[str, Any]:
        """Keys the error body carries beside ``detail`` (none unless a subclass has some)."""
        return {}

    def headers(self) -> dict[str, str]:
        """Response headers of the error (none unless a subclass has some)."""
        return {}


class BadRequest(DomainError):
    status_code = 400


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class TooManyRequests(DomainError):
    """A limit of this service refuses the call for now (``Retry-After`` says how long)."""

    status_code = 429


class UpstreamFailed(DomainError):
    """A service this one depends on (the LLM, the embedder) answered with a failure."""

    status_code = 502


class Unavailable(DomainError):
    """A service this one depends on cannot be reached now; retrying later may succeed."""

    status_code = 503


class UpstreamTimedOut(DomainError):
    """A service this one depends on (the LLM) did not answer within the time allowed."""

    status_code = 504


class LLMNotConfigured(BadRequest):
    def __init__(self, what: str = "this call"):
        super().__init__(
            f"{what} needs an LLM: set HINDSIGHT_API_LLM_PROVIDER=openai, "
            "HINDSIGHT_API_LLM_BASE_URL, HINDSIGHT_API_LLM_API_KEY and HINDSIGHT_API_LLM_MODEL"
        )


class FieldError(DomainError):
    """A 422 naming the field (``loc``) and the rule (``msg``), in FastAPI's shape."""

    status_code = 422

    def __init__(self, loc: Sequence[str | int], msg: str, type_: str = "value_error"):
        super().__init__(msg)
        self.errors: list[dict[str, object]] = [{"loc": list(loc), "msg": msg, "type": type_}]


class FieldErrors(DomainError):
    status_code = 422

    def __init__(self, errors: list[dict[str, object]]):
        super().__init__("; ".join(str(e["msg"]) for e in errors))
        self.errors = errors
