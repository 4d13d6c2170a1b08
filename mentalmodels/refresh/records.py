"""The refresh pipeline's records: its operation type, what a refresh plans, what it decided,
what it reports. Its wire words (modes, outcomes, failure and fallback reasons) are in
``hindsight.infra.vocabulary``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from hindsight.infra.tagscope import TagScope
from mentalmodels.models import MentalModel


class MentalModelOperationType(StrEnum):
    """The operation types the mental-models app owns (the engine knows them as strings)."""

    REFRESH = "refresh_mental_model"


def refresh_details(*, outcome: str, failure_reason: str | None) -> dict[str, Any]:
    """A refresh operation's ``details`` (upstream's ``RefreshMentalModelOperationDetails``)."""
    return {"operation_type": MentalModelOperationType.REFRESH, "outcome": outcome,
            "failure_reason": failure_reason}


@dataclass
class Plan:
    model: MentalModel
    requested_mode: str
    effective_mode: str
    mode_fallback_reason: str | None
    scope: TagScope
    cutoff: datetime
    window_after: datetime | None
    exclude_mental_models: bool
    exclude_ids: list[str]
    budget: str
    response_schema: dict[str, Any] | None
    keep_trace: bool
    # A requested delta run in full because a directive of its scope changed since the last
    # refresh (docs/behaviour.md#a-directive-change-makes-its-pages-stale).
    directives_changed: bool = False


@dataclass
class Outcome:
    outcome: str
    content: str  # the document a real refresh stores (preview_content)
    candidate: str  # the raw answer of the reflect loop
    watermark: datetime | None
    based_on: dict[str, list[dict[str, Any]]]
    mental_models: list[dict[str, Any]]
    structured_output: Any = None
    structured_extracted: bool = False
    reflected: bool = False  # False: no LLM was asked (nothing in reach)
    facts_retrieved: dict[str, int] = field(default_factory=dict)
    facts_used: dict[str, int] = field(default_factory=dict)
    # The structured document ``content`` renders (docs/behaviour.md#the-document), as stored; None:
    # leave the column.
    document: dict[str, Any] | None = None
    # Delta mode: {"applied": [...], "skipped": [...]} (None in full mode).
    delta_operations: dict[str, list[dict[str, Any]]] | None = None
    # Retracted memories a kept ``reflect_response`` must stop citing
    # (docs/behaviour.md#retracted-facts).
    uncited_ids: frozenset[str] = frozenset()


@dataclass
class Report:
    """What one refresh did (the real run's return value; the dry run renders it)."""

    plan: Plan
    outcome: Outcome
    trace: dict[str, Any]
    usage: dict[str, int]
    duration_ms: int
    warnings: list[str]
    tool_outputs: list[dict[str, Any]]


@dataclass
class Preview:
    """What a dry run found: the refresh it would make, nothing written
    (``mentalmodels.api.preview.MentalModelDryRunRefreshResultSerializer`` renders its wire
    shape)."""

    model: MentalModel
    plan: Plan
    outcome: Outcome
    current_content: str
    trace: dict[str, Any]
    usage: dict[str, int]
    duration_ms: int
    warnings: list[str]

    @property
    def would_persist(self) -> bool:
        return self.outcome.content != self.current_content
