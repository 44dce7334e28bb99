"""The public entry point: a :class:`Memory` over one memory directory.

    from tmem import Memory

    with Memory.open("~/.tmem-demo") as mem:          # extractive mode unless an LLM is configured
        mem.import_file("locomo10.json")
        mem.build("conv-26")
        result = mem.search("conv-26", "Where did Caroline go last week?")
        for hit in result.scenes:
            print(hit.scene.title, [route.name for route in hit.routes])

The core of every operation is written once: construction and answering are async (they talk to an LLM), search
and inspection are sync. The sync methods ``build`` and ``ask`` run the async ones on a private event loop; inside an
event loop, await ``abuild`` / ``aask`` instead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from tmem.answer import Answer, Answerer, QuestionTime, Variant
from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context, recall_context
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space, reset_space
from tmem.construct.report import BuildReport
from tmem.embed import make_embedder
from tmem.embed.base import Embedder
from tmem.errors import ConfigError
from tmem.ingest import Format, ImportReport, import_file, import_sessions
from tmem.llm.base import LLM
from tmem.llm.cost import CostReport, cost_report
from tmem.llm.service import make_llm
from tmem.models import (
    Item,
    Persona,
    Scene,
    Session,
    SessionInput,
    Space,
    SpaceSummary,
    Topic,
    TopicSceneLink,
    Trigger,
    Turn,
)
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.types import SearchResult
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store

R = TypeVar("R")


class SpaceExport(BaseModel):
    """Everything one space holds, as plain records (``Memory.export``)."""

    model_config = ConfigDict(frozen=True)

    format: str = "tmem-space-export/1"
    space: Space
    sessions: list[Session]
    turns: list[Turn]
    scenes: list[Scene]
    topics: list[Topic]
    topic_links: list[TopicSceneLink]
    items: list[Item]
    triggers: list[Trigger]
    personas: list[Persona]
    build_state: dict[str, str]


def _run(coro: Coroutine[Any, Any, R]) -> R:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise ConfigError("Memory.build/ask were called inside a running event loop: await Memory.abuild/aask instead.")


class Memory:
    """One memory directory: spaces, their conversations and the memories built from them."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or Settings()
        self._llm = llm
        self._llm_resolved = llm is not None
        self._embedder = embedder
        self._retriever: Retriever | None = None

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
        settings = settings or Settings()
        if home is not None:
            settings = settings.model_copy(update={"home": Path(home).expanduser()})
        return cls(open_store(settings.store_url), settings, llm=llm, embedder=embedder)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ components
    @property
    def llm(self) -> LLM | None:
        """The construction LLM from the settings (None in the extractive mode), unless one was passed in."""
        if not self._llm_resolved:
            self._llm = make_llm(self.settings, self.store)
            self._llm_resolved = True
        return self._llm

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings)
        return self._embedder

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = Retriever(self.store, self.embedder)
        return self._retriever

    # ------------------------------------------------------------------ conversations
    def spaces(self) -> list[SpaceSummary]:
        return self.store.list_spaces()

    def import_file(self, path: str | Path, fmt: Format = "auto", space: str | None = None) -> ImportReport:
        """Import a LoCoMo or native file; re-importing the same content changes nothing."""
        return import_file(self.store, path, fmt, space)

    def add_sessions(self, space: str, sessions: Sequence[SessionInput]) -> ImportReport:
        """Append sessions to ``space`` (created if new); known sessions are skipped by content hash."""
        return import_sessions(self.store, space, list(sessions))

    def delete_space(self, space: str) -> bool:
        """Delete the space and every trace of it: conversation, memory, embeddings and LLM log, then scrub the store
        so that no byte of it is left in the memory directory's files. Returns False when another process's open
        read kept the scrub from completing (the data is deleted; copies may remain in the WAL until that process
        closes; `tmem delete` says so)."""
        self.store.delete_space(space)
        if self._retriever is not None:
            self._retriever.invalidate(space)
        return self.store.scrub()

    # ------------------------------------------------------------------ construction
    async def abuild(self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False) -> BuildReport:
        """Build or extend the memory of ``space`` (only what is new is processed)."""
        if rebuild:
            reset_space(self.store, space)
        cached = make_embedder(self.settings, store=self.store, space=space) if self._embedder is None else None
        report = await build_space(
            self.store, space, llm=self.llm, embedder=cached or self.embedder, options=options, progress=False
        )
        if self._retriever is not None:
            self._retriever.invalidate(space)
        return report

    def build(self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False) -> BuildReport:
        return _run(self.abuild(space, options, rebuild=rebuild))

    # ------------------------------------------------------------------ recall
    def search(self, space: str, query: str, config: RetrievalConfig | str | None = None) -> SearchResult:
        """Recall for ``query``: typed scene and item hits with the routes that reached them, plus personas."""
        self.store.get_space(space)
        cfg = RetrievalConfig.preset(config) if isinstance(config, str) else config
        return self.retriever.search(space, query, cfg)

    def context(
        self,
        space: str,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
    ) -> Context:
        """The text to hand a reader for ``query``: hits packed into at most ``max_tokens`` tokens, with their routes
        (None: the whole search result). Logic: :func:`tmem.answer.budget.recall_context`."""
        self.store.get_space(space)
        cfg = RetrievalConfig.preset(config) if isinstance(config, str) else config
        return recall_context(self.retriever, space, query, max_tokens, cfg)

    async def aask(
        self,
        space: str,
        question: str,
        when: QuestionTime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | None = None,
    ) -> Answer:
        """Answer ``question`` from the memory of ``space`` with the answer model (needs an LLM)."""
        self.store.get_space(space)
        model = self.settings.answer_model or self.settings.require_llm()
        llm = make_llm(self.settings, self.store, model=model)
        if llm is None:  # settings.require_llm() already refused the extractive mode
            raise ConfigError("Answering needs an LLM: set TMEM_LLM_MODEL and OPENAI_BASE_URL.")
        if when is None:
            sessions = self.store.sessions(space)
            last = sessions[-1].started_at if sessions else None
            if last is None:
                raise ConfigError(f"Space {space!r} has no sessions to date the question; import some first.")
            when = QuestionTime(at=last, relation="after")
        return await Answerer(self.retriever, llm).answer(space, question, when, variant=variant, config=config)

    def ask(
        self,
        space: str,
        question: str,
        when: QuestionTime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | None = None,
    ) -> Answer:
        return _run(self.aask(space, question, when, variant=variant, config=config))

    # ------------------------------------------------------------------ inspection and export
    def export(self, space: str) -> SpaceExport:
        """Every record of ``space``; ``export(...).model_dump_json()`` is a complete, readable backup."""
        s = self.store
        return SpaceExport(
            space=s.get_space(space),
            sessions=s.sessions(space),
            turns=s.turns(space),
            scenes=s.scenes(space),
            topics=s.topics(space),
            topic_links=s.topic_links(space),
            items=s.items(space),
            triggers=s.triggers(space),
            personas=s.personas(space),
            build_state=s.state_keys(space),
        )

    def cost(self, space: str | None = None) -> CostReport:
        """LLM calls and tokens per construction stage, from the call log (of ``space``, or of every space)."""
        if space is not None:
            self.store.get_space(space)
        return cost_report(self.store, space)

    def export_file(self, space: str, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(json.dumps(self.export(space).model_dump(mode="json"), indent=1, ensure_ascii=False))
        return target
