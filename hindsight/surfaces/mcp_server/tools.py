"""The MCP tools: upstream Hindsight 1.1.0's tool set, names, argument names, types, defaults,
hints and result shapes (its ``hindsight_api/mcp_tools.py`` is the reference), for every tool
this server can back.

Wiring only. Every tool is one or two calls of ``HindsightApi`` — the REST endpoints a client
would call — so a tool behaves exactly like the API (validation, error text, coalescing, the
release of a parked refresh by a manual one). Which API that is comes from the ``ToolBackend``
of the current request (a context variable): the stdio server (``hindsight mcp``) points it at
``--api-url`` over the network; the streamable HTTP endpoint mounted at ``/mcp`` points it at
the same process through a WSGI transport (``hindsight.surfaces.mcp_server.http``).

Two modes, as upstream: **all banks** (``/mcp``, ``hindsight mcp`` without ``--bank``) — every
tool takes an optional ``bank_id`` (default: the ``X-Bank-Id`` header) and the bank tools
``list_banks``, ``create_bank``, ``get_bank_stats`` are offered; **one bank** (``/mcp/{bank}/``,
``hindsight mcp --bank BANK``) — the tools have no ``bank_id`` and work on that bank.

A refused call comes back as a tool result with ``isError: true`` and one line naming the
problem, and nothing is done: an argument the tool does not declare (upstream drops those
silently), an ill-typed one (the SDK's validation), or the server's 4xx/5xx. Upstream answers
errors as a normal result ``{"error": …}``; an MCP error result is what an agent is told to
read as one.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from hindsight.infra.config import MCP_ONE_BANK_EXCLUDED, MCP_TOOL_NAMES
from hindsight.infra.vocabulary import BUDGETS, REFRESH_MODES, SCOPE_FACT_TYPES, TAGS_MATCH_MODES
from hindsight.surfaces.cli.api import ApiError, HindsightApi
from hindsight.surfaces.mcp_server.knowledge_tools import KNOWLEDGE_TOOL_ANNOTATIONS, knowledge_tools
from hindsight.surfaces.mcp_server.review_tools import REVIEW_TOOL_ANNOTATIONS, review_tools

# Literal types, not the vocabulary's enums: pydantic writes a Literal inline as the argument's
# ``enum`` (as upstream's tool schemas have it) where an Enum would become a ``$ref``. mypy reads
# no Literal built from a tuple, so it sees the words as plain strings.
if TYPE_CHECKING:
    TagsMatchWord: TypeAlias = str
    FactTypeWord: TypeAlias = str
    RefreshModeWord: TypeAlias = str
    BudgetWord: TypeAlias = str
else:
    TagsMatchWord = Literal[TAGS_MATCH_MODES]
    FactTypeWord = Literal[SCOPE_FACT_TYPES]
    RefreshModeWord = Literal[REFRESH_MODES]
    BudgetWord = Literal[BUDGETS]
Offset = Annotated[int, Field(ge=0)]
Limit = Annotated[int, Field(ge=0)]
BankArg = Annotated[
    str | None,
    Field(description="Memory bank id; defaults to the bank of this session (X-Bank-Id)."),
]


@dataclass(frozen=True)
class ToolBackend:
    """The API the tools call and the bank they default to, for one session or request."""

    api: HindsightApi
    default_bank: str | None = None


_backend: ContextVar[ToolBackend] = ContextVar("hindsight_mcp_backend")


def set_backend(backend: ToolBackend) -> None:
    _backend.set(backend)


def _call(bank_id: str | None, fn: Callable[[HindsightApi, str], Any]) -> Any:
    backend = _backend.get()
    bank = bank_id or backend.default_bank
    if not bank:
        raise ToolError(
            "bank_id is required: pass it, or start the server for one bank "
            "(hindsight mcp --bank BANK, or the /mcp/{bank_id}/ endpoint)"
        )
    try:
        return fn(backend.api, bank)
    except ApiError as exc:
        raise ToolError(str(exc)) from None


def _body(**fields: Any) -> dict[str, Any]:
    """A request body without the arguments the agent left out (the API's defaults apply)."""
    return {k: v for k, v in fields.items() if v is not None}


# --- registry ------------------------------------------------------------------------------

READ_ONLY = "read_only"
WRITE = "write"
DESTRUCTIVE = "destructive"
_HINTS = {
    # A closed memory store: no tool reaches the outside world.
    READ_ONLY: ToolAnnotations(read_only_hint=True, open_world_hint=False),
    WRITE: ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    DESTRUCTIVE: ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                 open_world_hint=False),
}


