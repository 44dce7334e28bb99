"""The MCP tools (issue 19): one server serves every space of its tenant; each tool takes an optional ``space``
(default: the server's ``--space``).

Tools call :class:`tmem.AsyncMemory` (the composition root) for every operation: ``remember`` (add_messages, then a
build by the server's policy, :mod:`tmem.mcp_server.builds`), ``recall`` (context; its one record per hit is read by
:func:`tmem.answer.hits.hit_records` from the memory's store, id-scoped), ``ask``, ``list_memories`` / ``get_memory`` / ``update_memory`` /
``memory_history`` (list_items, get_item, update_item, history), ``forget`` and ``delete_space`` (annotated
destructive; delete_space needs ``confirm`` equal to the space's name) and ``status`` (build state, stale turns, the
server's background builds).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from tmem.answer.hits import HitRecord, item_record
from tmem.construct.policy import BuildPolicy
from tmem.edit import ItemHistory
from tmem.errors import BuildBusy, TmemError
from tmem.ingest.messages import MessageInput, with_request_ids
from tmem.mcp_server.builds import BuildJob, Builds
from tmem.memory import AsyncMemory
from tmem.models import Item, ItemKind, MetaValue
from tmem.retrieve.filters import MemoryFilter
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.util.aio import blocking

SpaceArg = str | None
SPACE_DOC = "The space (default: the server's --space)."
MAX_RECALL_TOKENS = 32_000
BuildWhen = Literal["auto", "now", "no"]


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
    metadata: dict[str, MetaValue] | None = Field(
        default=None,
        description="Labels (at most 32 keys; string values up to 256 characters, numbers, booleans); recall and "
        "list_memories filter by them.",
    )


class Remembered(BaseModel):
    space: str
    added: int
    skipped: int
    turn_ids: list[str] = Field(description="Ids of the turns this call stored.")
    built: bool = Field(description="Whether the memory was built before this answer (build='now').")
    build: str = Field(
        description="'built', 'started' (a background build by the server's policy), 'running', 'scheduled' (when "
        "the space goes quiet), 'up to date', 'busy' (another build holds the space) or 'off' (build='no')."
    )
    stale_turns: int = Field(
        description="Turns stored but in no built scene yet: recall finds them as raw turns until a build structures them."
    )


class Recalled(BaseModel):
    space: str
    text: str = Field(description="The context to read, within the token budget.")
    tokens: int
    turn_ids: list[str] = Field(description="Turns whose text or distilled fact is in the context.")
    hits: list[HitRecord] = Field(
        description="What entered the context, in order, each with the routes that reached it."
    )
    unbuilt_turns: int = Field(
        description="Turns stored after the last build: the context can hold them as raw turns only (no scene, item)."
    )


class Answered(BaseModel):
    answer: str
    reasoning: str | None = None
    turn_ids: list[str] = Field(description="Turns whose text was in the answerer's context.")


class Memories(BaseModel):
    space: str
    memories: list[HitRecord]
    total: int = Field(description="How many memories match the filters.")
    next_offset: int | None = Field(description="The offset of the next page (null on the last one).")


class Forgotten(BaseModel):
    space: str
    turns_forgotten: list[str]
    items_forgotten: list[str]
    already_forgotten: list[str]
    erased: bool = Field(description="The freed bytes are erased; False: forgotten, erasure pending (finished later).")
    status: str = Field(description="'forgotten' or 'forgotten, erasure pending'.")


class SpaceDeleted(BaseModel):
    space: str
    deleted: bool
    erased: bool = Field(description="False: deleted, the erasure of its bytes pending (finished by the server).")


class Status(BaseModel):
    space: str
    turns: int
    sessions: int
    build_state: str = Field(description="'empty', 'not built', 'built' or 'stale'.")
    built: bool
    stale_turns: int = Field(description="Turns no build holds yet (recall reaches them as raw turns).")
    building: bool = Field(description="A background build of this space runs now.")
    policy: BuildPolicy = Field(description="When the server builds: after_turns unbuilt turns, or idle_seconds quiet.")
    jobs: list[BuildJob] = Field(description="This server's recent background builds of the space, oldest first.")


Resolve = Callable[[Context, str | None], tuple[Scope, str]]  # (ctx, space arg) -> (its scope, its name)
ErrorText = Callable[[TmemError, Context], ToolError]
ToolFn = Callable[..., Awaitable[Any]]


def register(server: MCPServer, memory: AsyncMemory, resolve: Resolve, error: ErrorText, builds: Builds) -> None:
    """Add every tool to ``server``."""

    def tool(**options: Any) -> Callable[[ToolFn], ToolFn]:
        """``server.tool(**options)`` for a tool whose tmem errors are reported to its caller as tool errors (rendered
        for the caller's tenant by ``error``): written once here, not in every tool."""

        def add(fn: ToolFn) -> ToolFn:
            @functools.wraps(fn)
            async def reported(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await fn(*args, **kwargs)
                except TmemError as exc:
                    ctx = next(a for a in (*args, *kwargs.values()) if isinstance(a, Context))
                    raise error(exc, ctx) from exc

            server.tool(**options)(reported)
            return fn

        return add

    @tool(description="Store new conversation messages (optionally with metadata); returns at once.")
    async def remember(
        messages: list[MessageArg],
        ctx: Context,
        space: SpaceArg = None,
        build: BuildWhen = "auto",
        request_id: str | None = None,
    ) -> Remembered:
        """build: 'auto' (default) starts a background build when the server's policy says so (enough new turns, or
        when the space goes quiet); 'now' builds before answering; 'no' only stores. request_id: calling again with
        the same request_id stores its messages once (a message without an id gets the id REQUEST_ID:N)."""
        if not messages:
            raise ToolError("Give at least one message.")
        key, shown = resolve(ctx, space)
        received = datetime.now(UTC).replace(tzinfo=None)
        given: list[MessageInput | dict[str, object]] = [m.model_dump(exclude_none=True) for m in messages]
        if request_id is not None:
            given = with_request_ids(given, request_id)
        report = await memory.add_messages(key, given, received_at=received)
        built, state = False, "off"
        if build == "now":
            try:
                await memory.build(key)
                built, state = True, "built"
            except BuildBusy:
                state = "busy"
        elif build == "auto":
            state = await builds.arrived(key)
        stale = (await memory.staleness(key)).stale_turns
        skipped = len(report.skipped) + len(report.forgotten)
        return Remembered(
            space=shown,
            added=len(report.added),
            skipped=skipped,
            turn_ids=report.added,
            built=built,
            build=state,
            stale_turns=stale,
        )

    @tool(description="Recall what memory holds for a query: a context within a token budget, one record per hit.")
    async def recall(
        query: str,
        ctx: Context,
        space: SpaceArg = None,
        max_tokens: int = 2000,
        where: MemoryFilter | None = None,
        layout: ContextLayout | None = None,
    ) -> Recalled:
        """where: only memory from matching turns - {"metadata": {"key": value or [values]}, "speaker": name or
        [names], "since": date, "until": date}; applied before packing, so the context still fills its budget.
        layout: how the text is laid out, ContextLayout fields - e.g. {"order": "rank"} (best-ranked first) or
        {"order": "date"} (newest first); fields not given take the recipe's (docs/context.md)."""
        if not query.strip():
            raise ToolError("Give a query.")
        if not 0 <= max_tokens <= MAX_RECALL_TOKENS:
            raise ToolError(f"max_tokens must be between 0 and {MAX_RECALL_TOKENS}.")
        key, shown = resolve(ctx, space)
        found = await memory.context(key, query, max_tokens=max_tokens, where=where, layout=layout)
        records = await blocking(memory.core.hit_records, key, found)
        return Recalled(
            space=shown,
            text=found.text,
            tokens=found.tokens,
            turn_ids=found.turn_ids,
            hits=records,
            unbuilt_turns=found.unbuilt_turns,
        )

    @tool(description="Answer a question from memory with the server's LLM (fails in the extractive mode).")
    async def ask(
        question: str,
        ctx: Context,
        space: SpaceArg = None,
        at: datetime | None = None,
        layout: ContextLayout | None = None,
    ) -> Answered:
        """layout: how the context handed to the model is laid out (ContextLayout fields, as recall's)."""
        key, _ = resolve(ctx, space)
        answer = await memory.ask(key, question, at, layout=layout)
        return Answered(answer=answer.answer, reasoning=answer.reasoning, turn_ids=answer.context.turn_ids)

    @tool(
        description="List memories (distilled facts), filtered and paged.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def list_memories(
        ctx: Context,
        space: SpaceArg = None,
        kind: ItemKind | None = None,
        speaker: str | None = None,
        since: date | None = None,
        until: date | None = None,
        metadata: dict[str, MetaValue | list[MetaValue]] | None = None,
        text: str | None = None,
        live: bool = False,
        offset: int = 0,
        limit: int = 50,
    ) -> Memories:
        """Every filter given must hold: kind ('atomic' / 'connected'), speaker, since/until (the memory's own date),
        metadata (of its source turns: {"key": value or [values]}), text (substring or id), live (no superseded)."""
        key, shown = resolve(ctx, space)
        page = await memory.list_items(
            key,
            kind=kind,
            speaker=speaker,
            since=since,
            until=until,
            text=text,
            live=live,
            metadata=metadata,
            offset=offset,
            limit=limit,
        )
        records = [item_record(i, list(i.turn_ids), [], page.metadata.get(i.id, {})) for i in page.items]
        return Memories(space=shown, memories=records, total=page.total, next_offset=page.next_offset)

    @tool(description="One memory by id.", annotations=ToolAnnotations(read_only_hint=True))
    async def get_memory(item_id: str, ctx: Context, space: SpaceArg = None) -> Item:
        key, _ = resolve(ctx, space)
        return await memory.get_item(key, item_id)

    @tool(
        description="Correct a memory's text (its old text stays in its history).",
        annotations=ToolAnnotations(idempotent_hint=True),
    )
    async def update_memory(item_id: str, text: str, ctx: Context, space: SpaceArg = None) -> Item:
        key, _ = resolve(ctx, space)
        return await memory.update_item(key, item_id, text)

    @tool(
        description="A memory's versions (extracted, then each edit) and what it supersedes or is superseded by.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def memory_history(item_id: str, ctx: Context, space: SpaceArg = None) -> ItemHistory:
        key, _ = resolve(ctx, space)
        return await memory.history(key, item_id)

    @tool(
        description="Forget turns and memories for good: erased, and never rebuilt.",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    async def forget(
        ctx: Context, space: SpaceArg = None, turn_ids: list[str] | None = None, item_ids: list[str] | None = None
    ) -> Forgotten:
        if not turn_ids and not item_ids:
            raise ToolError("Name at least one id in turn_ids or item_ids (recall and list_memories show them).")
        key, shown = resolve(ctx, space)
        report = await memory.forget(key, turn_ids=turn_ids or [], item_ids=item_ids or [])
        return Forgotten(
            space=shown,
            turns_forgotten=report.turns_forgotten,
            items_forgotten=report.items_forgotten,
            already_forgotten=report.already_forgotten,
            erased=report.erased,
            status="forgotten" if report.erased else "forgotten, erasure pending",
        )

    @tool(
        description="Delete a whole space (its conversation and memory) for good. confirm must repeat the space's name.",
        annotations=ToolAnnotations(destructive_hint=True),
    )
    async def delete_space(confirm: str, ctx: Context, space: SpaceArg = None) -> SpaceDeleted:
        key, shown = resolve(ctx, space)
        if confirm != shown:
            raise ToolError(f"To delete space {shown!r}, call delete_space with confirm={shown!r}.")
        state = await memory.delete_space(key)
        return SpaceDeleted(space=shown, deleted=True, erased=state.erased)

    @tool(
        description="A space's state: turns, build state, stale turns, background builds.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def status(ctx: Context, space: SpaceArg = None) -> Status:
        key, shown = resolve(ctx, space)
        staleness = await memory.staleness(key)  # SpaceNotFound (naming the tenant's spaces) when absent
        mine = await blocking(memory.core.tenant_spaces, key.tenant)  # the tenant's, by their names
        summary = next(s for s in mine if s.name == key.space)
        return Status(
            space=shown,
            turns=summary.turns,
            sessions=summary.sessions,
            build_state=summary.build_state,
            built=staleness.built,
            stale_turns=staleness.stale_turns,
            building=builds.running(key),
            policy=memory.core.build_policy(),
            jobs=builds.of(key),
        )
