"""The MCP tools: the seed's mental-model tools plus reflect, retain, recall and get_operation.

Wiring only. Every tool is one call of ``HindsightApi`` — the same REST endpoint a client
would call — so a tool behaves exactly like the API (validation, error text, coalescing, the
release of a parked refresh by a manual one). Which API that is comes from the ``ToolBackend``
of the current request (a context variable): the stdio server (``hindsight mcp``) points it at
``--api-url`` over the network; the streamable HTTP endpoint mounted at ``/mcp`` points it at
the same process through a WSGI transport (``hindsight.mcp_server.http``).

A refused call (the server's 4xx/5xx, an unknown bank, a bad argument the SDK rejects) comes
back as a tool result with ``isError: true`` and the server's one-line message: the agent can
read it and correct itself; nothing raises out of the session.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from hindsight.cli.api import ApiError, HindsightApi
from hindsight.config import MCP_TOOL_NAMES
from hindsight.mcp_server.knowledge_tools import KNOWLEDGE_TOOL_ANNOTATIONS, knowledge_tools

TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
ListTagsMatch = Literal["any", "all", "exact"]
Detail = Literal["metadata", "content", "full"]
Budget = Literal["low", "mid", "high"]

BankArg = Annotated[
    str | None,
    Field(description="Memory bank id; defaults to the bank this server was started for."),
]
ModelIdArg = Annotated[str, Field(description="The mental model's id.")]


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


# ---------------------------------------------------------------------------------------------
# mental models


def create_mental_model(
    name: Annotated[str, Field(description="Human-readable name.")],
    source_query: Annotated[str, Field(description="The question the document answers.")],
    id: Annotated[str | None, Field(description="Custom id: ^[a-z0-9][a-z0-9-]{0,63}$.")] = None,
    tags: Annotated[list[str] | None, Field(description="Tags scoping what it reads.")] = None,
    tags_match: Annotated[
        TagsMatch | None,
        Field(description="How the tags filter source memories on refresh "
                          "(a tagged model defaults to all_strict)."),
    ] = None,
    max_tokens: Annotated[int | None, Field(description="Document length cap (256..8192).")] = None,
    refresh_after_consolidation: Annotated[
        bool | None, Field(description="Refresh automatically after consolidation.")
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Create a mental model; its first refresh runs in the background.

    Returns mental_model_id and the operation_id of that refresh (poll it with get_operation).
    """
    trigger = _body(tags_match=tags_match, refresh_after_consolidation=refresh_after_consolidation)
    body = _body(name=name, source_query=source_query, id=id, tags=tags, max_tokens=max_tokens,
                 trigger=trigger or None)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_create(bank, body))
    return result


def list_mental_models(
    tags: Annotated[list[str] | None, Field(description="Only models with these tags.")] = None,
    tags_match: ListTagsMatch | None = None,
    limit: Annotated[int | None, Field(description="Page size (1..1000, default 100).")] = None,
    offset: int | None = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """List the bank's mental models: metadata only (id, name, tags, is_stale, timestamps).

    Read one model's content with get_mental_model.
    """
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_list(
        bank, detail="metadata", tags=tags, tags_match=tags_match, limit=limit, offset=offset))
    return result


def get_mental_model(
    mental_model_id: ModelIdArg,
    detail: Annotated[
        Detail | None,
        Field(description="metadata, content (adds the document) or full (adds provenance; "
                          "the default)."),
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Read one mental model, with is_stale."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_get(
        bank, mental_model_id, detail=detail))
    return result


def update_mental_model(
    mental_model_id: ModelIdArg,
    name: str | None = None,
    source_query: str | None = None,
    tags: list[str] | None = None,
    max_tokens: int | None = None,
    trigger: Annotated[
        dict[str, Any] | None,
        Field(description="Trigger keys to change (merged key by key), e.g. "
                          '{"mode": "delta", "keep_trace": true}.'),
    ] = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Change a mental model's name, query, tags, max_tokens or trigger; returns the model."""
    body = _body(name=name, source_query=source_query, tags=tags, max_tokens=max_tokens,
                 trigger=trigger)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_update(
        bank, mental_model_id, body))
    return result


