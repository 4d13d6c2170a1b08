"""The words every layer shares, each defined once (no Django, no imports of the project).

The wire's enumerations (fact types, ``tags_match`` modes, budgets, the refresh's modes,
outcomes and reasons, operation statuses), the keys of ``based_on`` and the timestamp formats.
Only the standard library is imported, so the CLI and the stdio MCP server, which run without
Django, read the same words as the models, the serializers and the OpenAPI document.

An enum says what a word is; the tuples beside it are plain strings (``.value``), because they
become choice lists and OpenAPI enums, and the schema's YAML writes only plain ``str``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum


def _words(*members: StrEnum) -> tuple[str, ...]:
    return tuple(member.value for member in members)


# --- memories -------------------------------------------------------------------------------


class FactType(StrEnum):
    """What a memory is (``MemoryUnit.fact_type``; the API's ``type``, ``types``, ``fact_types``)."""

    WORLD = "world"
    EXPERIENCE = "experience"
    OBSERVATION = "observation"
    OPINION = "opinion"


# Every type a memory may have; a request may name each (opinion only for upstream's old clients).
FACT_TYPES = _words(*FactType)
# The types a scope selects by: a trigger's fact_types, what a refusal lists. Opinion is legacy:
# accepted in a request, never offered.
SCOPE_FACT_TYPES = _words(FactType.WORLD, FactType.EXPERIENCE, FactType.OBSERVATION)
LEGACY_FACT_TYPES = _words(FactType.OPINION)
# What retain extracts from content, and so what consolidation reads to form observations.
EXTRACTED_FACT_TYPES = _words(FactType.WORLD, FactType.EXPERIENCE)
# The raw facts reflect's recall tool searches (observations have a tool of their own), in
# ``based_on`` order.
RAW_FACT_TYPES = _words(FactType.WORLD, FactType.EXPERIENCE, FactType.OPINION)
# ``based_on``'s memory buckets, in the order the wire lists them (not FACT_TYPES' order).
BASED_ON_FACT_TYPES = (*RAW_FACT_TYPES, FactType.OBSERVATION.value)
# The keys of ``based_on``: the memory buckets, then the mental models and directives cited.
BASED_ON_KEYS = (*BASED_ON_FACT_TYPES, "mental-models", "directives")


class MemoryState(StrEnum):
    """A memory's curation state (``state`` of ``GET``/``PATCH …/memories/{id}`` and the list's
    ``state`` filter): a valid memory is live; an invalidated one rests in the archive."""

    VALID = "valid"
    INVALIDATED = "invalidated"


MEMORY_STATES = _words(*MemoryState)
# The fact types a user may curate (edit, invalidate, restore): observations are derived.
CURATED_FACT_TYPES = EXTRACTED_FACT_TYPES


class MemoryChangeKind(StrEnum):
    """What a curation change did to a memory (a ``MemoryChange`` row; the document history's
    event kinds of the same names)."""

    EDITED = "fact_edited"
    INVALIDATED = "fact_invalidated"
    RESTORED = "fact_restored"
    DELETED = "fact_deleted"


MEMORY_CHANGE_KINDS = _words(*MemoryChangeKind)


class TagsMatch(StrEnum):
    """How a list of tags selects memories (``tags_match``; ``hindsight.infra.tagscope``)."""

    ANY = "any"
    ALL = "all"
    ANY_STRICT = "any_strict"
    ALL_STRICT = "all_strict"
    EXACT = "exact"


TAGS_MATCH_MODES = _words(*TagsMatch)
# Listing mental models by their tags: a model has no untagged memories to include or leave out,
# so the strict modes mean nothing there.
LIST_TAGS_MATCH_MODES = _words(TagsMatch.ANY, TagsMatch.ALL, TagsMatch.EXACT)


class Budget(StrEnum):
    """How thorough a recall or a reflect is (``budget``)."""

    LOW = "low"
    MID = "mid"
    HIGH = "high"


BUDGETS = _words(*Budget)


# --- the refresh (upstream 1.1.0's values; a test compares them with the upstream document) ----


class RefreshMode(StrEnum):
    FULL = "full"
    DELTA = "delta"


REFRESH_MODES = _words(*RefreshMode)


class RefreshOutcome(StrEnum):
    """``RefreshMentalModelOperationDetails.outcome``; the first five are a dry run's too."""

    CONTENT_WRITTEN = "content_written"
    CONTENT_UNCHANGED = "content_unchanged"
    CONTENT_PRESERVED_NO_NEW_FACTS = "content_preserved_no_new_facts"
    REFRESH_FAILED_EMPTY_CANDIDATE = "refresh_failed_empty_candidate"
    REFRESH_FAILED_DELTA_NOT_APPLIED = "refresh_failed_delta_not_applied"
    REFRESH_FAILED_STRUCTURED_OUTPUT = "refresh_failed_structured_output"
    REFRESH_FAILED_ERROR = "refresh_failed_error"


class RefreshFailureReason(StrEnum):
    """``RefreshMentalModelOperationDetails.failure_reason`` (and a failure entry's reason)."""

    EMPTY_CANDIDATE = "empty_candidate"
    STRUCTURED_DOC_UNREADABLE = "structured_doc_unreadable"
    DELTA_OPS_FAILED = "delta_ops_failed"
    DELTA_OPS_ALL_SKIPPED = "delta_ops_all_skipped"
    DELTA_NOT_APPLIED = "delta_not_applied"
    STRUCTURED_OUTPUT_FAILED = "structured_output_failed"
    RETRIEVAL_FAILED = "retrieval_failed"
    NO_ANSWER = "no_answer"
    UNEXPECTED_ERROR = "unexpected_error"


class ModeFallbackReason(StrEnum):
    """Why a delta refresh ran in full mode (``mode_fallback_reason``)."""

    NO_BASELINE_CONTENT = "no_baseline_content"
    SOURCE_QUERY_CHANGED = "source_query_changed"
    STRUCTURED_DOC_UNREADABLE = "structured_doc_unreadable"
    DELTA_OPS_FAILED = "delta_ops_failed"
    DELTA_OPS_ALL_SKIPPED = "delta_ops_all_skipped"


# --- operations -----------------------------------------------------------------------------


class OperationStatus(StrEnum):
    """Where an operation stands (``Operation.status``, the wire's ``status``)."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# An operation in one of these has ended: nothing more will happen to it unless it is retried.
TERMINAL_STATUSES = _words(OperationStatus.COMPLETED, OperationStatus.FAILED, OperationStatus.CANCELLED)


# --- webhooks -------------------------------------------------------------------------------


class WebhookEvent(StrEnum):
    """A webhook's ``event_types`` and a delivery's ``X-Hindsight-Event``: upstream's three, then
    the pages' (docs/behaviour.md#webhooks)."""

    RETAIN_COMPLETED = "retain.completed"
    CONSOLIDATION_COMPLETED = "consolidation.completed"
    # Upstream's; accepted in a subscription, never sent here (no memory defense).
    MEMORY_DEFENSE_TRIGGERED = "memory_defense.triggered"
    MENTAL_MODEL_REFRESHED = "mental_model.refreshed"
    MENTAL_MODEL_REFRESH_FAILED = "mental_model.refresh_failed"
    MENTAL_MODEL_PAUSED = "mental_model.paused"
    KNOWLEDGE_PAGE_CREATED = "knowledge_page.created"
    KNOWLEDGE_PAGE_UPDATED = "knowledge_page.updated"
    KNOWLEDGE_PAGE_DELETED = "knowledge_page.deleted"


WEBHOOK_EVENTS = _words(*WebhookEvent)


# --- timestamps -----------------------------------------------------------------------------


def iso(value: datetime | None) -> str | None:
    """A timestamp as the API writes it: ISO 8601 with the value's own offset (``+00:00``)."""
    return value.isoformat() if value is not None else None


def iso_z(value: datetime | None) -> str | None:
    """A timestamp as a refresh's trace writes it: ISO 8601 in UTC, ending in ``Z``."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
