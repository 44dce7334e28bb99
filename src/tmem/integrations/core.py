"""The one core under the framework adapters: a space of a memory, recalled, remembered, forgotten and looked up.

:class:`MemoryLink` takes any of tmem's four front ends - :class:`tmem.Memory`, :class:`tmem.AsyncMemory`,
:class:`tmem.client.Client`, :class:`tmem.client.AsyncClient` - which share their method names and results
(docs/architecture.md), and gives each operation a sync and an async form:

* the async form never blocks the caller's loop: an async front end is awaited, a sync one runs through
  :func:`tmem.util.aio.blocking` (a worker thread);
* the sync form needs a sync front end (an async one would need the caller's loop; :class:`tmem.errors.ConfigError`
  says so).

The tools the three frameworks expose (recall, remember, forget, lookup) are written here once, as text for a model
(:meth:`MemoryLink.recall_tool` and friends); the adapters only give them each framework's signature.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypeVar

from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context
from tmem.client import AsyncClient, Client
from tmem.edit import ForgetReport
from tmem.errors import ConfigError, InputError, NotFoundError, TmemError
from tmem.export import SpaceExport
from tmem.ingest.messages import MessagesReport
from tmem.memory import AsyncMemory, Memory
from tmem.models import Item, SpaceSummary, Turn
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.util.aio import blocking

Backend = Memory | AsyncMemory | Client | AsyncClient
R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    """One call of a plan: the :class:`MemoryLink` operation ``name`` (``recall``, ``search``, ``remember``,
    ``forget``, ``lookup``, ``turns``, ``spaces``) on space ``space`` (ignored by ``spaces``)."""

    name: str
    space: str | Scope
    args: tuple[Any, ...] = ()

    def __init__(self, name: str, space: str | Scope, *args: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "space", space)
        object.__setattr__(self, "args", args)


# An adapter operation written once: it yields the calls it makes, receives their results and returns its own;
# MemoryLink.drive runs it synchronously, MemoryLink.adrive awaits it (as tmem.client.plans does for HTTP).
Plan: TypeAlias = Generator[Call, Any, R]
CONTEXT_HEADER = "Long-term memory (tmem) for the latest message; use it if it helps, it may be incomplete:"
NOTHING_RECALLED = "(memory holds nothing for this yet)"

RECALL_DOC = "Recall what long-term memory holds about a topic or question: dated facts and past conversation."
REMEMBER_DOC = (
    "Store something the user told you that is worth remembering (a fact, a preference, a plan) in long-term memory."
)
FORGET_DOC = "Forget turns and/or memory items for good, by the ids recall and lookup show."
LOOKUP_DOC = "Look up one memory item by its id: its text, date, kind and the turns it came from."


def context_block(context: Context) -> str:
    """What a model is handed for a recall: the header and the context's text, or an empty string when memory holds
    nothing for the query (so an empty memory adds nothing to a prompt)."""
    return f"{CONTEXT_HEADER}\n{context.text}" if context.text.strip() else ""


def item_text(item: Item) -> str:
    """One item as a tool answers it."""
    return (
        f"{item.id} ({item.kind}, {item.date or 'undated'}): {item.text}\nfrom turns: {', '.join(item.turn_ids) or '-'}"
    )


def tool_error(error: BaseException) -> str | None:
    """What a model reads when a tool failed on a tmem error (its message says what to fix); None for any other
    error, which the framework reports its own way."""
    return f"tmem: {error}" if isinstance(error, TmemError) else None


def forget_text(report: ForgetReport) -> str:
    done = [*report.turns_forgotten, *report.items_forgotten]
    text = f"forgotten: {', '.join(done) or 'nothing new'}"
    if report.already_forgotten:
        text += f"; already forgotten: {', '.join(report.already_forgotten)}"
    return text if report.erased else text + " (erasure of the bytes pending)"


class MemoryLink:
    """Space ``space`` of ``memory`` (any front end), as the adapters use it. ``max_tokens``: the budget of a
    recall's context (cl100k tokens unless the memory's settings say otherwise). ``user`` / ``assistant``: the
    speaker names the conversation's two roles are stored under."""

    def __init__(
        self,
        memory: Backend,
        space: str | Scope,
        *,
        max_tokens: int = DEFAULT_CONTEXT_TOKENS,
        user: str = "user",
        assistant: str = "assistant",
    ) -> None:
        if not isinstance(memory, Memory | AsyncMemory | Client | AsyncClient):
            raise ConfigError(
                f"tmem's integrations take a tmem.Memory, tmem.AsyncMemory, tmem.client.Client or "
                f"tmem.client.AsyncClient, not {type(memory).__name__}."
            )
        if isinstance(space, str) and not space.strip():
            raise InputError("Name the space the agent's memory lives in (space='...').")
        if max_tokens < 0:
            raise InputError(f"max_tokens must be 0 or more, not {max_tokens}.")
        self.memory, self.space, self.max_tokens = memory, space, max_tokens
        self.speakers = {"user": user, "human": user, "assistant": assistant, "ai": assistant}
        self.is_async = isinstance(memory, AsyncMemory | AsyncClient)
        self.remote = isinstance(memory, Client | AsyncClient)

    def with_space(self, space: str | Scope) -> MemoryLink:
        """The same memory and settings, another space."""
        user, assistant = self.speakers["user"], self.speakers["assistant"]
        return MemoryLink(self.memory, space, max_tokens=self.max_tokens, user=user, assistant=assistant)

    def speaker(self, role: str) -> str:
        """The speaker name a role is stored under (other roles are kept as they are)."""
        return self.speakers.get(role, role)

    # ------------------------------------------------------------------ calling either kind of front end
    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            raise ConfigError(
                f"{type(self.memory).__name__} is async: use the async form of this call (the framework's async "
                "API), or pass a tmem.Memory / tmem.client.Client for synchronous use."
            )
        return getattr(self.memory, name)(*args, **kwargs)

    async def _acall(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.memory, name)
        if self.is_async:
            return await method(*args, **kwargs)
        return await blocking(method, *args, **kwargs)

    def _messages(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, object]], dict[str, Any]]:
        given = [{**m, "speaker": self.speaker(str(m["speaker"]))} for m in messages]
        # in process, a message without a time is dated when it arrives (the service does the same over HTTP)
        kwargs = {} if self.remote else {"received_at": datetime.now(UTC).replace(tzinfo=None)}
        return given, kwargs

    def _budget(self, max_tokens: int | None) -> int:
        return self.max_tokens if max_tokens is None else max_tokens

    def _name(self) -> str:
        return self.space.space if isinstance(self.space, Scope) else self.space

    def _nothing(
        self, exc: NotFoundError, query: str, max_tokens: int | None, spaces: Sequence[SpaceSummary]
    ) -> Context:
        """The empty context of a space that does not exist yet (a new user: memory holds nothing for them); a
        NotFoundError of a space that exists is a real failure and is raised again."""
        if self._name() in {s.name for s in spaces}:
            raise exc
        return Context(
            space=self._name(),
            query=query,
            preset="",
            text="",
            tokens=0,
            max_tokens=self._budget(max_tokens),
            evidence_tokens=0,
            persona_tokens=0,
            hits=[],
            turn_ids=[],
            left_out=0,
        )

    # ------------------------------------------------------------------ the operations, sync
    def recall(self, query: str, max_tokens: int | None = None) -> Context:
        """tmem's budgeted context for ``query`` (empty while the space does not exist yet)."""
        try:
            return self._call("context", self.space, query, self._budget(max_tokens))  # type: ignore[no-any-return]
        except NotFoundError as exc:
            return self._nothing(exc, query, max_tokens, self.spaces())

    def remember(self, messages: Sequence[Mapping[str, Any]]) -> MessagesReport:
        """Add messages ({speaker, text, time?, id?, metadata?}; a role as speaker is mapped to its name)."""
        given, kwargs = self._messages(messages)
        return self._call("add_messages", self.space, given, **kwargs)  # type: ignore[no-any-return]

    def search(self, query: str) -> SearchResult:
        """tmem's hits for ``query`` (facts, scenes, turns), unbudgeted."""
        return self._call("search", self.space, query)  # type: ignore[no-any-return]

    def forget(self, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        return self._call("forget", self.space, turn_ids=list(turn_ids), item_ids=list(item_ids))  # type: ignore[no-any-return]

    def lookup(self, item_id: str) -> Item:
        return self._call("get_item", self.space, item_id)  # type: ignore[no-any-return]

    def turns(self) -> list[Turn]:
        """Every live turn of the space (read from its export)."""
        export: SpaceExport = self._call("export", self.space)
        return list(export.turns)

    def spaces(self) -> list[SpaceSummary]:
        return self._call("spaces")  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ the operations, async
    async def arecall(self, query: str, max_tokens: int | None = None) -> Context:
        try:
            return await self._acall("context", self.space, query, self._budget(max_tokens))  # type: ignore[no-any-return]
        except NotFoundError as exc:
            return self._nothing(exc, query, max_tokens, await self.aspaces())

    async def aremember(self, messages: Sequence[Mapping[str, Any]]) -> MessagesReport:
        given, kwargs = self._messages(messages)
        return await self._acall("add_messages", self.space, given, **kwargs)  # type: ignore[no-any-return]

    async def asearch(self, query: str) -> SearchResult:
        return await self._acall("search", self.space, query)  # type: ignore[no-any-return]

    async def aforget(self, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        return await self._acall("forget", self.space, turn_ids=list(turn_ids), item_ids=list(item_ids))  # type: ignore[no-any-return]

    async def alookup(self, item_id: str) -> Item:
        return await self._acall("get_item", self.space, item_id)  # type: ignore[no-any-return]

    async def aturns(self) -> list[Turn]:
        export: SpaceExport = await self._acall("export", self.space)
        return list(export.turns)

    async def aspaces(self) -> list[SpaceSummary]:
        return await self._acall("spaces")  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ plans: one operation, run sync or async
    def _target(self, call: Call) -> MemoryLink:
        return self if call.name == "spaces" or call.space == self.space else self.with_space(call.space)

    def drive(self, plan: Plan[R]) -> R:
        """Run ``plan`` with the sync operations (a sync front end)."""
        try:
            call = next(plan)
            while True:
                call = plan.send(getattr(self._target(call), call.name)(*call.args))
        except StopIteration as done:
            result: R = done.value
            return result
        finally:
            plan.close()

    async def adrive(self, plan: Plan[R]) -> R:
        """Run ``plan`` with the async operations (never blocking the caller's loop)."""
        try:
            call = next(plan)
            while True:
                call = plan.send(await getattr(self._target(call), "a" + call.name)(*call.args))
        except StopIteration as done:
            result: R = done.value
            return result
        finally:
            plan.close()

    # ------------------------------------------------------------------ the tools, as text for a model (async)
    async def recall_tool(self, query: str) -> str:
        if not query.strip():
            raise InputError("Give recall a query: what to remember about.")
        return context_block(await self.arecall(query)) or NOTHING_RECALLED

    async def remember_tool(self, text: str, speaker: str = "user") -> str:
        if not text.strip():
            raise InputError("Give remember the text to store.")
        report = await self.aremember([{"speaker": speaker, "text": text}])
        return f"remembered as turn {', '.join(report.added) or '(already stored)'} in {report.space}"

    async def forget_tool(self, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> str:
        if not turn_ids and not item_ids:
            raise InputError("Name what to forget: turn_ids and/or item_ids (recall and lookup show them).")
        return forget_text(await self.aforget(turn_ids, item_ids))

    async def lookup_tool(self, item_id: str) -> str:
        return item_text(await self.alookup(item_id))
