"""Listeners of the banks app's events, registered by the apps above it (layers: banks never
imports them): a consolidation chain of a bank completed; and who reads a memory (the admin
asks).

``consolidation_listener_register(fn)`` is called from an ``AppConfig.ready`` (mental models
register their ``refresh_after_consolidation`` trigger). ``consolidation_completed_notify`` runs
every listener inside the transaction that completes the consolidation operation, so what a
listener queues commits with the completion or not at all; a listener must do database work
only (no network I/O) and raise only for what should roll the completion back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ConsolidationCompleted:
    bank_id: str
    operation_id: str
    # The (sorted tags, fact_type) of every memory the chain consolidated or wrote: the facts
    # it marked and the observations it created, updated or deleted.
    scopes: frozenset[tuple[tuple[str, ...], str]]


ConsolidationListener = Callable[[ConsolidationCompleted], object]

_listeners: list[ConsolidationListener] = []


def consolidation_listener_register(listener: ConsolidationListener) -> None:
    """Add ``listener`` (idempotent: registering it again changes nothing)."""
    if listener not in _listeners:
        _listeners.append(listener)


def consolidation_listener_unregister(listener: ConsolidationListener) -> None:
    """Remove ``listener`` (tests)."""
    if listener in _listeners:
        _listeners.remove(listener)


def consolidation_completed_notify(event: ConsolidationCompleted) -> None:
    for listener in list(_listeners):
        listener(event)


# --- who reads a memory ------------------------------------------------------------------------
# The admin shows, beside a memory, the pages whose scope holds it (the ones a curation change
# makes stale). Pages are the mental models' (an app above this one): they register the reader.

MemoryReaders = Callable[[str, list[str], str], list[tuple[str, str]]]

_readers: list[MemoryReaders] = []


def memory_readers_register(readers: MemoryReaders) -> None:
    """Add ``readers(bank_id, tags, fact_type) -> [(label, url)]`` (idempotent)."""
    if readers not in _readers:
        _readers.append(readers)


def memory_readers(*, bank_id: str, tags: list[str], fact_type: str) -> list[tuple[str, str]]:
    """What every registered reader says reads a memory of ``tags`` and ``fact_type``."""
    return [reader for readers in list(_readers) for reader in readers(bank_id, tags, fact_type)]
