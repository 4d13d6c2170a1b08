"""A refresh failure's class — transient or permanent — and the backoff of a model's automatic
refreshes after transient ones (the LLM down).

``failure_class(exc)`` reads what ended a failed attempt (the exception and its causes):

- **transient** — the same request may succeed later unchanged: the provider answered 429 or
  5xx, did not answer (connection error), or the call or the attempt ran out of time (the
  gateway's timeout, the refresh's wall time, the task's soft limit); also a lost worker, a
  database read that failed (``retrieval_failed``) and an embedder that failed;
- **permanent** — anything else: the provider refused the request or the credentials (400,
  401, 403, 404, 422), an answer that cannot be used (not JSON, schema violated, an empty or
  uncited candidate, delta operations that cannot be applied, structured output that fails its
  schema), a bug.

After the last retry a permanent failure pauses the model (docs/behaviour.md#retries-and-the-pause,
as before); a transient one does not. A refresh operation whose last attempt failed transiently does
not pause its model: the next trigger (a retain in scope, a cron fire) may refresh it once the LLM
answers again. So that an outage is not hammered, each such failure in a row
(``MentalModel.refresh_failure_streak``, reset by a success) pushes the model's automatic refreshes
back to ``auto_refresh_not_before``:

    wait(n) = max(min(MAX, BASE × 2^(n−1)), Retry-After)

with ``BASE`` = ``HINDSIGHT_API_MENTAL_MODEL_FAILURE_BACKOFF_SECONDS`` (60) and ``MAX`` =
``…_MAX_SECONDS`` (3600); the provider's ``Retry-After`` (capped at a day by the gateway) wins
when longer. An automatic trigger inside that window is parked until it ends (one parked
operation per key, as for the rate floor; later triggers fold in), and the automatic
refresh already queued behind the failed one is parked the same way. A manual refresh ignores
it and runs at once.

The bound, per model, over an outage of any length ``T``: each operation costs at most
``R = (1 + LLM_MAX_RETRIES) × (1 + WORKER_MAX_RETRIES)`` requests (12 with the defaults), and
operations start at most once per ``wait(n)``, so the model costs at most
``R × (k + T / MAX)`` requests, where ``k = 1 + log2(MAX / BASE)`` (7 with the defaults) counts
the waits shorter than ``MAX`` — with the defaults 12 × (7 + hours of outage) requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError

from hindsight.infra.embeddings import EmbeddingError
from hindsight.infra.llm import LLMError
from hindsight.infra.vocabulary import RefreshFailureReason
from mentalmodels.models import MentalModel
from mentalmodels.refresh.errors import RefreshFailed
from operations.errors import AttemptInterrupted, WallTimeout, WorkerLost

# ``result_metadata["parked_by"]["reason"]`` of an automatic refresh waiting out the backoff.
PARKED_BY_FAILURE_BACKOFF = "failure_backoff"
TRANSIENT = "transient"
PERMANENT = "permanent"
# What ends an attempt for a while, not for good (besides an LLM error that says it is).
_TRANSIENT_CAUSES = (WallTimeout, WorkerLost, SoftTimeLimitExceeded, TimeoutError, DatabaseError,
                     EmbeddingError)


@dataclass(frozen=True)
class FailureClass:
    """A failed attempt's class and, when the provider said, how long it asked to wait."""

    transient: bool
    retry_after: float | None = None

    @property
    def name(self) -> str:
        return TRANSIENT if self.transient else PERMANENT


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from (``AttemptInterrupted.cause``, ``__cause__``)."""
    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and all(node is not seen for seen in chain):
        chain.append(node)
        node = node.cause if isinstance(node, AttemptInterrupted) else node.__cause__
    return chain


def failure_class(exc: BaseException) -> FailureClass:
    """The class of the failure ``exc`` ended an attempt with (module docstring)."""
    for node in _causes(exc):
        if isinstance(node, LLMError):
            return FailureClass(transient=node.transient, retry_after=node.retry_after)
        if isinstance(node, _TRANSIENT_CAUSES) or (isinstance(node, RefreshFailed) and (
                node.timed_out or node.failure_reason == RefreshFailureReason.RETRIEVAL_FAILED)):
            return FailureClass(transient=True)
    return FailureClass(transient=False)


# What a success resets of a model's failure record (beside ``last_refresh_failed_at``).
FAILURE_FIELDS = ("last_refresh_failure_transient", "refresh_failure_streak",
                  "auto_refresh_not_before")


def failure_record_clear(model: MentalModel) -> None:
    """A refresh succeeded: no pause, no streak, no backoff (the caller saves FAILURE_FIELDS)."""
    model.last_refresh_failure_transient = False
    model.refresh_failure_streak = 0
    model.auto_refresh_not_before = None


def failure_backoff_seconds(*, streak: int, retry_after: float | None = None) -> float:
    """How long automatic refreshes wait after the ``streak``-th transient failure in a row."""
    cfg = settings.HINDSIGHT
    grown = cfg.mental_model_failure_backoff_seconds * (2 ** min(max(streak, 1) - 1, 30))
    return max(min(cfg.mental_model_failure_backoff_max_seconds, grown), retry_after or 0.0)
