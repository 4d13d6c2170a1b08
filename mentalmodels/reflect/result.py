"""What a reflect run returns, and the one error that means "we could not look".

``RetrievalError`` separates a failed lookup from an empty one
(docs/behaviour.md#a-failed-lookup-is-a-failure): the refresh maps it to
``failure_reason: retrieval_failed`` and keeps the document, where an empty lookup is an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hindsight.infra.vocabulary import BASED_ON_KEYS


class RetrievalError(Exception):
    """A retrieval step (database, embedder) raised: the run could not look, so it has no answer.

    Like every exception leaving ``reflect_run``, it carries ``reflect_partial``: the
    ``ReflectResult`` of the calls made before it (for a failed refresh's trace).
    """


@dataclass(frozen=True)
class MemoryRef:
    """A memory some tool returned: enough for a refresh to compute its watermark."""

    id: str
    fact_type: str
    updated_at: datetime | None


def empty_based_on() -> dict[str, list[dict[str, Any]]]:
    return {key: [] for key in BASED_ON_KEYS}


@dataclass
class ReflectResult:
    text: str
    # world / experience / opinion / observation / mental-models: only what the answer cites
    # and a tool actually returned; directives: every one the prompt carried.
    based_on: dict[str, list[dict[str, Any]]] = field(default_factory=empty_based_on)
    # The directives the prompt carried, highest priority first: {id, name, content}.
    directives: list[dict[str, Any]] = field(default_factory=list)
    # Every memory any tool returned, cited or not (deduplicated, first-seen order).
    memories_read: list[MemoryRef] = field(default_factory=list)
    cited_memory_ids: set[str] = field(default_factory=set)
    # The cited mental models: {id, name, text, is_stale}.
    mental_models_used: list[dict[str, Any]] = field(default_factory=list)
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
    # Summed over every LLM call of the run.
    usage: dict[str, int] = field(
        default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    )
    # {scope: agent_N | final | structured, duration_ms, input_tokens, output_tokens}
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    # {name, input, result_count, duration_ms, iteration}; outputs are kept apart (trace size).
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # The payload each tool call fed back to the model, aligned with ``tool_calls``.
    tool_outputs: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0
    # How the run ended: "done" (the model called done), "text" (it answered without the tool),
    # "synthesis" (the iteration cap forced a tool-less answer), "without_tools" (the model
    # cannot call tools: the searches ran up front and it answered once).
    finish: str = "done"
    warnings: list[str] = field(default_factory=list)
    duration_ms: int = 0
