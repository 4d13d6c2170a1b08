"""``hindsight mcp --bank BANK``: the MCP server over stdio, what desktop agents launch.

The tools call the REST API at ``--api-url`` (``HindsightApi`` over the network), the same
calls the HTTP endpoint's tools make in-process. Nothing is printed on stdout but the
protocol; logs go to stderr.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio

from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.tools import ToolBackend, build_server, set_backend


def run_stdio(*, api: HindsightApi, bank_id: str | None, enabled: Iterable[str] = ()) -> None:
    # ``--bank``: the one-bank tools (no bank_id argument), as upstream's /mcp/{bank_id}/.
    server = build_server(enabled, one_bank=bank_id is not None)

    async def main() -> None:
        set_backend(ToolBackend(api=api, default_bank=bank_id))
        await server.run_stdio_async()

    anyio.run(main)
