"""The public entry point: a :class:`Memory` over one memory directory.

    from tmem import Memory

    with Memory.open("~/.tmem-demo") as mem:          # extractive mode unless an LLM is configured
        mem.import_file("locomo10.json")
        mem.build("conv-26")
        result = mem.search("conv-26", "Where did Caroline go last week?")
        for hit in result.scenes:
            print(hit.scene.title, [route.name for route in hit.routes])

Agents write messages as they arrive and edit single memories (docs/agents.md)::

    mem.add_messages("alice", [{"speaker": "alice", "text": "I moved to Lyon", "time": "2026-03-02T10:00:00"}])
    mem.build("alice")
    mem.forget("alice", turn_ids=[...])

Every operation is written once, with its signature and docstring, in :class:`tmem.core.MemoryCore`; both facades are
made from those methods and nothing else, so they cannot drift (``tests/test_facade_parity.py``). :class:`Memory`
calls them synchronously (the LLM work runs on the core's private event loop thread); :class:`AsyncMemory` is its
async twin for services and agents that already run an event loop: every call goes through
:func:`tmem.util.aio.blocking`, so no store, embedding, index or LLM work ever runs on the caller's loop
(docs/architecture.md). Both take a space by its name (or a :class:`tmem.scope.Scope`) and own - and close - the
store, the LLMs, the embedder, the retriever and the loop thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from tmem.core import MemoryCore
from tmem.edit.listing import item_filters
from tmem.embed.base import Embedder
from tmem.export import SpaceExport
from tmem.ingest.messages import MessageInput
from tmem.llm.base import LLM
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.filters import MemoryFilter
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store
from tmem.util.aio import blocking

__all__ = ["OPERATIONS", "AsyncMemory", "Memory", "Messages", "SpaceExport", "Where", "item_filters"]

P = ParamSpec("P")
R = TypeVar("R")
Messages = Sequence[MessageInput | dict[str, object]]
Where = MemoryFilter | Mapping[str, Any] | None  # a filter on recall (tmem.retrieve.filters; docs/agents.md)

# The operations both facades expose, each defined once as the MemoryCore method of that name.
OPERATIONS = (
    "spaces",
    "import_file",
    "add_sessions",
    "add_messages",
    "delete_space",
    "erasures",
    "upkeep",
    "build",
    "staleness",
    "build_if_due",
    "search",
    "question_time",
    "context",
    "recall",
    "ask",
    "get_item",
    "list_items",
    "update_item",
    "delete_item",
    "forget",
    "history",
    "export",
    "export_file",
    "cost",
)


def _sync(method: Callable[Concatenate[MemoryCore, P], R]) -> Callable[Concatenate[Memory, P], R]:
    """``Memory.NAME``: the core's method, called in the caller's thread."""

    @functools.wraps(method)
    def call(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(self.core, *args, **kwargs)

    return call


def _async(
    method: Callable[Concatenate[MemoryCore, P], R],
) -> Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]:
    """``AsyncMemory.NAME``: the core's method, awaited through the one async boundary (a worker thread)."""

    @functools.wraps(method)
    async def call(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await blocking(method, self.core, *args, **kwargs)

    return call


def _settings_for(home: str | Path | None, settings: Settings | None) -> Settings:
    settings = settings or Settings()
    if home is not None:
        settings = settings.model_copy(update={"home": Path(home).expanduser()})
    return settings


def _open_core(
    home: str | Path | None, settings: Settings | None, llm: LLM | None, embedder: Embedder | None
) -> MemoryCore:
    settings = _settings_for(home, settings)
    return MemoryCore(open_store(settings.store_url), settings, llm=llm, embedder=embedder)


class Memory:
    """One memory directory: spaces, their conversations and the memories built from them (synchronous)."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.core = MemoryCore(store, settings or Settings(), llm=llm, embedder=embedder)

    @classmethod
    def over(cls, core: MemoryCore) -> Memory:
        """A synchronous facade over an existing core (an AsyncMemory's), sharing its store, models and index cache:
        the viewer mounted in the service reads through it. Closing the core stays with its owner."""
        memory = cls.__new__(cls)
        memory.core = core
        return memory

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> Memory:
        """Open (or create) the memory directory ``home`` (default: ``settings.home``)."""
        return cls.over(_open_core(home, settings, llm, embedder))

    def close(self) -> None:
        """Close the LLM clients this memory created, its loop thread and the store."""
        self.core.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ components
    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def llm(self) -> LLM | None:
        return self.core.llm

    @property
    def embedder(self) -> Embedder:
        return self.core.embedder

    @property
    def retriever(self) -> Retriever:
        return self.core.retriever

    # ------------------------------------------------------------------ operations (docs: the MemoryCore methods)
    spaces = _sync(MemoryCore.spaces)
    import_file = _sync(MemoryCore.import_file)
    add_sessions = _sync(MemoryCore.add_sessions)
    add_messages = _sync(MemoryCore.add_messages)
    delete_space = _sync(MemoryCore.delete_space)
    erasures = _sync(MemoryCore.erasures)
    upkeep = _sync(MemoryCore.upkeep)
    build = _sync(MemoryCore.build)
    staleness = _sync(MemoryCore.staleness)
    build_if_due = _sync(MemoryCore.build_if_due)
    search = _sync(MemoryCore.search)
    question_time = _sync(MemoryCore.question_time)
    context = _sync(MemoryCore.context)
    recall = _sync(MemoryCore.recall)
    ask = _sync(MemoryCore.ask)
    get_item = _sync(MemoryCore.get_item)
    list_items = _sync(MemoryCore.list_items)
    update_item = _sync(MemoryCore.update_item)
    delete_item = _sync(MemoryCore.delete_item)
    forget = _sync(MemoryCore.forget)
    history = _sync(MemoryCore.history)
    export = _sync(MemoryCore.export)
    export_file = _sync(MemoryCore.export_file)
    cost = _sync(MemoryCore.cost)


class AsyncMemory:
    """The async twin of :class:`Memory` over the same core: every operation is a coroutine that runs the core's
    method in a worker thread (:func:`tmem.util.aio.blocking`), so the caller's event loop keeps serving."""

    def __init__(self, core: MemoryCore) -> None:
        self.core = core

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> AsyncMemory:
        """Open (or create) the memory directory ``home`` (default: ``settings.home``)."""
        return cls(_open_core(home, settings, llm, embedder))

    async def aclose(self) -> None:
        """Close the LLM clients this memory created, its loop thread and the store."""
        await blocking(self.core.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ operations (docs: the MemoryCore methods)
    spaces = _async(MemoryCore.spaces)
    import_file = _async(MemoryCore.import_file)
    add_sessions = _async(MemoryCore.add_sessions)
    add_messages = _async(MemoryCore.add_messages)
    delete_space = _async(MemoryCore.delete_space)
    erasures = _async(MemoryCore.erasures)
    upkeep = _async(MemoryCore.upkeep)
    build = _async(MemoryCore.build)
    staleness = _async(MemoryCore.staleness)
    build_if_due = _async(MemoryCore.build_if_due)
    search = _async(MemoryCore.search)
    question_time = _async(MemoryCore.question_time)
    context = _async(MemoryCore.context)
    recall = _async(MemoryCore.recall)
    ask = _async(MemoryCore.ask)
    get_item = _async(MemoryCore.get_item)
    list_items = _async(MemoryCore.list_items)
    update_item = _async(MemoryCore.update_item)
    delete_item = _async(MemoryCore.delete_item)
    forget = _async(MemoryCore.forget)
    history = _async(MemoryCore.history)
    export = _async(MemoryCore.export)
    export_file = _async(MemoryCore.export_file)
    cost = _async(MemoryCore.cost)
