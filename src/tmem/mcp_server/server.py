"""The MCP server: tools to remember messages, recall a context within a token budget, ask, and forget.

One server is scoped to one space. Over stdio it is the local user's space (a plain name, as the CLI uses); over
streamable HTTP every request carries ``Authorization: Bearer KEY`` and the tools act on the key's tenant's space of
that name (store key ``TENANT/SPACE``), exactly as the HTTP service does. Tools call only :class:`Memory` methods, in
a worker thread so the event loop stays free.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from tmem.answer import QuestionTime
from tmem.errors import TmemError
from tmem.memory import Memory
from tmem.models import SessionInput, TurnInput
from tmem.store.control import ControlStore, check_name, store_space
from tmem.util.text import text_hash

TENANT_SCOPE_KEY = "tmem.tenant"
INSTRUCTIONS = (
    "Long-term memory of one conversation space. Call `remember` with new messages as they arrive, `recall` with a "
    "query and a token budget before answering, `ask` for an answer drawn from memory (needs an LLM on the server), "
    "and `forget` to erase turns or memories."
)


class MessageArg(BaseModel):
    speaker: str = Field(min_length=1, max_length=200, description="Who said it.")
    text: str = Field(min_length=1, max_length=20_000)
    time: datetime | None = Field(default=None, description="ISO 8601 time of the message.")
    id: str | None = Field(default=None, max_length=200, description="Stable id: makes remembering idempotent.")


class Remembered(BaseModel):
    space: str
    added: int
    skipped: int
    built: bool = Field(description="Whether the memory was (incrementally) built after storing.")


class Answered(BaseModel):
    answer: str
    reasoning: str | None = None
    turn_ids: list[str] = Field(description="Turns whose text was in the answerer's context.")


SpaceResolver = Callable[[Context], str]


def _tool_error(exc: TmemError) -> ToolError:
    return ToolError(f"{type(exc).__name__}: {exc}")


def build_server(memory: Memory, resolve: SpaceResolver, *, space: str, name: str = "tmem") -> MCPServer:
    """An MCPServer whose tools act on the store space ``resolve(ctx)`` (shown to the client as ``space``)."""
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)

    async def call(fn: Callable[[], Any]) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn)
        except TmemError as exc:
            raise _tool_error(exc) from exc

    @server.tool(description="Store new conversation messages in memory (then build the memory incrementally).")
    async def remember(messages: list[MessageArg], ctx: Context, build: bool = True) -> Remembered:
        if not messages:
            raise ToolError("Give at least one message.")
        key = resolve(ctx)

        def run() -> Remembered:
            first = messages[0].time
            if first is None:
                raise ToolError("The first message needs a 'time' (ISO 8601): it dates the conversation.")
            canonical = "\n".join(m.model_dump_json() for m in messages)
            session_id = "m-" + text_hash(canonical)[:16]
            turns, last = [], first
            for n, m in enumerate(messages):
                last = m.time or last
                turns.append(TurnInput(id=m.id or f"{session_id}:{n}", speaker=m.speaker, text=m.text, time=last))
            report = memory.add_sessions(key, [SessionInput(id=session_id, started_at=first, turns=turns)])
            if build:
                memory.build(key)
            added = report.turns_added
            return Remembered(space=space, added=added, skipped=len(messages) - added, built=build)

        result: Remembered = await call(run)
        return result

    @server.tool(description="Answer a question from memory with the server's LLM (fails in the extractive mode).")
    async def ask(question: str, ctx: Context, at: datetime | None = None) -> Answered:
        key = resolve(ctx)
        when = QuestionTime(at=at, relation="at") if at is not None else None

        def run() -> Answered:
            answer = memory.ask(key, question, when)
            return Answered(answer=answer.answer, reasoning=answer.reasoning, turn_ids=answer.context.turn_ids)

        result: Answered = await call(run)
        return result

    return server


def serve_stdio(memory: Memory, space: str) -> None:
    """Serve the local space ``space`` over stdio (the process's stdin/stdout) until the client closes it."""
    server = build_server(memory, lambda _ctx: space, space=space)
    server.run("stdio")


def _tenant_of(ctx: Context) -> str:
    request = ctx.request_context.request
    tenant = getattr(request, "scope", {}).get(TENANT_SCOPE_KEY) if request is not None else None
    if not isinstance(tenant, str):
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
        tenant = self.control.authenticate(key.strip()) if scheme.lower() == "bearer" else None
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


def http_app(memory: Memory, control: ControlStore, space: str) -> ASGIApp:
    """The streamable-HTTP MCP app at ``/mcp`` for ``space`` of each key's tenant, behind bearer-key auth."""
    check_name(space, "space")
    server = build_server(memory, lambda ctx: store_space(_tenant_of(ctx), space), space=space)
    return BearerAuth(server.streamable_http_app(), control)


def serve_http(memory: Memory, control: ControlStore, space: str, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(http_app(memory, control, space), host=host, port=port, log_level="warning")
