"""``tmem mcp``: the memory as an MCP server (official ``mcp`` SDK), over stdio or streamable HTTP.

(Named ``mcp_server`` so that it never shadows the SDK's ``mcp`` package.)
"""

from __future__ import annotations

from tmem.mcp_server.server import build_server, serve_http, serve_stdio

__all__ = ["build_server", "serve_http", "serve_stdio"]
