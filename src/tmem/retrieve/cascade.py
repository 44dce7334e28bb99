"""The retrieval cascade of paper §3.4 and the :class:`Retriever` that serves it from a store.

    Stage 1  topic prefilter: BM25 + dense over topic labels, fused by RRF, keep kT topics.
    Stage 2  scenes admitted to the surviving topics, ranked by BM25 + dense, fused with the scenes reached through
             Scene and Horizon views (never gated by the prefilter), keep kS.
    Stage 3  items of the kept scenes ranked by BM25 + dense, fused with the items reached through Entity/Bridge
             views (union top R, hard cosine gate), keep kI.

Every hit keeps its routes. Choices the paper leaves open are documented in docs/retrieval.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from tmem.embed.base import Embedder
from tmem.errors import NotFoundError
from tmem.index.backend import APPROX_ABOVE, MemoryVectorIndex, view_part
from tmem.index.cache import SpaceCache
from tmem.index.factory import load_index, persistent_vectors
from tmem.index.lexical import LexicalStore
from tmem.index.space import SpaceIndex, scene_text, turn_search_text
from tmem.index.topk import Mask, Scores, top_k
from tmem.models import ITEM_FAMILIES, TriggerFamily
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.fusion import Fused, Ranked, fuse, split_gate
from tmem.retrieve.rerank import CrossEncoderReranker, Reranker
from tmem.retrieve.types import GateMiss, ItemHit, Route, SceneHit, SearchResult, TurnHit
from tmem.store.base import Store
from tmem.util.text import text_hash

Vector = npt.NDArray[np.float32]
ANCHOR_CANDIDATES = 3  # best BM25 turns whose share of the query's IDF mass is the query's lexical anchor


def _ranked(ids: Sequence[str], scores: Scores, rows: npt.NDArray[np.intp]) -> list[Ranked]:
    return [Ranked(ids[r], float(scores[r])) for r in rows]


def _dense(
    index: SpaceIndex, part: str, qvec: Vector, k: int, allowed: Mask | None = None, ids: Sequence[str] = ()
) -> list[Ranked]:
    """The ``k`` entries of a node part nearest the query, through the vector index (only the rows of ``ids`` set in
    ``allowed`` when given)."""
    only = None if allowed is None else [ids[r] for r in np.flatnonzero(allowed).tolist()]
    return [Ranked(h.id, h.score) for h in index.vectors.top_k(part, qvec, k, only)]


def _trigger_route(
    index: SpaceIndex,
    families: Sequence[TriggerFamily],
    qvec: Vector,
    top: int,
    threshold: float | None,
    route: str,
    misses: list[GateMiss],
) -> list[Ranked]:
    """Hosts reached through the views of ``families``: host score = max over all those views. Those of the top list
    under ``threshold`` are dropped and recorded in ``misses``."""
    if top <= 0 or not families:
        return []
    out: list[Ranked] = []
    for hit in index.vectors.top_hosts([view_part(f.value) for f in families], qvec, top):
        winner = TriggerFamily(hit.part.removeprefix("views."))
        # the item route unites Entity and Bridge views: its view label names the family that gave the max
        label = f"{winner.value}:{hit.view}" if winner in ITEM_FAMILIES else hit.view
        out.append(Ranked(hit.host, hit.score, label))
    kept, fell = split_gate(out, threshold)
    host_kind: Literal["item", "scene"] = "item" if families[0] in ITEM_FAMILIES else "scene"
    rank = {e.id: n for n, e in enumerate(out, start=1)}
    misses.extend(
        GateMiss(route=route, host_kind=host_kind, host_id=e.id, rank=rank[e.id], score=e.score, view=e.view, gate=g)
        for e in fell
        if (g := e.gate) is not None
    )
    return kept


def _rerank(
    fused: list[Fused], texts: Callable[[str], str], query: str, reranker: Reranker | None, depth: int
) -> list[Fused]:
    """Reorder the best ``depth`` fused hits by the reranker's score (the rest keep their fused order after them)."""
    if reranker is None or not fused:
        return fused
    head, tail = fused[:depth], fused[depth:]
    scores = reranker.score(query, [texts(f.id) for f in head])
    order = sorted(range(len(head)), key=lambda n: (-scores[n], n))
    out = []
    for rank, n in enumerate(order, start=1):
        f = head[n]
        route = Route(name=f"rerank.{reranker.model_id}", rank=rank, score=scores[n])
        out.append(Fused(f.id, scores[n], [*f.routes, route]))
    return out + tail


