"""Handlers by ``operation_type``: the only thing the generic engine knows about a job's work.

A handler is an object (or a class, instantiated once) with:

- ``operation_type: str``
- ``run(job) -> None`` — do the work; raise to fail the attempt (``OperationFailure`` for a
  recorded message, ``retryable=False`` to fail without retries). Write through
  ``job.finishing()`` (or ``job.complete_in_transaction()`` inside your own transaction) so the
  writes and the completion are one fenced transaction.
- optional ``wall_timeout_seconds`` — a number (or a method ``(job) -> float | None``) bounding
  ``run``; past it the attempt fails with ``WallTimeout`` (retryable). The alarm is disarmed
  when the handler enters ``job.finishing()``. Default: only the Celery soft time limit.
- optional ``on_attempt_failed_in_transaction(job, exc, *, final: bool)`` — the bookkeeping of
  a failed attempt (a failure entry, a pause after the last one), run *inside* the transaction
  that records the attempt — for a running job's failure, a sweep's recovery and a worker's
  fast recovery alike — so the operation's new state and the handler's writes commit together:
  a worker killed in between leaves both or neither. ``final`` is True when no retry follows.
  Lock order (``operations.leases``): the key's lease is already locked; the hook locks its
  own rows next, and may cancel operations of the key only through
  ``operations.queue.operations_cancel_parked``; the engine locks the operation rows after
  it. Runs in a savepoint: if it raises, its writes are rolled back (logged) and the attempt is
  still recorded. No network I/O in it.
- optional ``on_attempt_failed(job, exc, *, final: bool)`` — called after the failed attempt
  was recorded, outside the engine's transaction (also for attempts lost with a crashed worker):
  for what may be lost with a crash (notifications, metrics).
- optional ``on_cancelled(job)`` — called after the operation ended ``cancelled`` (API cancel,
  superseded by a fence bump, parked op cancelled).
- optional ``hold(pending: Pending) -> Hold | None`` — asked before a due operation is
  claimed (its key's lock held): a ``Hold`` parks it until ``Hold.until`` instead
  (``operations.queue.operation_park``: not an attempt, ``result_metadata.parked_by`` says
  why), for a limit the work must wait for (a bank's token budget). Reads only; a hold that
  raises is logged and the operation runs.
- optional ``cpu_heavy: bool`` — its work spends CPU in the worker's own process (embedding,
  vector math), not only waiting on the LLM: with ``HINDSIGHT_API_WORKER_CPU_QUEUE`` set, its
  messages go to that queue (``operations.dispatch.operation_queue``), whose workers run apart
  from the LLM-bound slots (one interpreter lock per process).

Handlers register in their app's ``AppConfig.ready``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from operations.jobs import Job


@dataclass(frozen=True)
class Pending:
    """A due operation about to be claimed, as a handler's ``hold`` sees it."""

    id: uuid.UUID
    bank_id: str
    operation_type: str
    automatic: bool


@dataclass(frozen=True)
class Hold:
    """Park the operation until ``until``; ``parked_by`` (with a ``reason`` and a ``message``)
    is stored in its ``result_metadata`` and the message in its ``error_message``."""

    until: datetime
    parked_by: dict[str, Any]


class Handler(Protocol):
    operation_type: str

    def run(self, job: Job) -> None: ...


_handlers: dict[str, Any] = {}

H = TypeVar("H")


def register(handler: H) -> H:
    """Register ``handler`` (instance or class) for its ``operation_type``; returns it unchanged.

    Usable as a class decorator. Registering a type again replaces the earlier handler (module
    reloads in development); the engine always looks handlers up at run time.
    """
    instance = handler() if isinstance(handler, type) else handler
    operation_type = getattr(instance, "operation_type", None)
    if not isinstance(operation_type, str) or not operation_type:
        raise ValueError(f"handler {handler!r} needs a non-empty operation_type")
    if not callable(getattr(instance, "run", None)):
        raise ValueError(f"handler {handler!r} needs a run(job) method")
    _handlers[operation_type] = instance
    return handler


def get_handler(operation_type: str) -> Any | None:
    return _handlers.get(operation_type)


def registered_types() -> list[str]:
    return sorted(_handlers)


def unregister(operation_type: str) -> None:
    """Remove a handler (tests)."""
    _handlers.pop(operation_type, None)
