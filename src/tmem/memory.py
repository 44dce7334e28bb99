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

Every operation is written once, in :class:`tmem.core.MemoryCore`. :class:`Memory` calls it synchronously (the
operations that talk to an LLM run on the memory's own private event loop); :class:`AsyncMemory` is its async twin
for services and agents that already run an event loop (blocking store and embedding work goes to a worker thread).
Both take the space as one string and own - and close - the store, the LLMs, the embedder and the retriever.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import ValidationError

from tmem.answer import Answer, QuestionTime, Variant
from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context
from tmem.construct.options import BuildOptions
from tmem.construct.report import BuildReport
from tmem.core import MemoryCore, Staleness
from tmem.edit import ForgetReport, ItemHistory
from tmem.edit.erasure import ErasureState
from tmem.edit.listing import ItemFilters, ItemPage
from tmem.embed.base import Embedder
from tmem.errors import ConfigError, InputError
from tmem.export import SpaceExport as SpaceExport  # re-exported: tmem.memory.SpaceExport stays importable
from tmem.export import export_space
from tmem.ingest import Format, ImportReport, import_file, import_sessions
from tmem.ingest.messages import MessageInput, MessagesReport
from tmem.llm.base import LLM
from tmem.llm.cost import CostReport, cost_report
from tmem.models import (
    Erasure,
    Item,
    ItemKind,
    SessionInput,
    SpaceSummary,
)
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.filters import MemoryFilter
from tmem.retrieve.types import SearchResult
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store

R = TypeVar("R")
Messages = Sequence[MessageInput | dict[str, object]]
Where = MemoryFilter | Mapping[str, Any] | None  # a filter on recall (tmem.retrieve.filters; docs/agents.md)


def item_filters(**fields: object) -> ItemFilters:
    """``ItemFilters`` from keyword arguments; a malformed one is an InputError naming the argument."""
    try:
        return ItemFilters.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "filters"
        raise InputError(f"Invalid item filter {where}: {first['msg']}.") from None


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
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def over(cls, core: MemoryCore) -> Memory:
        """A synchronous facade over an existing core (an AsyncMemory's), sharing its store, models and index cache:
        the viewer mounted in the service reads through it. Closing the core stays with its owner."""
        memory = cls.__new__(cls)
        memory.core = core
        memory._loop = None
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
        settings = _settings_for(home, settings)
        return cls(open_store(settings.store_url), settings, llm=llm, embedder=embedder)

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop runs here, as it should be: run on the private one (outside this handler, so that an
            # error of the call is not chained to this expected RuntimeError)
        else:
            coro.close()
            raise ConfigError("Memory was called inside a running event loop: use tmem.AsyncMemory there instead.")
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the LLM clients this memory created, the store, and its private event loop."""
        try:
            if self.core.open_clients:
                self._run(self.core.aclose())
            else:  # nothing asynchronous to close: also fine inside a running event loop
                self.core.store.close()
        finally:
            if self._loop is not None:
                self._loop.close()
                self._loop = None

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

    # ------------------------------------------------------------------ conversations
    def spaces(self) -> list[SpaceSummary]:
        return self.core.store.list_spaces()

    def import_file(self, path: str | Path, fmt: Format = "auto", space: str | None = None) -> ImportReport:
        """Import a LoCoMo or native file; re-importing the same content changes nothing."""
        return import_file(self.core.store, path, fmt, space)

    def add_sessions(self, space: str, sessions: Sequence[SessionInput]) -> ImportReport:
        """Append sessions to ``space`` (created if new); known sessions are skipped by content hash."""
        return import_sessions(self.core.store, space, list(sessions))

    def add_messages(self, space: str, messages: Messages, *, received_at: datetime | None = None) -> MessagesReport:
        """Append messages as they arrive (open session or a new one after the idle gap); idempotent by id (a message
        without one is stored on every call).
        ``received_at`` dates messages that carry no time (a live agent's arrival time); see docs/agents.md."""
        return self.core.add_messages(space, messages, received_at)

    def delete_space(self, space: str) -> ErasureState:
        """Delete the space and every trace of it (conversation, memory, embeddings, LLM log), erased from disk.
        ``erased`` is False when another process's open read kept the erasure from completing: it stays pending in
        the erasure ledger and is finished by :meth:`upkeep` (run every few seconds by ``tmem serve``, ``mcp`` and
        ``ui``)."""
        return self.core.delete_space(space)

    def erasures(self, *, space: str | None = None, pending: bool = False) -> list[Erasure]:
        """The store's erasure ledger: one entry per forget or deletion, pending until its bytes are erased."""
        return self.core.erasures(space=space, pending=pending)

    def upkeep(self) -> bool:
        """Finish pending erasures and drop this process's local copies of erased spaces; True when none is pending."""
        return self.core.upkeep()

    # ------------------------------------------------------------------ construction
    async def abuild(self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False) -> BuildReport:
        return await self.core.abuild(space, options, rebuild=rebuild)

    def build(
        self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False, progress: bool = False
    ) -> BuildReport:
        """Build or extend the memory of ``space`` (only what is new); BuildBusy if another build of it runs."""
        return self._run(self.core.abuild(space, options, rebuild=rebuild, progress=progress))

    def staleness(self, space: str) -> Staleness:
        """How many turns were added since the last build (searched as raw turns, in no scene or item yet)."""
        return self.core.staleness(space)

    def build_if_due(self, space: str, idle_seconds: float) -> BuildReport | None:
        """Build when the build policy says so (``TMEM_BUILD_AFTER_TURNS`` / ``TMEM_BUILD_IDLE_SECONDS``) and no other
        build of the space runs; ``idle_seconds``: time since the space's last message arrived."""
        return self._run(self.core.abuild_if_due(space, idle_seconds))

    # ------------------------------------------------------------------ recall
    def search(
        self, space: str, query: str, config: RetrievalConfig | str | None = None, *, where: Where = None
    ) -> SearchResult:
        """Recall for ``query``: typed scene and item hits with the routes that reached them, plus personas, and
        whether the memory is stale; ``where`` keeps only memory from matching turns (tmem.retrieve.filters)."""
        return self.core.search(space, query, config, where)

    def question_time(self, space: str, asked: datetime | None = None) -> QuestionTime:
        return self.core.question_time(space, asked)

    def context(
        self,
        space: str,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: Where = None,
    ) -> Context:
        """The text to hand a reader for ``query``: hits packed into at most ``max_tokens`` tokens, with their routes
        (None: the whole search result), and how many turns are not built yet; ``where`` filters before packing."""
        return self.core.context(space, query, max_tokens, config, where)

    async def aask(
        self,
        space: str,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> Answer:
        return await self.core.aask(space, question, when, variant=variant, config=config, max_tokens=max_tokens)

    def ask(
        self,
        space: str,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> Answer:
        """Answer ``question`` from the memory of ``space`` (needs an LLM) with a context of at most ``max_tokens``;
        dated after the latest session unless ``when`` says otherwise."""
        return self._run(self.core.aask(space, question, when, variant=variant, config=config, max_tokens=max_tokens))

    # ------------------------------------------------------------------ one memory at a time
    def get_item(self, space: str, item_id: str) -> Item:
        return self.core.get_item(space, item_id)

    def list_items(
        self,
        space: str,
        *,
        kind: ItemKind | str | None = None,
        speaker: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
        text: str | None = None,
        live: bool = False,
        metadata: Mapping[str, object] | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> ItemPage:
        """One page of the items of ``space`` in arrival order, filtered (all filters must hold; see
        :mod:`tmem.edit.listing`): ``kind``, ``speaker``, a date range ``since``..``until`` over each item's own
        date, ``text`` (substring or id), ``live`` (no superseded items), ``metadata`` (of the source turns)."""
        filters = item_filters(
            kind=kind, speaker=speaker, since=since, until=until, text=text, live=live, metadata=metadata
        )
        return self.core.list_items(space, filters, offset, limit)

    def update_item(self, space: str, item_id: str, text: str) -> Item:
        """New text for one item: its triggers are regenerated, the old text is kept in its history."""
        return self._run(self.core.aupdate_item(space, item_id, text))

    def delete_item(self, space: str, item_id: str) -> ForgetReport:
        """Delete one item for good: the same as ``forget(space, item_ids=[item_id])``."""
        return self.core.forget(space, item_ids=[item_id])

    def forget(self, space: str, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        """Forget turns and items: tombstoned, removed from every derived record and cache, erased from disk."""
        return self.core.forget(space, turn_ids=turn_ids, item_ids=item_ids)

    def history(self, space: str, item_id: str) -> ItemHistory:
        """The item's versions (extracted, then each edit, with times) and its supersession chain."""
        return self.core.history(space, item_id)

    # ------------------------------------------------------------------ inspection and export
    def export(self, space: str) -> SpaceExport:
        """Every record of ``space``; ``export(...).model_dump_json()`` is a complete, readable backup."""
        return export_space(self.core.store, space)

    def cost(self, space: str | None = None) -> CostReport:
        """LLM calls and tokens per construction stage, from the call log (of ``space``, or of every space)."""
        if space is not None:
            self.store.get_space(space)
        return cost_report(self.store, space)

    def export_file(self, space: str, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(json.dumps(self.export(space).model_dump(mode="json"), indent=1, ensure_ascii=False))
        return target


class AsyncMemory:
    """The async twin of :class:`Memory` over the same core: every method is a coroutine. Store and embedding work
    runs in a worker thread so the caller's event loop keeps serving."""

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
        return cls(_open_core(home, settings, llm, embedder))

    async def aclose(self) -> None:
        await self.core.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def spaces(self) -> list[SpaceSummary]:
        return await asyncio.to_thread(self.core.store.list_spaces)

    async def import_file(self, path: str | Path, fmt: Format = "auto", space: str | None = None) -> ImportReport:
        return await asyncio.to_thread(import_file, self.core.store, path, fmt, space)

    async def add_messages(
        self, space: str, messages: Messages, *, received_at: datetime | None = None
    ) -> MessagesReport:
        return await asyncio.to_thread(self.core.add_messages, space, messages, received_at)

    async def delete_space(self, space: str) -> ErasureState:
        return await asyncio.to_thread(self.core.delete_space, space)

    async def erasures(
        self, *, space: str | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        return await asyncio.to_thread(lambda: self.core.erasures(space=space, tenant=tenant, pending=pending))

    async def upkeep(self) -> bool:
        return await asyncio.to_thread(self.core.upkeep)

    async def build(self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False) -> BuildReport:
        return await self.core.abuild(space, options, rebuild=rebuild)

    async def staleness(self, space: str) -> Staleness:
        return await asyncio.to_thread(self.core.staleness, space)

    async def build_if_due(self, space: str, idle_seconds: float) -> BuildReport | None:
        return await self.core.abuild_if_due(space, idle_seconds)

    async def search(
        self, space: str, query: str, config: RetrievalConfig | str | None = None, *, where: Where = None
    ) -> SearchResult:
        return await asyncio.to_thread(self.core.search, space, query, config, where)

    async def context(
        self,
        space: str,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: Where = None,
    ) -> Context:
        return await asyncio.to_thread(self.core.context, space, query, max_tokens, config, where)

    async def ask(
        self,
        space: str,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> Answer:
        return await self.core.aask(space, question, when, variant=variant, config=config, max_tokens=max_tokens)

    async def get_item(self, space: str, item_id: str) -> Item:
        return await asyncio.to_thread(self.core.get_item, space, item_id)

    async def list_items(
        self,
        space: str,
        *,
        kind: ItemKind | str | None = None,
        speaker: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
        text: str | None = None,
        live: bool = False,
        metadata: Mapping[str, object] | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> ItemPage:
        filters = item_filters(
            kind=kind, speaker=speaker, since=since, until=until, text=text, live=live, metadata=metadata
        )
        return await asyncio.to_thread(self.core.list_items, space, filters, offset, limit)

    async def update_item(self, space: str, item_id: str, text: str) -> Item:
        return await self.core.aupdate_item(space, item_id, text)

    async def delete_item(self, space: str, item_id: str) -> ForgetReport:
        return await asyncio.to_thread(lambda: self.core.forget(space, item_ids=[item_id]))

    async def forget(self, space: str, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        return await asyncio.to_thread(lambda: self.core.forget(space, turn_ids=turn_ids, item_ids=item_ids))

    async def history(self, space: str, item_id: str) -> ItemHistory:
        return await asyncio.to_thread(self.core.history, space, item_id)

    async def export(self, space: str) -> SpaceExport:
        return await asyncio.to_thread(export_space, self.core.store, space)
