"""``tmem serve`` (the HTTP service) and ``tmem mcp`` (the MCP server)."""

from __future__ import annotations

from pathlib import Path

import click

from tmem.cli.context import AppContext, pass_app, with_home
from tmem.settings import Settings
from tmem.util.extras import require_extra

_DIR = click.option(
    "--dir",
    "home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Memory directory to serve (overrides the global --dir).",
)


def _settings(app: AppContext, home: Path | None) -> Settings:
    return with_home(app.settings, home)  # the rule of every command: a database URL is never dropped silently


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@_DIR
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Build worker threads.")
@click.option(
    "--max-body", default=1 << 20, show_default=True, type=click.IntRange(1024), help="Largest request body, bytes."
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
@pass_app
def serve(
    app: AppContext, host: str, port: int, home: Path | None, workers: int, max_body: int, log_level: str
) -> None:
    """Serve the memory over HTTP (every request needs 'Authorization: Bearer KEY'; see `tmem keys`)."""
    require_extra("server", "tmem serve")
    import uvicorn

    from tmem.service import create_app
    from tmem.store import open_store

    settings = _settings(app, home)
    open_store(settings.store_url, create_dirs=settings.database_url is None).close()  # fails here, in one line
    click.echo(f"Serving {settings.store_place} on http://{host}:{port} (OpenAPI at /openapi.json)", err=True)
    uvicorn.run(create_app(settings, workers=workers, max_body=max_body), host=host, port=port, log_level=log_level)


@click.command("mcp")
@click.option("--space", required=True, help="The space a tool acts on when its call names none.")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (the local user's spaces) or streamable HTTP at /mcp (the spaces of each API key's tenant).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (http).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (http).")
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the server's log (INFO and up) to this file; without it only warnings go to stderr.",
)
@_DIR
@pass_app
def mcp(
    app: AppContext, space: str, transport: str, host: str, port: int, log_file: Path | None, home: Path | None
) -> None:
    """Serve memory as an MCP server: remember, recall, ask, list_memories, get_memory, update_memory,
    memory_history, forget, delete_space and status, each on any space (default --space)."""
    require_extra("mcp", "tmem mcp")
    import anyio

    from tmem.mcp_server import serve_http, serve_stdio
    from tmem.mcp_server.server import configure_logging
    from tmem.store import open_store

    configure_logging(str(log_file) if log_file else None)
    settings = _settings(app, home)
    if transport == "stdio":
        anyio.run(serve_stdio, settings, space)
        return
    open_store(settings.store_url, create_dirs=settings.database_url is None).close()  # fails here, in one line
    click.echo(f"MCP (streamable HTTP), default space {space!r}, on http://{host}:{port}/mcp", err=True)
    serve_http(settings, space, host, port)


def register(cli: click.Group) -> None:
    cli.add_command(serve)
    cli.add_command(mcp)