def _scenes_via_items(
    index: SpaceIndex, i_bm: Scores, qvec: Vector, admitted: Mask, cfg: RetrievalConfig
) -> list[Ranked]:
    """Scenes ranked by their best item: BM25 + dense over every item, fused, each item voting for its source
    scenes in rank order (the view names the item that reached the scene). Admitted scenes only: this is a
    descriptive route, so the topic prefilter applies."""
    i_ids = index.ids["item"]
    items = fuse(
        {
            "bm25": _ranked(i_ids, i_bm, top_k(i_bm, cfg.depth, positive_only=True)),
            "dense": _dense(index, "item", qvec, cfg.depth),
        },
        cfg.k0,
    )
    out: dict[str, Ranked] = {}
    for f in items:
        for sid in index.items[index.item_pos[f.id]].scene_ids:
            pos = index.scene_pos.get(sid)
            if pos is not None and admitted[pos] and sid not in out:
                out[sid] = Ranked(sid, f.score, view=f.id)
        if len(out) >= cfg.scene_via_items_top:
            break
    return list(out.values())


def run_cascade(
    index: SpaceIndex,
    query: str,
    qvec: Vector,
    config: RetrievalConfig,
    reranker: Reranker | None = None,
) -> SearchResult:
    """One search over a built index with an already embedded query."""
    cfg = config.for_space(index.descriptive_only).deepened()
    bm25_all = index.bm25.scores(query)
    n_scenes = len(index.scenes)

    # ---------------- Stage 1: topic prefilter
    surviving: list[Fused] = []
    admitted: Mask = np.ones(n_scenes, dtype=np.bool_)
    prefiltered = False  # whether the prefilter ran (else every scene is admitted: an unfiltered lookup)
    if cfg.enabled("TF") and index.topics:
        t_ids = index.ids["topic"]
        t_bm = index.bm25_scores("topic", query, bm25_all)
        surviving = fuse(
            {
                "topic.bm25": _ranked(t_ids, t_bm, top_k(t_bm, cfg.depth, positive_only=True)),
                "topic.dense": _dense(index, "topic", qvec, cfg.depth),
            },
            cfg.k0,
        )[: cfg.k_topics]
        admitted = index.unlinked_scenes.copy() if cfg.admit_unlinked_scenes else np.zeros(n_scenes, np.bool_)
        prefiltered = True
        for f in surviving:
            admitted[index.topic_scenes[index.topic_pos[f.id]]] = True
    surviving_ids = {f.id for f in surviving}
    misses: list[GateMiss] = []

    # ---------------- Stage 2: scenes
    s_ids = index.ids["scene"]
    s_bm = index.bm25_scores("scene", query, bm25_all)
    scene_lists: dict[str, list[Ranked]] = {
        "scene.bm25": _ranked(s_ids, s_bm, top_k(s_bm, cfg.depth, admitted, positive_only=True)),
        "scene.dense": _dense(index, "scene", qvec, cfg.depth, admitted if prefiltered else None, s_ids),
    }
    # Trigger routes are never gated by the topic prefilter (the bypass).
    if cfg.enabled("ST"):
        scene_lists["scene.trigger.scene"] = _trigger_route(
            index,
            (TriggerFamily.SCENE,),
            qvec,
            cfg.scene_trigger_top,
            cfg.scene_trigger_gate,
            "scene.trigger.scene",
            misses,
        )
    if cfg.enabled("HT"):
        scene_lists["scene.trigger.horizon"] = _trigger_route(
            index,
            (TriggerFamily.HORIZON,),
            qvec,
            cfg.scene_trigger_top,
            cfg.scene_trigger_gate,
            "scene.trigger.horizon",
            misses,
        )

    i_ids = index.ids["item"]
    i_bm = index.bm25_scores("item", query, bm25_all)
    if cfg.scene_via_items_top > 0:
        scene_lists["scene.items"] = _scenes_via_items(index, i_bm, qvec, admitted, cfg)

    def scene_text_of(sid: str) -> str:
        return scene_text(index.scenes[index.scene_pos[sid]])

    fused_scenes = _rerank(fuse(scene_lists, cfg.k0), scene_text_of, query, reranker, cfg.rerank_depth)
    kept_scenes = fused_scenes[: cfg.k_scenes]

    # ---------------- Stage 3: items
    kept_items: list[Fused] = []
    if cfg.enabled("IC"):
        pool: Mask = np.zeros(len(index.items), dtype=np.bool_)
        for f in kept_scenes:
            pool[index.scene_items[index.scene_pos[f.id]]] = True
        if cfg.item_direct_top > 0:
            # Direct route: every indexed item (superseded ones are not indexed) is ranked, not only the pool, so
            # items of kept scenes and items elsewhere compete on the same two lists.
            item_lists: dict[str, list[Ranked]] = {
                "item.direct.bm25": _ranked(i_ids, i_bm, top_k(i_bm, cfg.item_direct_top, positive_only=True)),
                "item.direct.dense": _dense(index, "item", qvec, cfg.item_direct_top),
            }
        else:
            n_pool = int(pool.sum())
            item_lists = {
                "item.bm25": _ranked(i_ids, i_bm, top_k(i_bm, max(cfg.depth, n_pool), pool, positive_only=True)),
                "item.dense": _dense(index, "item", qvec, max(cfg.depth, n_pool), pool, i_ids),
            }
        if cfg.enabled("ET+BT"):
            families = tuple(f for f in ITEM_FAMILIES if f in cfg.item_trigger_families)
            if cfg.split_item_triggers:
                for fam in families:
                    name = f"item.trigger.{fam.value}"
                    item_lists[name] = _trigger_route(index, (fam,), qvec, cfg.item_trigger_top, cfg.gate, name, misses)
            else:
                item_lists["item.trigger"] = _trigger_route(
                    index, families, qvec, cfg.item_trigger_top, cfg.gate, "item.trigger", misses
                )

        def item_text_of(iid: str) -> str:
            return index.items[index.item_pos[iid]].text

        kept_items = _rerank(fuse(item_lists, cfg.k0), item_text_of, query, reranker, cfg.rerank_depth)[: cfg.k_items]

    kept_turns: list[Fused] = []
    tr_bm: Scores | None = None
    if cfg.turn_top > 0 and index.turn_list:
        tr_bm = index.turn_bm25.scores(query)
        t_ids = index.turn_ids
        # Each list's best turn_top turns are kept (not the fused top turn_top): a turn that one list alone puts at
        # its top is what flat retrieval by that list would hand a reader, so it must reach the context's fusion.
        kept_turns = fuse(
            {
                "turn.bm25": _ranked(t_ids, tr_bm, top_k(tr_bm, cfg.turn_top, positive_only=True)),
                "turn.dense": _dense(index, "turn", qvec, cfg.turn_top),
            },
            cfg.k0,
        )

    result = _result(index, query, cfg, surviving, surviving_ids, kept_scenes, kept_items, misses)
    if cfg.lexical_floor is not None and index.turn_list:
        lexical = tr_bm if tr_bm is not None else index.turn_bm25.scores(query)
        best = top_k(lexical, ANCHOR_CANDIDATES, positive_only=True)
        texts = [turn_search_text(index.turn_list[int(r)]) for r in best]
        result = result.model_copy(update={"lexical_anchor": index.turn_lexicon.anchor(query, texts)})
    if not kept_turns:
        return result
    turn_hits = [
        TurnHit(turn=index.turns[f.id], scene_id=index.turn_scene.get(f.id), score=f.score, routes=f.routes)
        for f in kept_turns
    ]
    return result.model_copy(update={"turns": turn_hits})


