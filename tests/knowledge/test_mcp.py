"""The knowledge-base MCP tools, driven by the SDK's own client over the streamable HTTP
endpoint of the live server (in the test's process): upstream's names, arguments and hints, and
each tool's answer the API's."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hindsight.surfaces.mcp_server.knowledge_tools import KNOWLEDGE_TOOL_NAMES
from tests.factories import make_bank
from tests.surfaces.mcp_server.test_mcp import call
from tests.surfaces.mcp_server.test_mcp import call_error as refused

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "mcp-kb"


def session(live_server, body) -> Any:
    async def main() -> Any:
        http = httpx2.AsyncClient(timeout=60.0)
        client = Client(streamable_http_client(f"{live_server.url}/mcp/{BANK}/", http_client=http),
                        read_timeout_seconds=60)
        async with client:
            return await body(client)

    return anyio.run(main)


def test_the_knowledge_tools_have_upstreams_names_arguments_and_hints(live_server):
    make_bank(BANK)

    async def body(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = session(live_server, body)
    assert set(KNOWLEDGE_TOOL_NAMES) <= set(tools)
    args = {name: list(tools[name].input_schema["properties"]) for name in KNOWLEDGE_TOOL_NAMES}
    # The bank is pinned by the path (/mcp/{bank_id}/): no tool takes bank_id, as upstream.
    assert args == {
        "get_knowledge_base_tree": [],
        "search_knowledge_base": ["query", "limit"],
        "get_knowledge_page": ["page_id"],
        "create_knowledge_folder": ["name", "parent_id"],
        "create_knowledge_page": ["name", "source_query", "parent_id", "tags", "max_tokens",
                                  "trigger", "refresh_after_consolidation"],
        "update_knowledge_node": ["node_id", "name", "parent_id", "source_query", "tags",
                                  "max_tokens", "trigger", "refresh_after_consolidation"],
        "delete_knowledge_node": ["node_id"],
    }
    hints = {name: (tools[name].annotations.read_only_hint,
                    tools[name].annotations.destructive_hint) for name in KNOWLEDGE_TOOL_NAMES}
    assert hints["get_knowledge_base_tree"] == (True, None)
    assert hints["search_knowledge_base"][0] and hints["get_knowledge_page"][0]
    assert hints["delete_knowledge_node"] == (False, True)
    assert hints["create_knowledge_page"] == (False, False)
    assert tools["search_knowledge_base"].input_schema["properties"]["limit"]["default"] == 10


def test_the_knowledge_tools_build_read_move_search_and_delete(live_server):
    make_bank(BANK)

    async def body(client: Client) -> None:
        ops = await call(client, "create_knowledge_folder", name="Ops")
        page = await call(client, "create_knowledge_page", name="Runbook",
                          source_query="How do we deploy?", parent_id=ops["id"],
                          trigger={"fact_types": ["world"]}, refresh_after_consolidation=False)
        assert page["status"] == "created" and page["page_id"].startswith("kp-")
        tree = await call(client, "get_knowledge_base_tree")
        [root] = tree["roots"]
        [runbook] = root["children"]
        assert runbook["id"] == page["page_id"] and runbook["is_stale"] is False
        assert runbook["trigger"]["refresh_after_consolidation"] is False
        assert runbook["trigger"]["mode"] == "delta"

        read = await call(client, "get_knowledge_page", page_id=page["page_id"])
        assert "body" not in read and read["markdown"].endswith("No content yet.\n")

        moved = await call(client, "update_knowledge_node", node_id=page["page_id"],
                           name="Deploy runbook", parent_id="root")
        assert moved["parent_id"] is None and moved["name"] == "Deploy runbook"
        assert "Provide name" in await refused(client, "update_knowledge_node",
                                               node_id=page["page_id"])
        assert "conflicts with" in await refused(
            client, "create_knowledge_page", name="X", source_query="q?",
            trigger={"refresh_after_consolidation": True}, refresh_after_consolidation=False)
        assert "409" in await refused(client, "create_knowledge_page", name="deploy runbook",
                                      source_query="Again?")

        hits = await call(client, "search_knowledge_base", query="deploy runbook", limit=500)
        assert hits["results"][0]["id"] == page["page_id"]

        assert await call(client, "delete_knowledge_node", node_id=ops["id"]) == {
            "status": "deleted", "node_id": ops["id"]}
        assert "404" in await refused(client, "delete_knowledge_node", node_id=ops["id"])
        tree = await call(client, "get_knowledge_base_tree")
        assert [n["name"] for n in tree["roots"]] == ["Deploy runbook"]

    session(live_server, body)
