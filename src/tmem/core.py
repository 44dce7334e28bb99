"""The one core under :class:`tmem.Memory` (sync) and :class:`tmem.AsyncMemory` (async).

Every operation is written here once, with its signature and docstring, and is synchronous at its surface: its LLM
work (a build's calls, an answer, an item edit's triggers) runs on the core's private event loop in a thread of its
own (:class:`tmem.util.aio.LoopThread`). The facades are made from these methods: :class:`tmem.Memory` calls them,
:class:`tmem.AsyncMemory` awaits them through :func:`tmem.util.aio.blocking`, the one async boundary
(docs/architecture.md). The core owns what it opens - the store, the construction LLM, the answer LLM (created once,
on first use), the embedder, the retriever and its loop - and closes them in :meth:`MemoryCore.close`. Rules that
must agree across front ends live here and nowhere else:

* retrieval configuration: :meth:`MemoryCore.resolve_config` (a preset name, or ``Settings.search_preset``, plus
  ``Settings.reranker_model``) and :func:`tmem.retrieve.layout.as_layout` (a context layout from its fields); both are
  resolved for the space once per search by :func:`tmem.retrieve.recipe.resolve`;
* the date of a question without one: :meth:`MemoryCore.question_time` (after the latest session start);
* staleness: :meth:`MemoryCore.staleness` (turns added since the last build started).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from tmem.answer import Answer, Answerer, QuestionTime, Variant
from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context, recall
from tmem.answer.filtered import filtered_recall, filtered_search
from tmem.answer.hits import HitRecord, hit_records
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space, reset_space
from tmem.construct.policy import BuildPolicy, Staleness, build_lease
from tmem.construct.report import BuildReport
from tmem.edit import ForgetReport, ItemHistory, forget, get_item, item_history, update_item
from tmem.edit.erasure import ErasureState, LocalSweep, Upkeep, finish_erasures, state_of
from tmem.edit.items import reapply_edits
from tmem.edit.listing import ItemPage, item_filters, list_items
from tmem.embed import make_embedder
from tmem.embed.base import Embedder
from tmem.embed.cached import CachedEmbedder
from tmem.errors import BuildBusy, InputError
from tmem.export import SpaceExport, export_space
from tmem.index.factory import persistent_vectors, refresh_space
from tmem.index.lexical import LexicalStore
from tmem.ingest import Format, ImportReport, import_file, import_sessions
from tmem.ingest.messages import MessageInput, MessagesReport, add_messages, parse_messages
from tmem.llm.base import LLM, ClosableBackend
from tmem.llm.cost import CostReport, cost_report
from tmem.llm.service import StructuredLLM, make_answer_llm, make_llm
from tmem.models import Erasure, Item, ItemKind, SessionInput, SpaceSummary
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.filters import MemoryFilter, memory_filter
from tmem.retrieve.layout import Layout, as_layout
from tmem.retrieve.recipe import Asked, asked
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope, SpaceRef, as_scope
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.store.control import ControlStore, open_control
from tmem.util.aio import LoopThread
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ
from tmem.util.tokens import TokenCounter, token_counter


class MemoryCore:
    """Store, models and every operation of a memory directory (used through Memory / AsyncMemory)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        llm: LLM | None = None,
        answer_llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._llm = llm
        self._llm_resolved = llm is not None
        self._answer_llm = answer_llm
        self._embedder = embedder
        self._retriever: Retriever | None = None
        where = settings.lexical_path  # saved BM25 indices (a cache on local disk), None when off
        self._lexical = None if where is None else LexicalStore(where)
        self.sweep = LocalSweep(store, self._lexical, self._invalidate)  # local copies of erased spaces go
        self._upkeep: Upkeep | None = None
        self._owned: list[LLM] = []  # LLMs this core created (and so closes); passed-in ones belong to the caller
        self._loop = LoopThread("tmem-llm")  # where LLM work runs (started on first use)

    # ------------------------------------------------------------------ components
    @property
    def llm(self) -> LLM | None:
        """The construction LLM from the settings (None in the extractive mode), unless one was passed in."""
        if not self._llm_resolved:
            self._llm = make_llm(self.settings, self.store)
            if self._llm is not None:
                self._owned.append(self._llm)
            self._llm_resolved = True
        return self._llm

    @property
    def answer_llm(self) -> LLM:
        """The answer model: passed in, else ``Settings.answer_model`` (default the construction model), created once;
        a construction LLM passed in answers too when the settings name no model."""
        if self._answer_llm is None:
            configured = self.settings.llm != "none" and self.settings.llm_model
            construction = self.llm if configured else self._llm
            self._answer_llm, created = make_answer_llm(self.settings, self.store, construction)
            if created:
                self._owned.append(self._answer_llm)
        return self._answer_llm

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings)
        return self._embedder

    @property
    def counter(self) -> TokenCounter:
        """What ``max_tokens`` counts (``Settings.tokenizer``)."""
        return token_counter(self.settings.tokenizer)

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = Retriever(
                self.store,
                self.embedder,
                lexical=self._lexical,
                approx_above=self.settings.approx_above,
                sweep=self.sweep.run,
            )
        return self._retriever

    @property
    def open_clients(self) -> int:
        """LLM clients this core created and has not closed yet."""
        return len(self._owned)

    def close(self) -> None:
        """Stop the upkeep thread, close the LLM clients this core created (on its loop), stop the loop, then close
        the store."""
        if self._upkeep is not None:
            self._upkeep.stop()
            self._upkeep = None
        try:
            if self._owned:
                self._loop.run(self._close_llms())
        finally:
            self._loop.close()
            self.store.close()

    async def _close_llms(self) -> None:
        for llm in self._owned:
            if isinstance(llm, ClosableBackend):
                await llm.aclose()
        self._owned.clear()

    def _invalidate(self, space: Scope) -> None:
        if self._retriever is not None:
            self._retriever.invalidate(space)

    def _refresh_index(self, space: Scope) -> None:
        """After this process changed the memory of ``space`` (a build, an edit, a forget): update its index now and
        incrementally (only new, changed and gone entries are touched). The retriever updates its cached index when
        it holds one; otherwise, with pgvector, the database's vectors are updated so that no searching worker has to
        (and a forgotten item's vectors are gone at once)."""
        held = self._retriever is not None and self._retriever.refresh(space)
        if not held and persistent_vectors(self.store):
            refresh_space(self.store, space, self.embedder)

    # ------------------------------------------------------------------ shared rules
    def resolve_config(self, config: RetrievalConfig | str | None = None) -> RetrievalConfig:
        """The retrieval configuration of a request: a config as given; a preset name, or None for
        ``Settings.search_preset``; with ``Settings.reranker_model`` when one is set and the config names none."""
        cfg = (
            config
            if isinstance(config, RetrievalConfig)
            else RetrievalConfig.preset(config or self.settings.search_preset)
        )
        if self.settings.reranker_model and cfg.reranker is None:
            cfg = cfg.replace(reranker=self.settings.reranker_model)
        return cfg

    def question_time(self, space: SpaceRef, asked: datetime | None = None) -> QuestionTime:
        """When a question is asked: at ``asked`` when given, else after the latest session start of the space."""
        space = as_scope(space)
        if asked is not None:
            return QuestionTime(at=asked, relation="at")
        sessions = self.store.sessions(space)
        if not sessions:
            raise InputError(
                "Space {space!r} has no sessions to date the question; add a conversation first.", space=space
            )
        return QuestionTime.after_sessions(s.started_at for s in sessions)

    def staleness(self, space: SpaceRef) -> Staleness:
        space = as_scope(space)
        self.store.get_space(space)
        built = self.store.get_state(space, STATE_MODE) is not None
        watermark = self.store.get_state(space, STATE_TURN_SEQ)
        if watermark is not None:
            stale = self.store.count_turns_after(space, int(watermark))
        elif not built:
            stale = self.store.count_turns_after(space, -1)
        else:  # built before the watermark existed (schema-v1 memories): turns outside scenes
            stale = self.store.count_turns_outside_scenes(space)
        return Staleness(space=space.space, built=built, stale_turns=stale)

    # ------------------------------------------------------------------ conversations
    def spaces(self) -> list[SpaceSummary]:
        return self.store.list_spaces()

    # ---- what front ends ask of the memory, never of its store (the control store: the service's, same database)
    def tenant_spaces(self, tenant: str) -> list[SpaceSummary]:
        return self.store.list_spaces(tenant)

    def has_space(self, space: SpaceRef) -> bool:
        return self.store.has_space(as_scope(space))

    def hit_records(self, space: SpaceRef, context: Context) -> list[HitRecord]:
        return hit_records(self.store, as_scope(space), context)

    def control(self) -> ControlStore:
        return open_control(self.store)

    def import_file(self, path: str | Path, fmt: Format = "auto", space: str | None = None) -> ImportReport:
        """Import a LoCoMo or native file; re-importing the same content changes nothing."""
        return import_file(self.store, path, fmt, space)

    def add_sessions(self, space: SpaceRef, sessions: Sequence[SessionInput]) -> ImportReport:
        """Append sessions to ``space`` (created if new); known sessions are skipped by content hash."""
        return import_sessions(self.store, as_scope(space), list(sessions))

    def add_messages(
        self,
        space: SpaceRef,
        messages: Sequence[MessageInput | dict[str, object]],
        *,
        received_at: datetime | None = None,
    ) -> MessagesReport:
        """Append messages as they arrive (open session or a new one after the idle gap); idempotent by id (a message
        without one is stored on every call).
        ``received_at`` dates messages that carry no time (a live agent's arrival time); see docs/agents.md."""
        gap = timedelta(minutes=self.settings.session_gap_minutes)
        return add_messages(self.store, as_scope(space), parse_messages(messages), gap=gap, received_at=received_at)

    def delete_space(self, space: SpaceRef) -> ErasureState:
        """Delete the space and every trace of it (conversation, memory, embeddings, LLM log), erased from disk.
        ``erased`` is False when another process's open read kept the erasure from completing: it stays pending in
        the erasure ledger and is finished by :meth:`upkeep` (run every few seconds by ``tmem serve``, ``mcp`` and
        ``ui``)."""
        space = as_scope(space)
        with self.store.transaction():
            self.store.delete_space(space)
            seq = self.store.add_erasure(space, "delete")
        self._invalidate(space)
        if self._lexical is not None:
            self._lexical.drop(space)
        self.sweep.handled(seq)
        return state_of(self.store, seq, finish_erasures(self.store))

    # ------------------------------------------------------------------ erasure upkeep
    def erasures(
        self, *, space: SpaceRef | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        """The store's erasure ledger (of ``space`` or ``tenant`` when given; only pending entries with ``pending``):
        one entry per forget or deletion, pending until its bytes are erased."""
        return self.store.erasures(scope=None if space is None else as_scope(space), tenant=tenant, pending=pending)

    def upkeep(self) -> bool:
        """One round of erasure upkeep: finish pending erasures, drop this process's local copies of erased spaces.
        True when no erasure is pending afterwards."""
        done = finish_erasures(self.store)
        self.sweep.run()
        return done

    def start_upkeep(self, interval: float) -> None:
        """Run :meth:`upkeep` every ``interval`` seconds in a daemon thread until :meth:`close` (long-running front
        ends: an erasure a reader blocked finishes without another request)."""
        if self._upkeep is None:
            self._upkeep = Upkeep(self.upkeep, interval)
            self._upkeep.start()

    # ------------------------------------------------------------------ construction
    def build(
        self, space: SpaceRef, options: BuildOptions | None = None, *, rebuild: bool = False, progress: bool = False
    ) -> BuildReport:
        """Build or extend the memory of ``space`` (only what is new); BuildBusy if another build of it runs."""
        return self._loop.run(self._abuild(as_scope(space), options, rebuild=rebuild, progress=progress))

    async def _abuild(
        self, space: Scope, options: BuildOptions | None = None, *, rebuild: bool = False, progress: bool = False
    ) -> BuildReport:
        """The build, on the core's loop, under the space's build lease (BuildBusy when another build holds it)."""
        self.store.get_space(space)
        llm = self.llm
        with build_lease(self.store, space, self.settings.build_lease_seconds):
            last = self.store.last_turn(space)
            if rebuild:
                reset_space(self.store, space)
            embedder = make_embedder(self.settings, store=self.store, space=space) if self._embedder is None else None
            try:
                report = await build_space(
                    self.store, space, llm=llm, embedder=embedder or self.embedder, options=options, progress=progress
                )
            finally:
                if isinstance(llm, StructuredLLM):
                    llm.batch = False  # the batch protocol is per build; later calls are live again
            await reapply_edits(self.store, space, llm=llm)
            if last is not None:
                old = int(self.store.get_state(space, STATE_TURN_SEQ) or -1)
                self.store.set_state(space, STATE_TURN_SEQ, str(max(last.seq, old)))
            self._refresh_index(space)
        return report

    def build_policy(self) -> BuildPolicy:
        return BuildPolicy(after_turns=self.settings.build_after_turns, idle_seconds=self.settings.build_idle_seconds)

    def build_if_due(self, space: SpaceRef, idle_seconds: float) -> BuildReport | None:
        """Build when the build policy says so (``TMEM_BUILD_AFTER_TURNS`` / ``TMEM_BUILD_IDLE_SECONDS``) and no other
        build of the space runs; ``idle_seconds``: time since the space's last message arrived. None otherwise."""
        if not self.build_policy().due(self.staleness(space).stale_turns, idle_seconds):
            return None
        try:
            return self.build(space)
        except BuildBusy:
            return None

    # ------------------------------------------------------------------ recall
    def search(
        self,
        space: SpaceRef,
        query: str,
        config: RetrievalConfig | str | None = None,
        *,
        where: MemoryFilter | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Recall for ``query``: typed scene and item hits with the routes that reached them, plus personas, and
        whether the memory is stale; ``where`` keeps only memory from matching turns (tmem.retrieve.filters)."""
        space = as_scope(space)
        self.store.get_space(space)
        return self._search(space, query, Asked(self.resolve_config(config)), memory_filter(where))

    def _search(self, space: Scope, query: str, request: Asked, chosen: MemoryFilter | None) -> SearchResult:
        if chosen is not None:  # only hits from matching turns (tmem.retrieve.filters)
            result = filtered_search(self.retriever, self.store, space, query, request, chosen)
        else:
            result = self.retriever.search(space, query, request)
        return self._marked_stale(space, result)[0]

    def _marked_stale(self, space: Scope, result: SearchResult) -> tuple[SearchResult, Staleness]:
        """``result`` saying whether the space has turns its last build did not see (and the staleness itself)."""
        stale = self.staleness(space)
        return result.model_copy(update={"stale": stale.stale, "stale_turns": stale.stale_turns}), stale

    def context(
        self,
        space: SpaceRef,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: MemoryFilter | Mapping[str, Any] | None = None,
        layout: Layout = None,
    ) -> Context:
        """The text to hand a reader for ``query``: hits packed into at most ``max_tokens`` tokens, with their routes
        (None: the whole search result), and how many turns are not built yet; ``where`` filters before packing;
        ``layout`` sets how the text is laid out (fields not given: per recipe, docs/retrieval.md)."""
        return self.recall(space, query, max_tokens, config, where=where, layout=layout)[1]

    def recall(
        self,
        space: SpaceRef,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: MemoryFilter | Mapping[str, Any] | None = None,
        layout: Layout = None,
    ) -> tuple[SearchResult, Context]:
        """:meth:`context` with the search it was packed from (the viewer's "why recalled" page shows both)."""
        space = as_scope(space)
        self.store.get_space(space)
        chosen = memory_filter(where)
        request = asked(self.resolve_config(config), as_layout(layout), max_tokens)
        if chosen is not None:
            result, ctx = filtered_recall(
                self.retriever, self.store, space, query, max_tokens, request, chosen, self.counter
            )
        else:
            result, ctx = recall(self.retriever, space, query, max_tokens, request, counter=self.counter)
        result, stale = self._marked_stale(space, result)
        return result, ctx.model_copy(update={"unbuilt_turns": max(ctx.unbuilt_turns, stale.stale_turns)})

    def ask(
        self,
        space: SpaceRef,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        layout: Layout = None,
    ) -> Answer:
        """Answer ``question`` from the memory of ``space`` (needs an LLM) with a context of at most ``max_tokens``
        laid out as ``layout`` says (as ``context``'s); dated after the latest session unless ``when`` says
        otherwise."""
        space = as_scope(space)
        llm = self.answer_llm  # a missing model is reported before anything else
        self.store.get_space(space)
        at = when if isinstance(when, QuestionTime) else self.question_time(space, when)
        # the search a budgeted context of this recipe needs (Memory.context's)
        request = asked(self.resolve_config(config), as_layout(layout), max_tokens)
        found = self._search(space, question, request, None)
        answerer = Answerer(self.retriever, llm, counter=self.counter)
        return self._loop.run(
            answerer.answer(space, question, at, variant=variant, config=request, result=found, max_tokens=max_tokens)
        )

    # ------------------------------------------------------------------ one memory at a time
    def get_item(self, space: SpaceRef, item_id: str) -> Item:
        return get_item(self.store, as_scope(space), item_id)

    def list_items(
        self,
        space: SpaceRef,
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
        return list_items(self.store, as_scope(space), filters, offset=offset, limit=limit)

    def update_item(self, space: SpaceRef, item_id: str, text: str) -> Item:
        """New text for one item: its triggers are regenerated, the old text is kept in its history."""
        space = as_scope(space)
        updated = self._loop.run(update_item(self.store, space, item_id, text, llm=self.llm))
        self._refresh_index(space)
        return updated

    def delete_item(self, space: SpaceRef, item_id: str) -> ForgetReport:
        """Delete one item for good: the same as ``forget(space, item_ids=[item_id])``."""
        return self.forget(space, item_ids=[item_id])

    def forget(self, space: SpaceRef, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        """Forget turns and items: tombstoned, removed from every derived record and cache, erased from disk."""
        space = as_scope(space)
        if not turn_ids and not item_ids:
            raise InputError("Name what to forget: turn_ids and/or item_ids.")
        cached = CachedEmbedder(self.embedder, self.store, space)
        embed = cached.embed
        report = forget(self.store, space, turn_ids=turn_ids, item_ids=item_ids, embed=lambda t: embed(t).vectors)
        if self._lexical is not None:
            self._lexical.drop(space)  # the saved BM25 indices hold the forgotten texts' words (other nodes: sweep)
        self.sweep.handled(report.erasure)
        self._refresh_index(space)
        return report

    def history(self, space: SpaceRef, item_id: str) -> ItemHistory:
        """The item's versions (extracted, then each edit, with times) and its supersession chain."""
        return item_history(self.store, as_scope(space), item_id)

    # ------------------------------------------------------------------ inspection and export
    def export(self, space: SpaceRef) -> SpaceExport:
        """Every record of ``space``; ``export(...).model_dump_json()`` is a complete, readable backup."""
        return export_space(self.store, as_scope(space))

    def export_file(self, space: SpaceRef, path: str | Path) -> Path:
        """Write :meth:`export` of ``space`` as JSON to ``path``; returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.export(space).model_dump(mode="json"), indent=1, ensure_ascii=False))
        return target

    def cost(self, space: SpaceRef | None = None) -> CostReport:
        """LLM calls and tokens per construction stage, from the call log (of ``space``, or of every space)."""
        space = None if space is None else as_scope(space)
        if space is not None:
            self.store.get_space(space)
        return cost_report(self.store, space)