def _result(
    index: SpaceIndex,
    query: str,
    cfg: RetrievalConfig,
    surviving: list[Fused],
    surviving_ids: set[str],
    kept_scenes: list[Fused],
    kept_items: list[Fused],
    misses: list[GateMiss],
) -> SearchResult:
    scene_hits: list[SceneHit] = []
    if cfg.enabled("SL"):
        for f in kept_scenes:
            pos = index.scene_pos[f.id]
            scene = index.scenes[pos]
            scene_hits.append(
                SceneHit(
                    scene=scene,
                    turns=[index.turns[t] for t in scene.turn_ids if t in index.turns],
                    score=f.score,
                    routes=f.routes,
                    topic_ids=[t for t in index.scene_topics[pos] if t in surviving_ids],
                )
            )
    item_hits: list[ItemHit] = []
    for f in kept_items:
        item = index.items[index.item_pos[f.id]]
        sources = [index.scenes[index.scene_pos[s]] for s in item.scene_ids if s in index.scene_pos]
        turn_ids = list(item.turn_ids) or [t for s in sources for t in s.turn_ids]
        item_hits.append(
            ItemHit(item=item, source_scenes=sources, source_turn_ids=turn_ids, score=f.score, routes=f.routes)
        )
    return SearchResult(
        space=index.space,
        query=query,
        preset=cfg.name,
        scenes=scene_hits,
        items=item_hits,
        personas=list(index.personas) if cfg.enabled("PS") else [],
        topics=[(f.id, f.score) for f in surviving],
        disabled=sorted(cfg.disabled),
        descriptive_only=index.descriptive_only,
        gated=misses,
        unbuilt_turns=sum(1 for t in index.turns if t not in index.turn_scene),
    )


DEFAULT_CACHE_BYTES = 2 * 2**30  # per Retriever: the built indices it keeps (vectors + an estimate of the records)


def index_bytes(index: SpaceIndex) -> int:
    """What a built index holds in memory, for the cache's budget: its in-process vectors exactly (none with
    pgvector), plus about 1 KiB of Python objects per node and turn (records, ids, BM25 postings)."""
    nodes = len(index.topics) + len(index.scenes) + len(index.items) + len(index.turns)
    vectors = index.vectors.nbytes if isinstance(index.vectors, MemoryVectorIndex) else 0
    return vectors + 1024 * nodes