def delete_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Delete a mental model and its history."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_delete(
        bank, mental_model_id))
    return result


def refresh_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Refresh a mental model now (no rate floor; releases a parked automatic refresh).

    Returns the operation_id to poll with get_operation.
    """
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_refresh(
        bank, mental_model_id))
    return result


def clear_mental_model(mental_model_id: ModelIdArg, bank_id: BankArg = None) -> dict[str, Any]:
    """Empty a mental model's content (kept in its history); the next refresh rebuilds it."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.mental_model_clear(
        bank, mental_model_id))
    return result


# ---------------------------------------------------------------------------------------------
# memory


def reflect(
    query: Annotated[str, Field(description="The question to answer from memory.")],
    budget: Budget | None = None,
    tags: list[str] | None = None,
    tags_match: TagsMatch | None = None,
    max_tokens: int | None = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Answer a question from the bank: mental models first, then observations, then facts."""
    body = _body(query=query, budget=budget, tags=tags, tags_match=tags_match,
                 max_tokens=max_tokens)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.reflect(bank, body))
    return result


def retain(
    content: Annotated[str, Field(description="What to remember.")],
    context: str | None = None,
    tags: list[str] | None = None,
    timestamp: Annotated[str | None, Field(description="ISO 8601 event time.")] = None,
    document_id: str | None = None,
    async_processing: Annotated[
        bool, Field(description="Queue it as an operation instead of waiting.")
    ] = False,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Store a memory in the bank."""
    item = _body(content=content, context=context, tags=tags, timestamp=timestamp,
                 document_id=document_id)
    body = {"items": [item], "async": async_processing}
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.retain(bank, body))
    return result


def recall(
    query: Annotated[str, Field(description="What to look for.")],
    types: Annotated[
        list[Literal["world", "experience", "observation"]] | None,
        Field(description="Fact types to search."),
    ] = None,
    tags: list[str] | None = None,
    tags_match: TagsMatch | None = None,
    budget: Budget | None = None,
    max_tokens: int | None = None,
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Search the bank's memories (semantic + keyword), best first."""
    body = _body(query=query, types=types, tags=tags, tags_match=tags_match, budget=budget,
                 max_tokens=max_tokens)
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.recall(bank, body))
    return result


def get_operation(
    operation_id: Annotated[str, Field(description="The operation id a call returned.")],
    bank_id: BankArg = None,
) -> dict[str, Any]:
    """Status of an async operation (pending, processing, completed, failed, cancelled)."""
    result: dict[str, Any] = _call(bank_id, lambda api, bank: api.operation_get(
        bank, operation_id))
    return result


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    fn.__name__: fn
    for fn in (
        create_mental_model, list_mental_models, get_mental_model, update_mental_model,
        delete_mental_model, refresh_mental_model, clear_mental_model,
        reflect, retain, recall, get_operation,
    )
}
TOOLS.update(knowledge_tools(_call))
assert tuple(TOOLS) == MCP_TOOL_NAMES, "hindsight.config.MCP_TOOL_NAMES lists every tool"


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


def build_server(enabled: Iterable[str] = ()) -> MCPServer:
    """An MCP server with the given tools (all of them when ``enabled`` is empty)."""
    names = tuple(enabled) or tuple(TOOLS)
    unknown = sorted(set(names) - set(TOOLS))
    if unknown:
        raise ValueError(f"unknown MCP tools {unknown}; known: {', '.join(TOOLS)}")
    with _root_logging_untouched():
        server: MCPServer = MCPServer(
            "hindsight",
            log_level="WARNING",
            instructions="Hindsight memory: mental models (curated, auto-refreshed documents), "
                         "retain, recall and reflect over one memory bank.",
        )
    for name in names:
        fn = TOOLS[name]
        server.add_tool(fn, name=name, description=inspect.getdoc(fn),
                        annotations=KNOWLEDGE_TOOL_ANNOTATIONS.get(name),
                        structured_output=False)
    return server
