"""``tmem mcp``: the memory as an MCP server (official ``mcp`` SDK), over stdio or streamable HTTP.

(Named ``mcp_server`` so that it never shadows the SDK's ``mcp`` package.)
"""

from __future__ import annotations

from tmem.util.extras import require_extra

require_extra("mcp", "tmem.mcp_server (the MCP server)")

from tmem.mcp_server.server import build_server, serve_http, serve_stdio  # noqa: E402 - after the check

__all__ = ["build_server", "serve_http", "serve_stdio"]