class Retriever:
    """Searches spaces of a store. Each space's index is built once per process and rebuilt only when the space's
    state keys change (every build writes its checkpoints there) or after :meth:`invalidate`. Built indices are kept
    in a :class:`SpaceCache`: bounded by ``cache_bytes`` (least recently used out), one lock per space, so a rebuild
    of one space never blocks searches of another."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        reranker: Reranker | None = None,
        *,
        config: RetrievalConfig | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        lexical: LexicalStore | None = None,
        approx_above: int | None = APPROX_ABOVE,
        sweep: Callable[[], object] | None = None,
    ) -> None:
        self.store = store
        self.sweep = sweep  # run before loading an index: drops local saves of spaces erased elsewhere
        self.approx_above = approx_above  # in-process parts this large are searched approximately (docs/scaling.md)
        self.embedder = embedder
        self.reranker = reranker
        self.config = config or RetrievalConfig.preset("auto")
        self._cache: SpaceCache[SpaceIndex] = SpaceCache(cache_bytes, index_bytes)
        self.lexical = lexical  # where BM25 indices are saved and loaded from (None: rebuilt at every load)
        self._rerankers: dict[str, Reranker] = {}

    @property
    def builds(self) -> int:
        """How many indices this retriever has built (observability and tests)."""
        return self._cache.builds

    def fingerprint(self, space: str) -> tuple[tuple[str, str], ...]:
        """Cheap change detector: the space's state keys (every build stage writes its checkpoints and ``build.*`` keys
        there when it commits nodes) and its sessions (an import adds turns the turn route and the staleness count
        must see before any build)."""
        sessions = ",".join(s.content_hash for s in self.store.sessions(space))
        return (*sorted(self.store.state_keys(space).items()), ("sessions", text_hash(sessions)))

    def index(self, space: str) -> SpaceIndex:
        """The space's index, built on first use and updated whenever its fingerprint changed (incrementally: what
        the previous index of the space holds is kept, only new or changed entries are embedded and written)."""
        return self._cache.get(space, self.fingerprint(space), lambda: self._load(space))

    def _load(self, space: str) -> SpaceIndex:
        previous = self._cache.stale(space)  # taken first: the sweep may drop it from the cache
        if self.sweep is not None:
            self.sweep()
        mark = self.store.latest_erasure(space) if self.lexical is not None else 0
        index = load_index(
            self.store, space, self.embedder, previous, lexical=self.lexical, approx_above=self.approx_above
        )
        if self.lexical is not None and self.store.latest_erasure(space) != mark:
            # Erased (here or on another node) while this load read the records: the saves it wrote may hold what
            # was erased. Drop them and load again without saving.
            self.lexical.drop(space)
            index = load_index(self.store, space, self.embedder, None, lexical=None, approx_above=self.approx_above)
        return index

    def refresh(self, space: str) -> bool:
        """Update the cached index of ``space`` now (incrementally), whether or not its fingerprint changed: after a
        write this process made (a build, an edit, a forget). False, doing nothing, when the space is not cached."""
        if self._cache.stale(space) is None:
            return False
        self._cache.get(space, self.fingerprint(space), lambda: self._load(space), force=True)
        return True

    def invalidate(self, space: str | None = None) -> None:
        """Forget the cached index of one space (or all): the next search rebuilds it from the store."""
        self._cache.invalidate(space)

    def embed_query(self, query: str) -> Vector:
        vec: Vector = self.embedder.embed([query]).vectors[0]
        return vec

    def _reranker_for(self, cfg: RetrievalConfig) -> Reranker | None:
        if self.reranker is not None:
            return self.reranker
        if cfg.reranker is None:
            return None
        if cfg.reranker not in self._rerankers:
            self._rerankers[cfg.reranker] = CrossEncoderReranker(cfg.reranker)
        return self._rerankers[cfg.reranker]

    def search(self, space: str, query: str, config: RetrievalConfig | None = None) -> SearchResult:
        """Run the cascade for ``query`` in ``space``; the query is embedded exactly once."""
        cfg = config or self.config
        index = self.index(space)
        if index.mode is None and index.turns and not index.scenes:
            # An unbuilt space would answer exactly like a built one where nothing matched.
            raise NotFoundError(
                f"Space {space!r} has {len(index.turns)} turns but no memory yet: run `tmem build {space}` first."
            )
        qvec, reranker = self.embed_query(query), self._reranker_for(cfg)
        if not persistent_vectors(self.store):
            return run_cascade(index, query, qvec, cfg, reranker)
        with self.store.transaction():  # pgvector: the search's lookups on one pooled connection and one snapshot
            return run_cascade(index, query, qvec, cfg, reranker)
