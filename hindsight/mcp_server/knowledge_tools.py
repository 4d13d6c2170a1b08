"""The knowledge-base MCP tools (upstream 1.1.0's ``get_knowledge_base_tree``,
``search_knowledge_base``, ``get_knowledge_page``, ``create_knowledge_folder``,
``create_knowledge_page``, ``update_knowledge_node``, ``delete_knowledge_node``), written with
the knowledge base (issue 23).

``hindsight.mcp_server.tools`` registers every entry of ``TOOLS`` after its own: a tool name →
(the function, its hint: ``tools.READ_ONLY``, ``tools.WRITE`` or ``tools.DESTRUCTIVE``). A tool
is written like those of ``tools`` (``bank_id: tools.BankArg = None`` last, one call of
``HindsightApi`` through ``tools._call``); its name goes into
``hindsight.config.MCP_KNOWLEDGE_TOOL_NAMES``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TOOLS: dict[str, tuple[Callable[..., Any], str]] = {}
