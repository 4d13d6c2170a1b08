"""The value types of retain: a validated item in, a result out (both JSON round-trippable).

An async retain stores its items in the operation's payload and replays them through the same
``memories_retain`` service later, so an item must survive ``to_json``/``from_json`` unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RetainItem:
    content: str
    context: str = ""
    tags: list[str] = field(default_factory=list)
    # ISO 8601; None = "now" unless ``timestamp_unset`` (the client's 'unset': timeless content).
    timestamp: str | None = None
    timestamp_unset: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    document_id: str | None = None
    entities: list[str] = field(default_factory=list)
    strategy: str | None = None
    update_mode: str = "replace"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetainItem:
        return cls(**data)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True)
class RetainResult:
    bank_id: str
    items_count: int
    memory_ids: list[str]
    usage: Usage


@dataclass(frozen=True)
class RetainQueued:
    """A retain queued as an operation: sent with ``async``, or parked because the bank has
    spent its token budget (``parked``: why and until when; None when it runs now)."""

    bank_id: str
    items_count: int
    operation_id: str
    parked: dict[str, Any] | None = None
