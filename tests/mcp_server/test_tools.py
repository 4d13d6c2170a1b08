"""Unit tests of the tool registry and its configuration (no server)."""

from __future__ import annotations

import anyio

from hindsight.config import MCP_TOOL_NAMES, read_config
from hindsight.mcp_server.tools import TOOLS, build_server


def test_enabled_tools_are_read_from_the_environment() -> None:
    cfg = read_config({"HINDSIGHT_API_MCP_ENABLED_TOOLS": " recall, get_mental_model ,"})
    assert cfg.mcp_enabled_tools == ("recall", "get_mental_model") and cfg.errors == ()
    assert read_config({}).mcp_enabled_tools == () and read_config({}).mcp_enabled is True
    assert read_config({"HINDSIGHT_API_MCP_ENABLED": "false"}).mcp_enabled is False


def test_an_unknown_tool_name_is_a_configuration_error_naming_it() -> None:
    cfg = read_config({"HINDSIGHT_API_MCP_ENABLED_TOOLS": "recall,recal"})
    [(name, message, _rule)] = cfg.errors
    assert name == "HINDSIGHT_API_MCP_ENABLED_TOOLS" and "'recal'" in message
    assert cfg.mcp_enabled_tools == ("recall",)


def test_build_server_offers_the_enabled_tools_in_order() -> None:
    assert tuple(TOOLS) == MCP_TOOL_NAMES

    async def names(enabled: tuple[str, ...]) -> list[str]:
        return [t.name for t in await build_server(enabled).list_tools()]

    assert anyio.run(names, ()) == list(MCP_TOOL_NAMES)
    assert anyio.run(names, ("reflect", "recall")) == ["reflect", "recall"]