@dataclass(frozen=True)
class ToolDef:
    fn: Callable[..., Any]
    annotations: ToolAnnotations  # upstream's hints


TOOLS: dict[str, ToolDef] = {}


def tool(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a tool with its hint: READ_ONLY, WRITE or DESTRUCTIVE."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        TOOLS[fn.__name__] = ToolDef(fn, _HINTS[kind])
        return fn

    return register


# --- memory ---------------------------------------------------------------------------------


def _retain_item(content: str, context: str, timestamp: str | None, tags: list[str] | None,
                 metadata: dict[str, str] | None, document_id: str | None,
                 strategy: str | None, update_mode: str | None = None) -> dict[str, Any]:
    return _body(content=content, context=context, timestamp=timestamp, tags=tags,
                 metadata=metadata, document_id=document_id, strategy=strategy,
                 update_mode=update_mode)


@tool(WRITE)
def retain(
    content: Annotated[str, Field(description="The fact to remember, specific and complete.")],
    context: Annotated[str, Field(description="Its category, e.g. 'preferences'.")] = "general",
    timestamp: Annotated[str | None, Field(description="When it happened (ISO 8601).")] = None,
    tags: Annotated[list[str] | None, Field(description="Tags scoping who sees it.")] = None,
    metadata: Annotated[dict[str, str] | None, Field(description="Key-value metadata.")] = None,
    document_id: Annotated[str | None, Field(description="The document it belongs to.")] = None,
    bank_id: BankArg = None,
    strategy: Annotated[str | None, Field(description="Retain strategy, e.g. 'verbatim'.")] = None,
    update_mode: Annotated[
        str | None, Field(description="An existing document_id: 'replace' (default) or 'append'.")
    ] = None,
) -> dict[str, Any]:
    """Store a memory in the background (an operation; follow it with get_operation).

    Use sync_retain to wait until it can be recalled."""
    item = _retain_item(content, context, timestamp, tags, metadata, document_id, strategy,
                        update_mode)
    result = _call(bank_id, lambda api, bank: api.retain(bank, {"items": [item], "async": True}))
    return {"status": "accepted", "message": "Memory storage initiated",
            "operation_id": result["operation_id"]}


@tool(WRITE)
def sync_retain(
    content: Annotated[str, Field(description="The fact to remember, specific and complete.")],
    context: Annotated[str, Field(description="Its category, e.g. 'preferences'.")] = "general",
    timestamp: Annotated[str | None, Field(description="When it happened (ISO 8601).")] = None,
    tags: Annotated[list[str] | None, Field(description="Tags scoping who sees it.")] = None,
    metadata: Annotated[dict[str, str] | None, Field(description="Key-value metadata.")] = None,
    document_id: Annotated[str | None, Field(description="The document it belongs to.")] = None,
    bank_id: BankArg = None,
    strategy: Annotated[str | None, Field(description="Retain strategy, e.g. 'verbatim'.")] = None,
) -> dict[str, Any]:
    """Store a memory and wait until it is stored and can be recalled."""
    item = _retain_item(content, context, timestamp, tags, metadata, document_id, strategy)
    result = _call(bank_id, lambda api, bank: api.retain(bank, {"items": [item], "async": False}))
    if result.get("parked"):  # docs/behaviour.md#over-budget-nothing-is-lost
        return {"status": "accepted",
                "message": "Memory kept: it is stored once the bank's LLM token budget frees",
                "operation_id": result["operation_id"], "parked": result["parked"]}
    return {"status": "completed", "message": "Memory stored successfully",
            "items_count": result["items_count"]}


@tool(READ_ONLY)
def recall(
    query: Annotated[str, Field(description="What to look for, in natural language.")],
    max_tokens: Annotated[int, Field(description="Token budget for the facts' text.")] = 4096,
    budget: Annotated[str, Field(description="low, mid or high (more thorough).")] = "high",
    types: Annotated[list[str] | None, Field(description="Fact types (default: all).")] = None,
    prefer_observations: Annotated[
        bool | None, Field(description="Drop raw facts an observation returned supersedes.")
    ] = None,
    tags: Annotated[list[str] | None, Field(description="Only memories with these tags.")] = None,
    tags_match: Annotated[TagsMatchWord, Field(description="How tags match (untagged are "
                                                       "included unless *_strict).")] = "any",
    tag_groups: Annotated[
        list[dict[str, Any]] | None,
        Field(description="Boolean tag groups ({tags, match} leaves, and/or/not), AND-ed; "
                          "instead of tags."),
    ] = None,
    query_timestamp: Annotated[str | None, Field(description="'Now' of the query (ISO).")] = None,
    min_scores: Annotated[
        dict[str, Any] | None, Field(description="Score floors: semantic, keyword, final.")
    ] = None,
    temporal_window: Annotated[
        dict[str, Any] | None, Field(description="{start, end} (ISO) the temporal arm ranks by.")
    ] = None,
    include_chunks: Annotated[bool, Field(description="Also return source chunks.")] = False,
    max_chunk_tokens: Annotated[int, Field(description="Token cap of the chunks.")] = 8192,
    include_entities: Annotated[bool, Field(description="Also return entities.")] = False,
    max_entity_tokens: Annotated[int, Field(description="Token cap of the entities.")] = 500,
    include_source_facts: Annotated[
        bool, Field(description="Also return the facts observations were built from.")
    ] = False,
    max_source_facts_tokens: Annotated[
        int, Field(description="Token cap of the source facts.")
    ] = 4096,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Search the bank's memories (semantic + keyword, fused), best first."""
    include: dict[str, Any] = {}
    if include_chunks:
        include["chunks"] = {"max_tokens": max_chunk_tokens}
    if include_entities:
        include["entities"] = {"max_tokens": max_entity_tokens}
    if include_source_facts:
        include["source_facts"] = {"max_tokens": max_source_facts_tokens}
    body = _body(query=query, max_tokens=max_tokens, budget=budget, types=types,
                 prefer_observations=prefer_observations, tags=tags,
                 tags_match=tags_match if tags is not None else None, tag_groups=tag_groups,
                 query_timestamp=query_timestamp, min_scores=min_scores,
                 temporal_window=temporal_window, include=include or None)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.recall(bank, body))
    return result


@tool(READ_ONLY)
def reflect(
    query: Annotated[str, Field(description="The question to reason about from memory.")],
    context: Annotated[str | None, Field(description="Why the question is asked.")] = None,
    budget: Annotated[str, Field(description="low, mid or high (more agent steps).")] = "low",
    max_tokens: Annotated[int, Field(description="Cap of the answer's tokens.")] = 4096,
    response_schema: Annotated[
        dict[str, Any] | None,
        Field(description="JSON schema: the answer also comes as structured_output."),
    ] = None,
    tags: Annotated[list[str] | None, Field(description="Only memories with these tags.")] = None,
    tags_match: Annotated[TagsMatchWord, Field(description="How tags match.")] = "any",
    apply_all_directives: Annotated[
        bool, Field(description="Apply every active directive, whatever its tags (by default "
                                "the untagged ones and those the tags select).")
    ] = False,
    include_based_on: Annotated[
        bool, Field(description="Include the memories and models the answer cites.")
    ] = False,
    include_trace: Annotated[
        bool, Field(description="Include the agent's tool calls (debugging; large).")
    ] = False,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Answer a question by reasoning over the bank: mental models first, then observations,
    then raw facts. Use recall for a plain lookup."""
    include: dict[str, Any] = {}
    if include_based_on:
        include["facts"] = {}
    if include_trace:
        include["tool_calls"] = {}
    body = _body(query=query, context=context, budget=budget, max_tokens=max_tokens,
                 response_schema=response_schema, tags=tags,
                 tags_match=tags_match if tags is not None else None, include=include or None,
                 apply_all_directives=apply_all_directives or None)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.reflect(bank, body))
    if not include_based_on:
        result.pop("based_on", None)
    if not include_trace:
        result.pop("trace", None)
    return result


# --- banks ----------------------------------------------------------------------------------


@tool(READ_ONLY)
def list_banks(
    query: Annotated[str | None, Field(description="Substring of the bank id or name.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """List the memory banks: {banks, total, limit, offset}."""
    backend = _backend.get()
    try:
        result: dict[str, Any] = backend.api.bank_list(q=query, limit=limit, offset=offset)
    except ApiError as exc:
        raise ToolError(str(exc)) from None
    return result


@tool(WRITE)
def create_bank(
    bank_id: Annotated[str, Field(description="The new bank's id, e.g. 'user-123'.")],
    name: Annotated[str | None, Field(description="Display name.")] = None,
    mission: Annotated[str | None, Field(description="Who the agent is, what it is for.")] = None,
) -> dict[str, Any]:
    """Create a memory bank, or answer the existing one (its profile)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.bank_create(
        bank, _body(name=name, mission=mission)))
    return result


# --- mental models ----------------------------------------------------------------------------


class TriggerInput(BaseModel):
    """A mental model's refresh policy, key for key upstream's ``MentalModelTrigger``; only the
    keys given are sent (the server merges them key by key, ``null`` resets one)."""

    model_config = ConfigDict(extra="forbid")

    mode: RefreshModeWord | None = Field(
        None, description="full rebuilds each time; delta edits the stored document.")
    refresh_after_consolidation: bool | None = Field(
        None, description="Refresh after consolidation (not with refresh_cron).")
    refresh_cron: str | None = Field(
        None, description="UTC five-field cron; a due refresh runs only when stale.")
    full_refresh_cron: str | None = Field(
        None, description="UTC cron of a periodic full rebuild (delta models).")
    min_refresh_interval_seconds: int | None = Field(
        None, ge=0, description="Floor between automatic refreshes (0: none).")
    fact_types: list[FactTypeWord] | None = Field(
        None, description="Fact types a refresh reads (null: all).")
    exclude_mental_models: bool | None = Field(
        None, description="Leave every other mental model out of the refresh.")
    exclude_mental_model_ids: list[str] | None = Field(
        None, description="Leave these mental models out of the refresh.")
    tags_match: TagsMatchWord | None = Field(
        None, description="How the model's tags select memories (tagged default all_strict).")
    tag_groups: list[dict[str, Any]] | None = Field(
        None, description="Boolean tag groups used instead of the model's tags.")
    include_chunks: bool | None = None
    recall_max_tokens: int | None = None
    recall_chunks_max_tokens: int | None = None
    budget: BudgetWord | None = Field(
        None, description="Agent steps of a refresh (null: mid).")
    reflect_search_observations_max_tokens: int | None = Field(None, ge=1)
    reflect_search_observations_include_entities: bool | None = None
    response_schema: dict[str, Any] | None = Field(
        None, description="JSON schema: each refresh also stores structured_output.")
    keep_trace: bool | None = Field(
        None, description="Keep the latest refresh's reasoning under reflect_response.trace.")
    review: bool | None = Field(
        None, description="Ours: hold each refresh's change as a proposal to approve "
                          "(null: the bank's mental_model_review).")


def _trigger(trigger: TriggerInput | None, *, tags_match: str | None,
             refresh_after_consolidation: bool | None) -> dict[str, Any] | None:
    """The trigger keys to send, the flat shorthands folded in (a shorthand that contradicts
    the same key inside ``trigger`` is refused, as upstream)."""
    keys = trigger.model_dump(exclude_unset=True) if trigger is not None else {}
    for key, argument, value in (
        ("tags_match", "tags_match", tags_match),
        ("refresh_after_consolidation", "trigger_refresh_after_consolidation",
         refresh_after_consolidation),
    ):
        if value is None:
            continue
        if key in keys and keys[key] != value:
            raise ToolError(f"trigger.{key}={keys[key]!r} conflicts with {argument}={value!r}; "
                            "set it in one place")
        keys[key] = value
    return keys or None


TriggerArg = Annotated[
    TriggerInput | None,
    Field(description="Refresh policy: when it rebuilds (mode, refresh_after_consolidation, "
                      "refresh_cron, …) and what it reads (fact_types, tags_match, …)."),
]
ModelIdArg = Annotated[str, Field(description="The mental model's id.")]


@tool(READ_ONLY)
def list_mental_models(
    tags: Annotated[list[str] | None, Field(description="Only models with any of these tags.")]
    = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Offset = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's mental models: metadata only (id, name, tags, is_stale, timestamps), and
    the total. Read one model's content with get_mental_model."""
    page = _call(bank_id, lambda api, bank: api.mental_model_list(
        bank, detail="metadata", tags=tags, limit=limit, offset=offset))
    return {"items": page["items"], "total": page["total"]}


@tool(READ_ONLY)
def get_mental_model(
    mental_model_id: ModelIdArg,
    detail: Annotated[str, Field(description="metadata, content (adds the document and its "
                                             "configuration) or full (adds provenance).")]
    = "full",
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Read one mental model, with is_stale."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_get(
        bank, mental_model_id, detail=detail))
    return result


@tool(WRITE)
def create_mental_model(
    name: Annotated[str, Field(description="Human-readable name.")],
    source_query: Annotated[str, Field(description="The question the document answers.")],
    mental_model_id: Annotated[
        str | None, Field(description="Custom id (^[a-z0-9][a-z0-9-]{0,63}$); generated when "
                                      "absent.")
    ] = None,
    tags: Annotated[list[str] | None, Field(description="Tags scoping what it reads.")] = None,
    trigger: TriggerArg = None,
    tags_match: Annotated[
        str | None, Field(description="Shorthand for trigger.tags_match (a tagged model "
                                      "defaults to all_strict).")
    ] = None,
    max_tokens: Annotated[int, Field(description="Document length cap (256..8192).")] = 2048,
    trigger_refresh_after_consolidation: Annotated[
        bool | None, Field(description="Shorthand for trigger.refresh_after_consolidation.")
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Create a mental model; its content is generated in the background (poll the returned
    operation_id with get_operation)."""
    body = _body(id=mental_model_id, name=name, source_query=source_query, tags=tags,
                 max_tokens=max_tokens,
                 trigger=_trigger(trigger, tags_match=tags_match,
                                  refresh_after_consolidation=trigger_refresh_after_consolidation))
    result = _call(bank_id, lambda api, bank: api.mental_model_create(bank, body))
    return {"mental_model_id": result["mental_model_id"], "operation_id": result["operation_id"],
            "status": "created",
            "message": f"Mental model '{name}' created. Content is being generated "
                       "asynchronously."}


@tool(WRITE)
def update_mental_model(
    mental_model_id: ModelIdArg,
    name: str | None = None,
    source_query: str | None = None,
    max_tokens: Annotated[int | None, Field(description="256..8192.")] = None,
    tags: list[str] | None = None,
    trigger: TriggerArg = None,
    tags_match: Annotated[str | None, Field(description="Shorthand for trigger.tags_match.")]
    = None,
    trigger_refresh_after_consolidation: Annotated[
        bool | None, Field(description="Shorthand for trigger.refresh_after_consolidation.")
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Change a mental model (a PATCH: what is left out keeps its value; trigger keys merge
    one by one); returns the model. Refresh it to rebuild the content."""
    body = _body(name=name, source_query=source_query, max_tokens=max_tokens, tags=tags,
                 trigger=_trigger(trigger, tags_match=tags_match,
                                  refresh_after_consolidation=trigger_refresh_after_consolidation))
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_update(
        bank, mental_model_id, body))
    return result


@tool(DESTRUCTIVE)
def delete_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Delete a mental model and its history."""
    _call(bank_id, lambda api, bank: api.mental_model_delete(bank, mental_model_id))
    return {"status": "deleted", "mental_model_id": mental_model_id}


@tool(WRITE)
def refresh_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Refresh a mental model now (no rate floor; releases a parked automatic refresh)."""
    result = _call(bank_id, lambda api, bank: api.mental_model_refresh(bank, mental_model_id))
    return {"operation_id": result["operation_id"], "status": "queued",
            "message": f"Refresh queued for mental model '{mental_model_id}'."}


@tool(DESTRUCTIVE)
def clear_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Empty a mental model's content (kept in its history); the next refresh rebuilds it."""
    result = _call(bank_id, lambda api, bank: api.mental_model_clear(bank, mental_model_id))
    return {"mental_model_id": result["id"], "status": "cleared",
            "message": f"Mental model '{mental_model_id}' content cleared. Call "
                       "refresh_mental_model to rebuild."}


# --- directives -----------------------------------------------------------------------------

DirectiveLimit = Annotated[int, Field(ge=1, le=1000)]


@tool(READ_ONLY)
def list_directives(
    tags: Annotated[list[str] | None, Field(
        description="Only the directives a reflect with these tags applies (the untagged ones "
                    "too).")] = None,
    active_only: Annotated[bool, Field(description="Only the active ones.")] = True,
    limit: DirectiveLimit = 100,
    offset: Offset = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's directives (hard rules every reflect and refresh follows), highest
    priority first: {items, total}. Page until the items add up to total."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.directive_list(
        bank, tags=tags, active_only="true" if active_only else "false", limit=limit,
        offset=offset))
    return {"items": result["items"], "total": result["total"]}


@tool(WRITE)
def create_directive(
    name: Annotated[str, Field(description="A short name for the rule.")],
    content: Annotated[str, Field(description="The rule, as the prompt should state it.")],
    priority: Annotated[int, Field(description="Higher comes first.")] = 0,
    is_active: Annotated[bool, Field(description="Whether it applies now.")] = True,
    tags: Annotated[list[str] | None, Field(
        description="Apply it only to requests with these tags (none: to every request).")
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Create a directive: a hard rule put into every reflect and refresh prompt it applies to
    (the pages it applies to turn stale until their next refresh)."""
    body = _body(name=name, content=content, priority=priority, is_active=is_active, tags=tags)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.directive_create(bank, body))
    return result


@tool(DESTRUCTIVE)
def delete_directive(
    directive_id: Annotated[str, Field(description="The directive's id.")],
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Delete a directive."""
    _call(bank_id, lambda api, bank: api.directive_delete(bank, directive_id))
    return {"status": "deleted", "directive_id": directive_id}


# --- memories, operations, tags, the bank ---------------------------------------------------


@tool(READ_ONLY)
def list_memories(
    type: Annotated[str | None, Field(description="world, experience or observation.")] = None,
    q: Annotated[str | None, Field(description="Text the memories contain.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
    bank_id: BankArg = None,
    tags: list[str] | None = None,
    tags_match: TagsMatchWord = "any",
) -> dict[str, Any]:
    """Browse the bank's memories, newest first (no relevance ranking; use recall for that)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.memory_list(
        bank, type=type, q=q, limit=limit, offset=offset, tags=tags, tags_match=tags_match))
    return result


MemoryIdArg = Annotated[str, Field(description="The memory's id.")]
DocumentIdArg = Annotated[str, Field(description="The document's id.")]


@tool(READ_ONLY)
def get_memory(memory_id: MemoryIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Get a specific memory by ID: its text, tags, metadata, dates and curation state
    (valid, or invalidated with the reason)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.memory_get(bank, memory_id))
    return result


@tool(WRITE)
def update_memory(
    memory_id: MemoryIdArg,
    text: Annotated[str | None, Field(description="The corrected fact.")] = None,
    context: Annotated[str | None, Field(description="New context ('' clears it).")] = None,
    occurred_start: Annotated[str | None, Field(description="ISO 8601 ('' clears it).")] = None,
    occurred_end: Annotated[str | None, Field(description="ISO 8601 ('' clears it).")] = None,
    mentioned_at: Annotated[str | None, Field(description="ISO 8601 ('' clears it).")] = None,
    fact_type: Annotated[str | None, Field(description="world or experience.")] = None,
    entities: Annotated[list[str] | None, Field(
        description="Replace the fact's entity names ([] detaches all).")] = None,
    resolve_entities: Annotated[bool, Field(
        description="Accepted; entity names are kept as given.")] = True,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Edit a memory to correct what was extracted: pass any of text, context, the dates,
    fact_type, entities. A new text is embedded again and the observations built on it are
    rebuilt; the mental models that read it go stale. Only world/experience facts; to retire
    or restore one, use invalidate_memory."""
    body = _body(text=text, context=context, occurred_start=occurred_start,
                 occurred_end=occurred_end, mentioned_at=mentioned_at, fact_type=fact_type,
                 entities=entities)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.memory_update(
        bank, memory_id, body))
    return result


@tool(DESTRUCTIVE)
def invalidate_memory(
    memory_id: MemoryIdArg,
    reason: Annotated[str | None, Field(description="Why, recorded with it.")] = None,
    restore: Annotated[bool, Field(description="True to restore an invalidated fact.")] = False,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Soft-retire a memory (or restore one with restore=True): it leaves recall,
    consolidation and every mental model's scope (those that read it go stale), kept for
    audit and reversible. Only world/experience facts."""
    body = _body(state="valid" if restore else "invalidated", reason=reason)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.memory_update(
        bank, memory_id, body))
    return result


@tool(READ_ONLY)
def list_documents(
    q: Annotated[str | None, Field(description="Text of the id or the document.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's documents: the memories retained with a document_id are grouped under
    it. Page until the items add up to 'total'."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.document_list(
        bank, q=q, limit=limit, offset=offset))
    return result


@tool(READ_ONLY)
def get_document(document_id: DocumentIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Get a specific document by ID: its text, tags and how many memories it holds."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.document_get(bank,
                                                                               document_id))
    return result


@tool(DESTRUCTIVE)
def delete_document(document_id: DocumentIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Delete a document and every memory linked to it (the mental models that read them go
    stale)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.document_delete(
        bank, document_id))
    return result


@tool(READ_ONLY)
def list_operations(
    status: Annotated[
        str | None, Field(description="pending, processing, completed, failed or cancelled.")
    ] = None,
    type: Annotated[
        str | None, Field(description="retain, consolidation or refresh_mental_model.")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
    offset: Offset = 0,
    exclude_parents: Annotated[
        bool, Field(description="Accepted for upstream's callers; no operation has children "
                                "here.")
    ] = False,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's background operations, newest first."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.operation_list(
        bank, status=status, type=type, limit=limit, offset=offset))
    return result


@tool(READ_ONLY)
def get_operation(
    operation_id: Annotated[str, Field(description="The operation id a call returned.")],
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Status of a background operation (pending, processing, completed, failed, cancelled)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.operation_get(
        bank, operation_id))
    return result


@tool(WRITE)
def cancel_operation(
    operation_id: Annotated[str, Field(description="A pending operation's id.")],
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Cancel an operation that has not started (a running one cannot be)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.operation_cancel(
        bank, operation_id))
    return result


@tool(READ_ONLY)
def list_tags(
    q: Annotated[str | None, Field(description="Pattern, '*' matches anything.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """The tags of the bank's memories, with how many memories carry each."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.tag_list(
        bank, q=q, limit=limit, offset=offset))
    return result


@tool(READ_ONLY)
def get_bank(bank_id: BankArg = None) -> dict[str, Any]:
    """The bank's profile (name, mission, disposition)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.bank_get(bank))
    return result


@tool(READ_ONLY)
def get_bank_stats(bank_id: BankArg = None) -> dict[str, Any]:
    """The bank's counts: memories by type, pending consolidation, operations, last write."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.bank_stats(bank))
    return result


@tool(WRITE)
def update_bank(
    name: Annotated[str | None, Field(description="Display name.")] = None,
    mission: Annotated[str | None, Field(description="The bank's mission.")] = None,
    config_updates: Annotated[
        dict[str, Any] | None,
        Field(description="Bank configuration keys to change (GET …/config lists them)."),
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Change the bank's name, mission or configuration; returns its profile."""

    def run(api: HindsightApi, bank: str) -> Any:
        if config_updates:
            api.bank_config_update(bank, config_updates)
        profile = _body(name=name, mission=mission)
        return api.bank_update(bank, profile) if profile else api.bank_get(bank)

    result: dict[str, Any] = _call(bank_id, run)
    return result


@tool(DESTRUCTIVE)
def delete_bank(bank_id: BankArg = None) -> dict[str, Any]:
    """Delete the bank and everything in it (memories, mental models, history, operations)."""
    backend = _backend.get()
    bank = bank_id or backend.default_bank
    result = _call(bank, lambda api, target: api.bank_delete(target))
    return {"status": "deleted", "bank_id": bank, **result}


@tool(DESTRUCTIVE)
def clear_memories(
    type: Annotated[str | None, Field(
        description="Only this fact type: world, experience or observation (all if left out).")
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Clear the bank's memories without deleting the bank (its config, documents and mental
    models stay; the mental models that read them go stale)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.memories_clear(bank, type=type))
    return result


# --- the server -----------------------------------------------------------------------------


# Then the knowledge base's tools (hindsight.surfaces.mcp_server.knowledge_tools), around the same call.
TOOLS.update({name: ToolDef(fn, KNOWLEDGE_TOOL_ANNOTATIONS[name])
              for name, fn in knowledge_tools(_call).items()})
# Then ours, review and undo (hindsight.surfaces.mcp_server.review_tools).
TOOLS.update({name: ToolDef(fn, REVIEW_TOOL_ANNOTATIONS[name])
              for name, fn in review_tools(_call).items()})


def _for_one_bank(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The tool without its ``bank_id`` argument: it works on the session's bank."""
    signature = inspect.signature(fn, eval_str=True)

    @functools.wraps(fn)
    def pinned(**arguments: Any) -> Any:
        return fn(**arguments)

    pinned.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "bank_id"])
    return pinned


def _bank_enabled_tools() -> frozenset[str] | None:
    """The session bank's ``mcp_enabled_tools`` (bank config), as upstream: None when the
    session has no bank, the bank does not exist yet, or the bank does not restrict."""
    backend = _backend.get(None)
    if backend is None or not backend.default_bank:
        return None
    try:
        config = backend.api.bank_config_get(backend.default_bank)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise ToolError(str(exc)) from None
    enabled = (config.get("config") or {}).get("mcp_enabled_tools")
    return None if enabled is None else frozenset(enabled)


class HindsightMCPServer(MCPServer):
    """The SDK's server with two of upstream's rules and one of ours: the session bank's
    ``mcp_enabled_tools`` narrows the tools listed and callable (upstream's bank filter), and an
    argument a tool does not declare is refused before anything runs (the SDK would drop it,
    so a typo like ``mental_model_idd`` would silently do something else)."""

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        enabled = await anyio.to_thread.run_sync(_bank_enabled_tools)
        return tools if enabled is None else [t for t in tools if t.name in enabled]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        enabled = await anyio.to_thread.run_sync(_bank_enabled_tools)
        if enabled is not None and name not in enabled:
            raise ToolError(f"Tool '{name}' is not enabled for bank "
                            f"'{_backend.get().default_bank}' (its mcp_enabled_tools)")
        declared = await self._declared_arguments()
        if name in declared:
            unknown = sorted(set(arguments) - declared[name])
            if unknown:
                raise ToolError(
                    f"Error executing tool {name}: unknown argument(s) {', '.join(unknown)}; "
                    f"it takes: {', '.join(sorted(declared[name])) or 'no arguments'}"
                )
        return await super().call_tool(name, arguments, context)

    async def _declared_arguments(self) -> dict[str, frozenset[str]]:
        cached: dict[str, frozenset[str]] | None = getattr(self, "_declared", None)
        if cached is None:
            cached = {t.name: frozenset((t.input_schema or {}).get("properties") or {})
                      for t in await super().list_tools()}
            self._declared = cached
        return cached


@contextmanager
def _root_logging_untouched() -> Iterator[None]:
    """The SDK's constructor calls ``logging.basicConfig``; a handler already on the root logger
    makes that a no-op, so building the server in the API process leaves its logging alone."""
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)


def build_server(enabled: Iterable[str] = (), *, one_bank: bool = False) -> MCPServer:
    """An MCP server with the given tools (all of them when ``enabled`` is empty), for all
    banks (every tool takes ``bank_id``) or for one bank (no ``bank_id``; the bank tools that
    only make sense across banks are left out, as upstream)."""
    tools = TOOLS
    assert tuple(tools) == MCP_TOOL_NAMES, "hindsight.infra.config.MCP_TOOL_NAMES lists every tool"
    names = tuple(enabled) or tuple(tools)
    unknown = sorted(set(names) - set(tools))
    if unknown:
        raise ValueError(f"unknown MCP tools {unknown}; known: {', '.join(tools)}")
    if one_bank:
        names = tuple(n for n in names if n not in MCP_ONE_BANK_EXCLUDED)
    with _root_logging_untouched():
        server = HindsightMCPServer(
            "hindsight",
            log_level="WARNING",
            instructions="Hindsight memory: mental models (curated, auto-refreshed documents), "
                         "retain, recall and reflect over memory banks.",
        )
    for name in names:
        spec = tools[name]
        fn = _for_one_bank(spec.fn) if one_bank else spec.fn
        server.add_tool(fn, name=name, description=inspect.getdoc(spec.fn),
                        annotations=spec.annotations, structured_output=False)
    return server
