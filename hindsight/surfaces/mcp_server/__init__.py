"""The MCP server: tools in ``tools``, the stdio transport in ``stdio`` (``hindsight mcp``),
the streamable HTTP endpoint at ``/mcp`` in ``http``."""
