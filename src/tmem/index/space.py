"""The per-space index: the records and their links, lexical indices (one BM25 corpus over every node text, one over
raw turns) and the space's vectors behind :class:`tmem.index.backend.VectorIndex`: one part per node type (topic,
scene, item, turn) and one per trigger family's views (paper §3.3; a host's family score is the max over its views).

Node texts: a topic is its label; a scene is ``title. summary``; an item is its text. Superseded items (with
``superseded_by`` set) are left out of every index, as are the triggers they host.

A :class:`SpaceIndex` is immutable once built. :func:`index_space` builds it from :class:`SpaceRecords` over a vector
backend and brings the backend up to date, embedding only what it lacks; :func:`load_space` reads the records from a
store and :func:`cached_vectorizer` embeds through the store's embedding cache, so that a text stored once is never
embedded again. Which backend serves a store is decided in :mod:`tmem.index.factory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from tmem.embed.base import Embedder
from tmem.embed.cached import CachedEmbedder
from tmem.embed.texts import turn_embedding_text
from tmem.index.anchor import TurnLexicon
from tmem.index.backend import Entry, MemoryVectorIndex, SyncReport, VectorIndex, changes, view_part
from tmem.index.bm25 import BM25Index
from tmem.index.dense import Matrix
from tmem.index.ivf_saves import IvfSaves
from tmem.index.lexical import LexicalStore, scope_of
from tmem.index.topk import Mask, Scores
from tmem.index.views import Vectorize
from tmem.models import (
    ITEM_FAMILIES,
    SCENE_FAMILIES,
    BuildMode,
    Item,
    Persona,
    Scene,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    Turn,
)
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.state import STATE_MODE
from tmem.util.text import text_hash

NodeType = Literal["topic", "scene", "item"]
NODE_TYPES: tuple[NodeType, ...] = ("topic", "scene", "item")


@dataclass(frozen=True)
class SpaceRecords:
    """Everything the index needs from one space, as plain records."""

    space: Scope
    topics: list[Topic] = field(default_factory=list)
    scenes: list[Scene] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    links: list[TopicSceneLink] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    personas: list[Persona] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    mode: str | None = None  # the ``build.mode`` state key
    sessions: list[str] = field(default_factory=list)  # content hashes of the space's sessions, in seq order


def load_space(store: Store, space: Scope) -> SpaceRecords:
    """Read a space's nodes, links, triggers, personas and turns (raises NotFoundError for an unknown space), all in
    one committed state (``store.snapshot()``): a build committing meanwhile is seen wholly or not at all, never as
    items whose scenes, or triggers whose hosts, the other reads did not return."""
    with store.snapshot():
        store.get_space(space)
        return SpaceRecords(
            space=space,
            sessions=[s.content_hash for s in store.sessions(space)],  # before the turns: see Retriever.fingerprint
            topics=store.topics(space),
            scenes=store.scenes(space),
            items=store.items(space),
            links=store.topic_links(space),
            triggers=store.triggers(space),
            personas=store.personas(space),
            turns=store.turns(space),
            mode=store.get_state(space, STATE_MODE),
        )


def cached_vectorizer(store: Store, space: Scope, embedder: Embedder) -> Vectorize:
    """A ``vectorize`` function embedding through the store's cache (model id, text hash): a text stored once is
    never embedded again."""
    cached = CachedEmbedder(embedder, store, space)

    def vectorize(texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        vectors: Matrix = cached.embed(texts).vectors
        return vectors

    return vectorize


def scene_text(scene: Scene) -> str:
    return f"{scene.title}. {scene.summary}".strip()


def turn_search_text(turn: Turn) -> str:
    """What BM25 sees of a raw turn: speaker, text and the caption of a shared image."""
    line = f"{turn.speaker}: {turn.text}"
    return f"{line} (shared an image: {turn.caption})" if turn.caption else line


class SpaceIndex:
    """Node and trigger indices of one space: the records and their links, BM25 over node and turn texts, and the
    space's vectors behind the :class:`VectorIndex` protocol (``vectors``). Build with :func:`index_space` (or
    :meth:`build` / :meth:`from_store` for the in-process backend); search through the cascade."""

    @cached_property
    def turn_lexicon(self) -> TurnLexicon:
        """Token document frequencies over the raw turns (the query's lexical anchor; built on first use)."""
        return TurnLexicon(turn_search_text(t) for t in self.turn_list)

    def __init__(self, records: SpaceRecords, vectors: VectorIndex, lexical: LexicalStore | None = None) -> None:
        self.space = records.space
        self._lexical = lexical
        self.vectors = vectors
        self.dim = vectors.dim
        self.personas = list(records.personas)
        self.topics = list(records.topics)
        self.scenes = list(records.scenes)
        self.items = [i for i in records.items if i.superseded_by is None]
        self.topic_pos = {t.id: n for n, t in enumerate(self.topics)}
        self.scene_pos = {s.id: n for n, s in enumerate(self.scenes)}
        self.item_pos = {i.id: n for n, i in enumerate(self.items)}
        self.turns = {t.id: t for t in records.turns}
        self.mode = records.mode
        # Raw turns are indexed too (the turn route, docs/retrieval.md): BM25 over speaker + text + caption, dense over
        # the text the extractive build already embeds (so its vectors come from the store's cache).
        self.turn_list = sorted(records.turns, key=lambda t: t.seq)
        self.turn_ids = [t.id for t in self.turn_list]
        self.max_seq = self.turn_list[-1].seq if self.turn_list else -1  # later turns are a tail (tmem.index.tail)
        self.session_hashes = list(records.sessions)
        self.turn_scene: dict[str, str] = {tid: s.id for s in records.scenes for tid in s.turn_ids}

        # topic -> scene rows, scene -> topic ids, scene -> item rows (non-superseded only)
        self.topic_scenes: list[list[int]] = [[] for _ in self.topics]
        self.scene_topics: list[list[str]] = [[] for _ in self.scenes]
        for link in records.links:
            t, s = self.topic_pos.get(link.topic_id), self.scene_pos.get(link.scene_id)
            if t is not None and s is not None:
                self.topic_scenes[t].append(s)
                self.scene_topics[s].append(link.topic_id)
        self.scene_items: list[list[int]] = [[] for _ in self.scenes]
        for n, item in enumerate(self.items):
            for sid in item.scene_ids:
                s = self.scene_pos.get(sid)
                if s is not None:
                    self.scene_items[s].append(n)
        self.unlinked_scenes: Mask = np.array([not ts for ts in self.scene_topics], dtype=np.bool_)

        texts: dict[NodeType, list[str]] = {
            "topic": [t.label for t in self.topics],
            "scene": [scene_text(s) for s in self.scenes],
            "item": [i.text for i in self.items],
        }
        self.node_texts = texts
        self._offsets: dict[NodeType, tuple[int, int]] = {}
        at = 0
        for kind in NODE_TYPES:
            self._offsets[kind] = (at, at + len(texts[kind]))
            at += len(texts[kind])
        ids: dict[NodeType, list[str]] = {
            "topic": [t.id for t in self.topics],
            "scene": [s.id for s in self.scenes],
            "item": [i.id for i in self.items],
        }
        self.ids = ids
        self.entries, self.entry_texts = _entries(records, self)
        self.synced: SyncReport | None = None  # what bringing ``vectors`` up to date wrote (see index_space)

    @cached_property
    def held(self) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        """part -> (entry ids, host ids) this index was loaded with. A shared vector host (pgvector) may already hold
        the entries of a build committed after this index was read; search keeps only these (tmem.retrieve.lists)."""
        ids: dict[str, set[str]] = {}
        hosts: dict[str, set[str]] = {}
        for e in self.entries:
            ids.setdefault(e.part, set()).add(e.id)
            hosts.setdefault(e.part, set()).add(e.host)
        return {part: (frozenset(ids[part]), frozenset(hosts[part])) for part in ids}

    @cached_property
    def unbuilt(self) -> Mask:
        """Over :attr:`turn_list`: the turns no scene holds yet (added since the last build, or all before the first)."""
        return np.array([tid not in self.turn_scene for tid in self.turn_ids], dtype=np.bool_)

    @cached_property
    def speakers(self) -> frozenset[str]:
        """The names of the space's speakers (what a query names when it asks about one: tmem.retrieve.speakers)."""
        return frozenset(t.speaker for t in self.turn_list)

    @cached_property
    def bm25(self) -> BM25Index:
        """One BM25 corpus over all nodes, laid out topics | scenes | items; each stage reads its slice (built on
        first use: a process that only updates the vectors never needs it)."""
        texts = self.node_texts
        all_ids = [f"{kind}:{n}" for kind in NODE_TYPES for n in range(len(texts[kind]))]
        return self._bm25("nodes", all_ids, [t for kind in NODE_TYPES for t in texts[kind]])

    @cached_property
    def turn_bm25(self) -> BM25Index:
        """BM25 over raw turns (speaker, text, caption), built on first use."""
        return self._bm25("turns", self.turn_ids, [turn_search_text(t) for t in self.turn_list])

    def _bm25(self, corpus: str, ids: list[str], texts: list[str]) -> BM25Index:
        if self._lexical is None:
            return BM25Index.build(ids, texts)
        return self._lexical.index(scope_of(self.space, corpus), ids, texts)

    @classmethod
    def build(cls, records: SpaceRecords, vectorize: Vectorize, dim: int) -> SpaceIndex:
        """An index with the in-process vector backend, every vector from ``vectorize``."""
        return index_space(records, MemoryVectorIndex(dim), vectorize)

    @classmethod
    def from_store(cls, store: Store, space: Scope, embedder: Embedder) -> SpaceIndex:
        """The whole index of a stored space in process (vectors and BM25), ready to search."""
        index = cls.build(load_space(store, space), cached_vectorizer(store, space, embedder), embedder.dim)
        index.bm25, index.turn_bm25  # noqa: B018 -- built now, not by the first search
        return index

    # ------------------------------------------------------------------ queries used by the cascade

    def bm25_scores(self, kind: NodeType, query: str, all_scores: Scores | None = None) -> Scores:
        """BM25 scores of the nodes of one type (pass ``all_scores`` to reuse one corpus-wide scoring)."""
        scores = self.bm25.scores(query) if all_scores is None else all_scores
        lo, hi = self._offsets[kind]
        return scores[lo:hi]

    @property
    def descriptive_only(self) -> bool:
        """True for a space built without an LLM (no Bridge, Horizon, Scene triggers or persona)."""
        if self.mode is not None:
            return self.mode == BuildMode.EXTRACTIVE.value
        return bool(self.scenes) and all(s.mode == BuildMode.EXTRACTIVE for s in self.scenes)

    def counts(self) -> dict[str, int]:
        """Vectors held per part of :attr:`vectors` (``topic`` ... ``views.entity`` ... ``turn``)."""
        return {part: self.vectors.count(part) for part in dict.fromkeys(e.part for e in self.entries)}


def _entries(records: SpaceRecords, index: SpaceIndex) -> tuple[list[Entry], list[str]]:
    """What the space's vector index holds, with the text each entry embeds, in a fixed order: topics, scenes, items
    (store order), the views of each trigger family (grouped by host, hosts in node order; empty views and views of
    superseded or unknown hosts left out), then turns (conversation order)."""
    entries: list[Entry] = []
    texts: list[str] = []

    def add(part: str, ident: str, host: str, view: str, text: str) -> None:
        entries.append(Entry(part, ident, host, view, text_hash(text)))
        texts.append(text)

    for kind in NODE_TYPES:
        for ident, text in zip(index.ids[kind], index.node_texts[kind], strict=True):
            add(kind, ident, ident, "", text)
    views: dict[TriggerFamily, list[tuple[int, str, str, str]]] = {fam: [] for fam in TriggerFamily}
    for trig in records.triggers:
        if trig.host_kind == "item" and trig.family in ITEM_FAMILIES:
            host = index.item_pos.get(trig.host_id)
        elif trig.host_kind == "scene" and trig.family in SCENE_FAMILIES:
            host = index.scene_pos.get(trig.host_id)
        else:
            host = None
        if host is None:
            continue
        views[trig.family].extend(
            (host, f"{trig.id}:{n}", v.name, v.text) for n, v in enumerate(trig.views) if v.text.strip()
        )
    for fam in TriggerFamily:
        hosts = index.ids["item" if fam in ITEM_FAMILIES else "scene"]
        for pos, ident, name, text in sorted(views[fam], key=lambda r: r[0]):
            add(view_part(fam.value), ident, hosts[pos], name, text)
    for turn in index.turn_list:
        add("turn", turn.id, turn.id, "", turn_embedding_text(turn))
    return entries, texts


def refresh_vectors(
    vectors: VectorIndex,
    entries: Sequence[Entry],
    texts: Sequence[str],
    vectorize: Vectorize,
    on_part: Callable[[str, int], None] | None = None,
) -> SyncReport:
    """Make ``vectors`` hold exactly ``entries``, embedding only the entries it lacks or holds with another text
    (one ``vectorize`` call per part, so that a full build embeds in the same batches as a part-by-part one).
    ``on_part(part, n)`` is called after each part's ``n`` texts were vectorized (progress)."""
    write, _, _ = changes(vectors.known(), entries)
    matrix = np.zeros((len(entries), vectors.dim), dtype=np.float32)
    by_part: dict[str, list[int]] = {}
    for n in write:
        by_part.setdefault(entries[n].part, []).append(n)
    for part, rows in by_part.items():
        matrix[rows] = vectorize([texts[n] for n in rows])
        if on_part is not None:
            on_part(part, len(rows))
    return vectors.sync(entries, matrix)


def index_space(
    records: SpaceRecords,
    vectors: VectorIndex,
    vectorize: Vectorize,
    *,
    lexical: LexicalStore | None = None,
    saves: IvfSaves | None = None,
) -> SpaceIndex:
    """The index of ``records`` over ``vectors`` (any backend), brought up to date: only what ``vectors`` lacks or
    holds with another text is embedded and written. BM25 comes from ``lexical`` (saved indices) when given; with
    ``saves``, a fresh in-process index restores its saved approximate parts first and saves them after."""
    index = SpaceIndex(records, vectors, lexical)
    memory = vectors if saves is not None and isinstance(vectors, MemoryVectorIndex) else None
    if memory is not None and saves is not None:
        memory.restore(index.entries, saves)
    index.synced = refresh_vectors(vectors, index.entries, index.entry_texts, vectorize)
    if memory is not None and saves is not None:
        memory.save(saves)
    return index
