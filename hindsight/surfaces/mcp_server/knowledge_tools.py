"""The knowledge-base MCP tools, with upstream 1.1.0's names, arguments and hints.

``get_knowledge_base_tree``, ``search_knowledge_base``, ``get_knowledge_page`` (read-only),
``create_knowledge_folder``, ``create_knowledge_page``, ``update_knowledge_node`` (writes) and
``delete_knowledge_node`` (destructive). Like every tool here, each is one call of the HTTP API
(``HindsightApi``), so it validates, answers and fails exactly as the API does; a refusal is a
tool error carrying the server's message. As upstream, the export is not a tool (a whole bank's
bundle does not belong in an agent's context; it is on the HTTP API and ``hindsight kb export``),
and ``update_knowledge_node`` takes ``parent_id="root"`` for the top level (a tool argument
cannot tell null from left out).

Self-contained: ``knowledge_tools(call)`` builds the tools around the registry's ``call`` (the
request's backend and default bank, ``hindsight.surfaces.mcp_server.tools._call``) and
``KNOWLEDGE_TOOL_ANNOTATIONS`` holds their hints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from hindsight.surfaces.cli.api import HindsightApi

Call = Callable[[str | None, Callable[[HindsightApi, str], Any]], Any]

ROOT_PARENT = "root"
SEARCH_LIMIT = (1, 50)
KNOWLEDGE_TOOL_NAMES = (
    "get_knowledge_base_tree", "search_knowledge_base", "get_knowledge_page",
    "create_knowledge_folder", "create_knowledge_page", "update_knowledge_node",
    "delete_knowledge_node",
)
_READ_ONLY = ("get_knowledge_base_tree", "search_knowledge_base", "get_knowledge_page")
KNOWLEDGE_TOOL_ANNOTATIONS: dict[str, ToolAnnotations] = {
    name: ToolAnnotations(
        read_only_hint=name in _READ_ONLY,
        destructive_hint=None if name in _READ_ONLY else name == "delete_knowledge_node",
        open_world_hint=False,
    )
    for name in KNOWLEDGE_TOOL_NAMES
}

BankArg = Annotated[str | None, Field(
    description="Optional bank (defaults to session bank). Use for cross-bank operations.")]
TriggerArg = Annotated[dict[str, Any] | None, Field(
    description="Refresh policy fields to set (mode, refresh_after_consolidation, refresh_cron, "
                "fact_types, tags_match, tag_groups, exclude_mental_models, ...); fields left "
                "out keep the page's current values (on create: the page defaults — delta "
                "rebuilds from consolidated observations after each consolidation, sibling "
                "pages excluded).")]
LegacyRefreshArg = Annotated[bool | None, Field(
    description="Legacy shorthand for trigger.refresh_after_consolidation.")]


def _trigger(trigger: dict[str, Any] | None, refresh_after_consolidation: bool | None,
             ) -> dict[str, Any] | None:
    patch = dict(trigger or {})
    if refresh_after_consolidation is not None:
        stated = patch.get("refresh_after_consolidation", refresh_after_consolidation)
        if stated != refresh_after_consolidation:
            raise ToolError(
                f"trigger.refresh_after_consolidation={stated!r} conflicts with "
                f"refresh_after_consolidation={refresh_after_consolidation!r}; set it in one place")
        patch["refresh_after_consolidation"] = refresh_after_consolidation
    return patch or None


def _sent(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def knowledge_tools(call: Call) -> dict[str, Callable[..., dict[str, Any]]]:
    """The tools, by name, in upstream's order, calling the API through ``call``."""

    def get_knowledge_base_tree(bank_id: BankArg = None) -> dict[str, Any]:
        """Browse the knowledge base as a nested tree of folders and pages.

        Start here to discover what the bank documents: each page is a living markdown document
        synthesized from the bank's memories, and folders group them. Use get_knowledge_page to
        read a page's content, or search_knowledge_base when you know what you are looking for.

        Pages report `is_stale`: false means the page is provably up to date; true means
        something in its scope was written since its last refresh, so it MAY be out of date.
        """
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_tree(bank))
        return result

    def search_knowledge_base(
        query: Annotated[str, Field(description="What to search for")],
        limit: Annotated[int, Field(description="Maximum pages to return (1-50, default: 10)")
                         ] = 10,
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Find knowledge pages by relevance (hybrid keyword + semantic search).

        Searches page names and content, returning ranked pages with a short snippet each. Read
        a hit in full with get_knowledge_page. This searches the curated knowledge base only —
        use recall to search raw memories.
        """
        low, high = SEARCH_LIMIT
        clamped = max(low, min(limit, high))  # an agent asking for 500 wants results, not a 422
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_search(
            bank, q=query, limit=clamped))
        return result

    def get_knowledge_page(
        page_id: Annotated[str, Field(description="The ID of the page to read (a `kp-...` "
                                                  "node id)")],
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Read a knowledge page as a markdown document.

        Returns the page's YAML frontmatter (id, type, title, description, tags, timestamp)
        followed by its synthesized markdown body. Discover page ids with
        get_knowledge_base_tree or search_knowledge_base.
        """
        page: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_page_get(bank, page_id))
        # The document already holds the body: returned once, not beside a duplicate field.
        return {key: page[key] for key in ("id", "name", "type", "description", "tags",
                                           "timestamp", "markdown")}

    def create_knowledge_folder(
        name: Annotated[str, Field(description="Folder name")],
        parent_id: Annotated[str | None, Field(
            description="Optional parent folder id (a `kf-...` node id). Omit to create at the "
                        "top level.")] = None,
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Create a folder in the knowledge base.

        Folders group pages; they hold no content of their own.
        """
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_folder_create(
            bank, {"name": name, "parent_id": parent_id}))
        return result

    def create_knowledge_page(
        name: Annotated[str, Field(description="Page name (must be unique within its folder)")],
        source_query: Annotated[str, Field(
            description="The question this page answers and rebuilds itself from")],
        parent_id: Annotated[str | None, Field(
            description="Optional parent folder id (a `kf-...` node id). Omit to create at the "
                        "top level.")] = None,
        tags: Annotated[list[str] | None, Field(
            description="Optional tags scoping which memories the page is built from")] = None,
        max_tokens: Annotated[int | None, Field(
            description="Maximum tokens for the generated content (default: 4096)")] = None,
        trigger: TriggerArg = None,
        refresh_after_consolidation: LegacyRefreshArg = None,
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Create a knowledge page — a living document answering a question.

        The page's content is synthesized from the bank's memories by running source_query,
        asynchronously: use the returned operation_id to track completion (get_operation), then
        read it with get_knowledge_page. By default the page keeps itself current, rebuilding
        after each consolidation.

        EXAMPLES:
        - name="Deployment Runbook", source_query="How is this service deployed and rolled back?"
        - name="Team Preferences", source_query="What tools and conventions does the team prefer?"
        """
        body = _sent(name=name, source_query=source_query, parent_id=parent_id, tags=tags,
                     max_tokens=max_tokens,
                     trigger=_trigger(trigger, refresh_after_consolidation))
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_page_create(bank, body))
        return {**result, "status": "created",
                "message": f"Page '{name}' created. Content is being generated asynchronously."}

    def update_knowledge_node(
        node_id: Annotated[str, Field(
            description="The ID of the folder (`kf-...`) or page (`kp-...`) to update")],
        name: Annotated[str | None, Field(description="New name for the node")] = None,
        parent_id: Annotated[str | None, Field(
            description='Folder id to move the node into, or "root" to move it to the top '
                        "level")] = None,
        source_query: Annotated[str | None, Field(
            description="Pages only — the new question the page answers")] = None,
        tags: Annotated[list[str] | None, Field(
            description="Pages only — replacement tag list (pass [] to clear)")] = None,
        max_tokens: Annotated[int | None, Field(
            description="Pages only — new maximum tokens for the generated content")] = None,
        trigger: TriggerArg = None,
        refresh_after_consolidation: LegacyRefreshArg = None,
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Rename or move a folder/page, and/or update a page's options.

        Only the arguments you pass are changed; everything else keeps its current value.
        Changing source_query schedules an async refresh so the page rebuilds against the new
        question.
        """
        body = _sent(name=name, source_query=source_query, tags=tags, max_tokens=max_tokens,
                     trigger=_trigger(trigger, refresh_after_consolidation))
        if parent_id is not None:
            body["parent_id"] = None if parent_id == ROOT_PARENT else parent_id
        if not body:
            raise ToolError("Provide name, parent_id, source_query, tags, max_tokens, trigger, "
                            "and/or refresh_after_consolidation to update")
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.kb_node_update(
            bank, node_id, body))
        return result

    def delete_knowledge_node(
        node_id: Annotated[str, Field(
            description="The ID of the folder (`kf-...`) or page (`kp-...`) to delete")],
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Delete a knowledge-base folder or page and everything under it.

        Deleting a folder also deletes its whole subtree, and each deleted page takes its
        backing mental model with it. This cannot be undone.
        """
        call(bank_id, lambda api, bank: api.kb_node_delete(bank, node_id))
        return {"status": "deleted", "node_id": node_id}

    tools = (get_knowledge_base_tree, search_knowledge_base, get_knowledge_page,
             create_knowledge_folder, create_knowledge_page, update_knowledge_node,
             delete_knowledge_node)
    return {fn.__name__: fn for fn in tools}
