"""The MCP server: tools to remember messages, recall a context within a token budget, ask, and forget.

One server is scoped to one space. Over stdio it is the local user's space (a plain name, as the CLI uses); over
streamable HTTP every request carries ``Authorization: Bearer KEY`` and the tools act on the key's tenant's space of
that name (store key ``TENANT/SPACE``), exactly as the HTTP service does. Tools call only
:class:`AsyncMemory` methods (the composition root).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from tmem.errors import BuildBusy, StoreError, TmemError, public_message
from tmem.ingest.messages import MessageInput, with_request_ids
from tmem.memory import AsyncMemory
from tmem.settings import Settings
from tmem.store.control import ControlStore, check_name, open_control, store_space
from tmem.util.aio import blocking

log = logging.getLogger("tmem.mcp")

TENANT_SCOPE_KEY = "tmem.tenant"
INSTRUCTIONS = (
    "Long-term memory of one conversation space. Call `remember` with new messages as they arrive, `recall` with a "
    "query and a token budget before answering, `ask` for an answer drawn from memory (needs an LLM on the server), "
    "and `forget` to erase turns or memories."
)


class MessageArg(BaseModel):
    speaker: str = Field(min_length=1, max_length=200, description="Who said it.")
    text: str = Field(min_length=1, max_length=20_000)
    time: datetime | None = Field(default=None, description="ISO 8601 time of the message (default: now).")
    id: str | None = Field(
        default=None,
        max_length=200,
        description="Stable id: makes remembering idempotent. Without an id (and without request_id) the message is "
        "stored on every call.",
    )


class Remembered(BaseModel):
    space: str
    added: int
    skipped: int
    built: bool = Field(description="Whether the memory was built (incrementally) after storing.")
    stale_turns: int = Field(
        description="Turns stored but in no built scene yet: recall finds them as raw turns until a build structures them."
    )


class Recalled(BaseModel):
    text: str = Field(description="The context to read, within the token budget.")
    tokens: int
    turn_ids: list[str] = Field(description="Turns whose text or distilled fact is in the context.")
    hits: list[dict[str, Any]] = Field(description="What entered the context, with the routes that reached it.")
    unbuilt_turns: int = Field(
        description="Turns stored after the last build: the context can hold them as raw turns only (no scene, item)."
    )


class Answered(BaseModel):
    answer: str
    reasoning: str | None = None
    turn_ids: list[str] = Field(description="Turns whose text was in the answerer's context.")


class Forgotten(BaseModel):
    turns_forgotten: list[str]
    items_forgotten: list[str]
    already_forgotten: list[str]
    erased: bool = Field(description="The freed bytes are erased; False: forgotten, erasure pending (finished later).")
    status: str = Field(description="'forgotten' or 'forgotten, erasure pending'.")


SpaceResolver = Callable[[Context], str]
BuildWhen = Literal["now", "auto", "no"]


def build_server(memory: AsyncMemory, resolve: SpaceResolver, *, space: str, name: str = "tmem") -> MCPServer:
    """An MCPServer whose tools act on the store space ``resolve(ctx)`` (shown to the client as ``space``)."""
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)

    @server.tool(description="Store new conversation messages in memory, then build the memory (incrementally).")
    async def remember(
        messages: list[MessageArg], ctx: Context, build: BuildWhen = "now", request_id: str | None = None
    ) -> Remembered:
        """build: 'now' builds after storing; 'auto' builds when the server's build policy says so (enough new turns
        or quiet time); 'no' only stores. request_id: calling again with the same request_id stores its messages
        once (a message without an id gets the id REQUEST_ID:N)."""
        if not messages:
            raise ToolError("Give at least one message.")
        key = resolve(ctx)
        received = datetime.now(UTC).replace(tzinfo=None)
        try:
            given: list[MessageInput | dict[str, object]] = [m.model_dump(exclude_none=True) for m in messages]
            if request_id is not None:
                given = with_request_ids(given, request_id)
            report = await memory.add_messages(key, given, received_at=received)
            built = False
            if build == "now":
                built = await _build(memory, key)
            elif build == "auto":
                built = await memory.build_if_due(key, idle_seconds=0.0) is not None
            stale = (await memory.staleness(key)).stale_turns
        except TmemError as exc:
            raise _tool_error(exc, ctx) from exc
        skipped = len(report.skipped) + len(report.forgotten)
        return Remembered(space=space, added=len(report.added), skipped=skipped, built=built, stale_turns=stale)

    @server.tool(description="Recall what memory holds for a query: a context text within a token budget.")
    async def recall(query: str, ctx: Context, max_tokens: int = 2000) -> Recalled:
        if not query.strip():
            raise ToolError("Give a query.")
        if not 0 <= max_tokens <= 32_000:
            raise ToolError("max_tokens must be between 0 and 32000.")
        try:
            found = await memory.context(resolve(ctx), query, max_tokens=max_tokens)
        except TmemError as exc:
            raise _tool_error(exc, ctx) from exc
        return Recalled(
            text=found.text,
            tokens=found.tokens,
            turn_ids=found.turn_ids,
            hits=[{"kind": h.kind, "id": h.id, "routes": [r.name for r in h.routes]} for h in found.hits],
            unbuilt_turns=found.unbuilt_turns,
        )

    @server.tool(description="Answer a question from memory with the server's LLM (fails in the extractive mode).")
    async def ask(question: str, ctx: Context, at: datetime | None = None) -> Answered:
        try:
            answer = await memory.ask(resolve(ctx), question, at)
        except TmemError as exc:
            raise _tool_error(exc, ctx) from exc
        return Answered(answer=answer.answer, reasoning=answer.reasoning, turn_ids=answer.context.turn_ids)

    @server.tool(description="Forget turns and memory items for good: erased, and never rebuilt.")
    async def forget(ctx: Context, turn_ids: list[str] | None = None, item_ids: list[str] | None = None) -> Forgotten:
        if not turn_ids and not item_ids:
            raise ToolError("Name at least one id in turn_ids or item_ids (recall shows them).")
        try:
            report = await memory.forget(resolve(ctx), turn_ids=turn_ids or [], item_ids=item_ids or [])
        except TmemError as exc:
            raise _tool_error(exc, ctx) from exc
        return Forgotten(
            turns_forgotten=report.turns_forgotten,
            items_forgotten=report.items_forgotten,
            already_forgotten=report.already_forgotten,
            erased=report.erased,
            status="forgotten" if report.erased else "forgotten, erasure pending",
        )

    return server


def _tool_error(exc: TmemError, ctx: Context) -> ToolError:
    """A tool's error as the client reads it: rendered from the error's fields for the request's tenant."""
    tenant = _tenant_or_none(ctx)
    if tenant is None:  # stdio: the local user reads everything
        return ToolError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, StoreError):
        log.error("Store error in an MCP tool: %s", exc)
    return ToolError(f"{type(exc).__name__}: {public_message(exc, tenant)}")


async def _build(memory: AsyncMemory, key: str) -> bool:
    try:
        await memory.build(key)
    except BuildBusy:
        return False
    return True


async def serve_stdio(settings: Settings, space: str) -> None:
    """Serve the local space ``space`` over stdio (the process's stdin/stdout) until the client closes it."""
    async with AsyncMemory.open(settings=settings) as memory:
        memory.core.start_upkeep(settings.upkeep_seconds)
        await build_server(memory, lambda _ctx: space, space=space).run_stdio_async()


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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
    control = open_control(memory.core.store)
    server = build_server(memory, lambda ctx: store_space(_tenant_of(ctx), space), space=space)
    inner = server.streamable_http_app()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        memory.core.start_upkeep(settings.upkeep_seconds)
        try:
            async with server.session_manager.run():
                yield
        finally:
            control.close()
            await memory.aclose()

    app = Starlette(lifespan=lifespan)
    app.mount("/", BearerAuth(inner, control))
    return app


def serve_http(settings: Settings, space: str, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(http_app(settings, space), host=host, port=port, log_level="warning")
