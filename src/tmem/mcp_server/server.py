"""The MCP server: the tools of :mod:`tmem.mcp_server.tools` over stdio or streamable HTTP.

One server serves many spaces: every tool takes an optional ``space`` (default: the server's ``--space``). Over stdio
they are the local user's spaces (plain names, as the CLI uses); over streamable HTTP every request carries
``Authorization: Bearer KEY`` and the tools act on the key's tenant's space of that name (``Scope(TENANT, SPACE)``),
exactly as the HTTP service does; error texts show the tenant its own names only. Logs go to ``--log-file`` when
given, else stay at warning level on stderr (the stdio transport's stdout is the protocol).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from tmem import __version__
from tmem.errors import StoreError, TmemError, public_message
from tmem.mcp_server.builds import Builds
from tmem.mcp_server.tools import register
from tmem.memory import AsyncMemory, Memory
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.control import ControlStore, check_name, tenant_scope
from tmem.util.aio import blocking
from tmem.util.invalid import field_errors, summary

log = logging.getLogger("tmem.mcp")

TENANT_SCOPE_KEY = "tmem.tenant"
INSTRUCTIONS = (
    "Long-term memory of conversations, one space per conversation (every tool takes `space`; default: the server's). "
    "Call `remember` with new messages as they arrive (metadata optional), `recall` with a query and a token budget "
    "before answering (`where` filters by metadata, speaker, dates), `ask` for an answer drawn from memory (needs an "
    "LLM on the server); `list_memories`, `get_memory`, `update_memory` and `memory_history` inspect and correct "
    "single memories, `forget` erases turns or memories, `delete_space` a whole space, `status` shows build state."
)


def configure_logging(log_file: str | None) -> None:
    """The server's logs: INFO and up to ``log_file`` when given, else WARNING and up on stderr; bm25s' DEBUG chatter
    ('Building index from tokens') is silenced either way."""
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler()
    level = logging.INFO if log_file else logging.WARNING
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(level)  # bm25s sets its own logger to DEBUG when imported: the handler drops those records
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("bm25s").setLevel(logging.WARNING)


SpaceResolver = Callable[[Context, str], Scope]  # (ctx, space name) -> the space's scope


def shown_error(exc: TmemError, scope: Scope) -> str:
    """An error of a background job on ``scope``, as that space's tenant reads it."""
    return f"{type(exc).__name__}: {_for_agent(exc, scope.tenant or None)}"  # rendered from its fields


class _Server(MCPServer):
    """The SDK's server, answering a tool call whose arguments fail the tool's schema with one short line per field
    (what the caller must fix), instead of pydantic's dump with its documentation link."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            fixes = summary(field_errors(cause.errors(include_url=False)))
            raise ToolError(f"Fix the arguments of {name}: {fixes}.") from cause


def build_server(
    memory: AsyncMemory, resolve: SpaceResolver, *, space: str, builds: Builds | None = None, name: str = "tmem"
) -> MCPServer:
    """An MCPServer whose tools act on the scope ``resolve(ctx, name)`` for the ``space`` argument a tool gets
    (default: ``space``), shown to the client by its name; ``builds`` runs the background builds."""
    server: MCPServer = _Server(name, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def resolved(ctx: Context, given: str | None) -> tuple[Scope, str]:
        shown = given if given is not None else space
        return resolve(ctx, shown), shown

    register(server, memory, resolved, _tool_error, builds or Builds(memory, shown_error))
    return server


def _tool_error(exc: TmemError, ctx: Context) -> ToolError:
    """A tool's error as the client reads it: rendered from the error's fields for the request's tenant."""
    tenant = _tenant_or_none(ctx)
    if tenant is not None and isinstance(exc, StoreError):
        log.error("Store error in an MCP tool: %s", exc)
    return ToolError(f"{type(exc).__name__}: {_for_agent(exc, tenant)}")


def _for_agent(exc: TmemError, tenant: str | None) -> str:
    """An error as an agent reads it: advice it can follow with tools, not a command to run (TmemError.for_agent);
    over HTTP (a tenant), a store error's text stays in the server's log (public_message). On stdio the local user's
    agent reads everything else as raised."""
    if tenant is not None and isinstance(exc, StoreError):
        return public_message(exc, tenant)
    return exc.for_agent(tenant)


async def serve_stdio(settings: Settings, space: str) -> None:
    """Serve the local spaces over stdio (the process's stdin/stdout), ``space`` by default, until the client closes
    it; background builds finish before the memory closes."""
    async with AsyncMemory.open(settings=settings) as memory:
        memory.core.start_upkeep(settings.upkeep_seconds)
        builds = Builds(memory, shown_error, lambda: Memory.open(settings=settings))
        try:
            await build_server(
                memory, lambda _ctx, name: Scope.local(name), space=space, builds=builds
            ).run_stdio_async()
        finally:
            await builds.aclose()


def _tenant_or_none(ctx: Context) -> str | None:
    """The tenant of an HTTP request's key (None over stdio: the local user)."""
    try:
        request = ctx.request_context.request
    except ValueError:  # no request context (called outside a request)
        return None
    tenant = getattr(request, "scope", {}).get(TENANT_SCOPE_KEY) if request is not None else None
    return tenant if isinstance(tenant, str) else None


def _tenant_of(ctx: Context) -> str:
    tenant = _tenant_or_none(ctx)
    if tenant is None:
        raise ToolError("No API key on this request: send 'Authorization: Bearer KEY'.")
    return tenant


class BearerAuth:
    """ASGI middleware: every HTTP request needs a valid key; its tenant rides in the scope to the tools."""

    def __init__(self, app: ASGIApp, control: ControlStore) -> None:
        self.app = app
        self.control = control

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
        scheme, _, key = header.partition(" ")
        tenant = await blocking(self.control.authenticate, key.strip()) if scheme.lower() == "bearer" else None
        if tenant is None:
            body = b'{"error": "unauthorized", "detail": "Send Authorization: Bearer KEY (tmem keys create TENANT)."}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[TENANT_SCOPE_KEY] = tenant
        await self.app(scope, receive, send)


def http_app(settings: Settings, space: str) -> ASGIApp:
    """The streamable-HTTP MCP app at ``/mcp`` for ``space`` of each key's tenant, behind bearer-key auth."""
    check_name(space, "space")
    memory = AsyncMemory.open(settings=settings)
    control = memory.core.control()
    builds = Builds(memory, shown_error, lambda: Memory.open(settings=settings))
    server = build_server(memory, lambda ctx, name: tenant_scope(_tenant_of(ctx), name), space=space, builds=builds)
    inner = server.streamable_http_app()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        memory.core.start_upkeep(settings.upkeep_seconds)
        try:
            async with server.session_manager.run():
                yield
        finally:
            await builds.aclose()
            control.close()
            await memory.aclose()

    app = Starlette(lifespan=lifespan)
    app.mount("/", BearerAuth(inner, control))
    return app


def serve_http(settings: Settings, space: str, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(http_app(settings, space), host=host, port=port, log_level="warning")
