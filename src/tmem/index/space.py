"""The per-space index: node indices (one BM25 corpus over every node text, one dense table per node type) and the
trigger-aware view tables of the four families (paper §3.3).

Node texts: a topic is its label; a scene is ``title. summary``; an item is its text. Superseded items (with
``superseded_by`` set) are left out of every index, as are the triggers they host.

The index is immutable. It is built from :class:`SpaceRecords` and a ``vectorize`` function; :func:`load_space`
reads the records from a store and :func:`cached_vectorizer` embeds through the store's embedding cache, so that a
text stored once is never embedded again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from tmem.construct.extractive.builder import turn_embedding_text
from tmem.embed.base import Embedder
from tmem.embed.cached import CachedEmbedder
from tmem.index.anchor import TurnLexicon
from tmem.index.bm25 import BM25Index
from tmem.index.dense import DenseTable, Matrix, query_vector
from tmem.index.topk import Mask, Scores
from tmem.index.views import Vectorize, ViewRow, ViewTable
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
from tmem.store.base import Store
from tmem.util.state import STATE_MODE

NodeType = Literal["topic", "scene", "item"]
NODE_TYPES: tuple[NodeType, ...] = ("topic", "scene", "item")


@dataclass(frozen=True)
class SpaceRecords:
    """Everything the index needs from one space, as plain records."""

    space: str
    topics: list[Topic] = field(default_factory=list)
    scenes: list[Scene] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    links: list[TopicSceneLink] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    personas: list[Persona] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    mode: str | None = None  # the ``build.mode`` state key


def load_space(store: Store, space: str) -> SpaceRecords:
    """Read a space's nodes, links, triggers, personas and turns (raises NotFoundError for an unknown space)."""
    store.get_space(space)
    return SpaceRecords(
        space=space,
        topics=store.topics(space),
        scenes=store.scenes(space),
        items=store.items(space),
        links=store.topic_links(space),
        triggers=store.triggers(space),
        personas=store.personas(space),
        turns=store.turns(space),
        mode=store.get_state(space, STATE_MODE),
    )


def cached_vectorizer(store: Store, space: str, embedder: Embedder) -> Vectorize:
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
    """Node and trigger indices of one space. Build with :meth:`build`; search through the cascade."""

    @cached_property
    def turn_lexicon(self) -> TurnLexicon:
        """Token document frequencies over the raw turns (the query's lexical anchor; built on first use)."""
        return TurnLexicon(turn_search_text(t) for t in self.turn_list)

    def __init__(self, records: SpaceRecords, vectorize: Vectorize, dim: int) -> None:
        self.space = records.space
        self.dim = dim
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
        self.turn_bm25 = BM25Index.build(self.turn_ids, [turn_search_text(t) for t in self.turn_list])
        turn_matrix = (
            vectorize([turn_embedding_text(t) for t in self.turn_list])
            if self.turn_list
            else np.zeros((0, dim), dtype=np.float32)
        )
        self.turn_dense = DenseTable(self.turn_ids, turn_matrix)
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
        # One BM25 corpus over all nodes, laid out topics | scenes | items; each stage reads its slice.
        all_ids = [f"{kind}:{n}" for kind in NODE_TYPES for n in range(len(texts[kind]))]
        self.bm25 = BM25Index.build(all_ids, [t for kind in NODE_TYPES for t in texts[kind]])
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
        self.dense: dict[NodeType, DenseTable] = {}
        for kind in NODE_TYPES:
            matrix = vectorize(texts[kind]) if texts[kind] else np.zeros((0, dim), dtype=np.float32)
            self.dense[kind] = DenseTable(ids[kind], matrix)

        rows: list[ViewRow] = []
        for trig in records.triggers:
            if trig.host_kind == "item" and trig.family in ITEM_FAMILIES:
                host = self.item_pos.get(trig.host_id)  # superseded or unknown hosts are dropped
            elif trig.host_kind == "scene" and trig.family in SCENE_FAMILIES:
                host = self.scene_pos.get(trig.host_id)
            else:
                host = None
            if host is None:
                continue
            rows.extend(ViewRow(host, trig.family, v.name, v.text) for v in trig.views)
        self.views: dict[TriggerFamily, ViewTable] = {}
        for fam in TriggerFamily:
            n_hosts = len(self.items) if fam in ITEM_FAMILIES else len(self.scenes)
            self.views[fam] = ViewTable.build(fam, n_hosts, rows, vectorize, dim)

        # All vectors in one C-contiguous stack (tables keep slices of it): a query costs one matrix-vector product,
        # whatever the number of tables, and no vector is held twice.
        parts: list[tuple[DenseTable | ViewTable, Matrix]] = [(self.dense[k], self.dense[k].matrix) for k in NODE_TYPES]
        parts += [(self.views[f], self.views[f].matrix) for f in TriggerFamily]
        parts.append((self.turn_dense, self.turn_dense.matrix))
        self.matrix: Matrix = np.concatenate([m for _, m in parts], axis=0) if parts else np.zeros((0, dim), np.float32)
        # Two maps: TriggerFamily.SCENE == "scene" as a str, so one dict would mix the scene table and scene views.
        self._node_slices: dict[str, slice] = {}
        self._view_slices: dict[TriggerFamily, slice] = {}
        at = 0
        for (table, m), key in zip(parts, [*NODE_TYPES, *TriggerFamily, "turn"], strict=True):
            sl = slice(at, at + m.shape[0])
            table.share(self.matrix[sl])
            if isinstance(key, TriggerFamily):
                self._view_slices[key] = sl
            else:
                self._node_slices[key] = sl
            at += m.shape[0]

    @classmethod
    def build(cls, records: SpaceRecords, vectorize: Vectorize, dim: int) -> SpaceIndex:
        return cls(records, vectorize, dim)

    @classmethod
    def from_store(cls, store: Store, space: str, embedder: Embedder) -> SpaceIndex:
        return cls(load_space(store, space), cached_vectorizer(store, space, embedder), embedder.dim)

    # ------------------------------------------------------------------ queries used by the cascade

    def bm25_scores(self, kind: NodeType, query: str, all_scores: Scores | None = None) -> Scores:
        """BM25 scores of the nodes of one type (pass ``all_scores`` to reuse one corpus-wide scoring)."""
        scores = self.bm25.scores(query) if all_scores is None else all_scores
        lo, hi = self._offsets[kind]
        return scores[lo:hi]

    def cosines(self, qvec: npt.NDArray[np.floating]) -> Scores:
        """Cosine of the query with every vector of the space (one product); slice it with :meth:`part`."""
        out: Scores = self.matrix @ query_vector(qvec, self.dim)
        return out

    def part(self, cos: Scores, key: NodeType | TriggerFamily | Literal["turn"]) -> Scores:
        """The slice of :meth:`cosines` that belongs to one node type or trigger family."""
        if isinstance(key, TriggerFamily):
            return cos[self._view_slices[key]]
        return cos[self._node_slices[key]]

    @property
    def descriptive_only(self) -> bool:
        """True for a space built without an LLM (no Bridge, Horizon, Scene triggers or persona)."""
        if self.mode is not None:
            return self.mode == BuildMode.EXTRACTIVE.value
        return bool(self.scenes) and all(s.mode == BuildMode.EXTRACTIVE for s in self.scenes)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {kind: len(self.dense[kind]) for kind in NODE_TYPES}
        out.update({f"views.{fam.value}": len(tab) for fam, tab in self.views.items()})
        out["turn"] = len(self.turn_dense)
        return out
