"""The retrieval cascade of paper §3.4 and the :class:`Retriever` that serves it from a store.

    Stage 1  topic prefilter: BM25 + dense over topic labels, fused by RRF, keep kT topics.
    Stage 2  scenes admitted to the surviving topics, ranked by BM25 + dense, fused with the scenes reached through
             Scene and Horizon views (never gated by the prefilter), keep kS.
    Stage 3  items of the kept scenes ranked by BM25 + dense, fused with the items reached through Entity/Bridge
             views (union top R, hard cosine gate), keep kI.

Every hit keeps its routes. Choices the paper leaves open are documented in docs/retrieval.md.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from tmem.embed.base import Embedder
from tmem.index.backend import APPROX_ABOVE, MemoryVectorIndex
from tmem.index.cache import SpaceCache
from tmem.index.factory import load_index, persistent_vectors
from tmem.index.lexical import LexicalStore
from tmem.index.space import SpaceIndex, cached_vectorizer, scene_text, turn_search_text
from tmem.index.tail import TurnTail
from tmem.index.topk import Mask, top_k
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.fusion import Fused, Ranked, fuse
from tmem.retrieve.lists import RawTurns, StageLists
from tmem.retrieve.recipe import Asked, Recipe, resolve
from tmem.retrieve.rerank import CrossEncoderReranker, Reranker
from tmem.retrieve.routes import RERANK_PREFIX, Stage, stage_routes
from tmem.retrieve.speakers import without_speakers
from tmem.retrieve.types import GateMiss, ItemHit, Route, SceneHit, SearchResult, TurnHit
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.text import text_hash

Vector = npt.NDArray[np.float32]
ANCHOR_CANDIDATES = 3  # best BM25 turns whose share of the query's IDF mass is the query's lexical anchor


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
        route = Route(name=f"{RERANK_PREFIX}{reranker.model_id}", rank=rank, score=scores[n])
        out.append(Fused(f.id, scores[n], [*f.routes, route]))
    return out + tail


def run_cascade(
    index: SpaceIndex,
    query: str,
    qvec: Vector,
    recipe: Recipe,
    reranker: Reranker | None = None,
    tail: TurnTail | None = None,
) -> SearchResult:
    """One search of a resolved recipe over a built index with an already embedded query (and the turns added since
    the index was loaded, ``tail``, searched beside its own: :mod:`tmem.index.tail`). Each stage fuses the lists of
    its active routes (:data:`tmem.retrieve.routes.ROUTES`)."""
    cfg = recipe.config
    turns = RawTurns(index, tail, query)
    lists = StageLists(index, query, qvec, cfg, turns)

    # ---------------- Stage 1: topic prefilter
    surviving: list[Fused] = []
    topic_lists = lists.lists(Stage.TOPIC) if index.topics else {}
    if topic_lists:
        surviving = fuse(topic_lists, cfg.k0)[: cfg.k_topics]
        n_scenes = len(index.scenes)
        admitted = index.unlinked_scenes.copy() if cfg.admit_unlinked_scenes else np.zeros(n_scenes, np.bool_)
        for f in surviving:
            admitted[index.topic_scenes[index.topic_pos[f.id]]] = True
        lists.admitted = admitted  # else every scene is admitted: an unfiltered lookup
    surviving_ids = {f.id for f in surviving}

    # ---------------- Stage 2: scenes (trigger routes are never gated by the topic prefilter: the bypass)
    def scene_text_of(sid: str) -> str:
        return scene_text(index.scenes[index.scene_pos[sid]])

    fused_scenes = _rerank(fuse(lists.lists(Stage.SCENE), cfg.k0), scene_text_of, query, reranker, cfg.rerank_depth)
    kept_scenes = fused_scenes[: cfg.k_scenes]

    # ---------------- Stage 3: items
    kept_items: list[Fused] = []
    if stage_routes(Stage.ITEM, cfg):
        pool: Mask = np.zeros(len(index.items), dtype=np.bool_)
        for f in kept_scenes:
            pool[index.scene_items[index.scene_pos[f.id]]] = True
        lists.pool = pool

        def item_text_of(iid: str) -> str:
            return index.items[index.item_pos[iid]].text

        item_lists = lists.lists(Stage.ITEM)
        kept_items = _rerank(fuse(item_lists, cfg.k0), item_text_of, query, reranker, cfg.rerank_depth)[: cfg.k_items]

    # Raw turns: each list's best turns are kept (not the fused top): a turn that one list alone puts at its top is
    # what flat retrieval by that list would hand a reader, so it must reach the context's fusion. The unbuilt-turn
    # routes recall what was said since the last build (or everything, before the first) whatever the rest ranks.
    turn_lists = lists.lists(Stage.TURN)
    if turns.raw_only and turn_lists:
        kept_turns = _raw_fused(turn_lists, cfg.k0, cfg.unbuilt_top)
    else:
        kept_turns = fuse(turn_lists, cfg.k0) if turn_lists else []

    result = _result(index, query, cfg, surviving, surviving_ids, kept_scenes, kept_items, lists.misses)
    result = result.model_copy(
        update={"unbuilt_turns": int(turns.unbuilt.sum()), "never_built": turns.raw_only, "layout": recipe.layout}
    )
    if recipe.layout.lexical_floor is not None and turns.list:
        best = top_k(turns.scores, ANCHOR_CANDIDATES, positive_only=True)
        texts = [turn_search_text(turns.list[int(r)]) for r in best]
        result = result.model_copy(update={"lexical_anchor": index.turn_lexicon.anchor(query, texts)})
    if not kept_turns:
        return result
    turn_hits = [
        TurnHit(turn=turns.turn(f.id), scene_id=index.turn_scene.get(f.id), score=f.score, routes=f.routes)
        for f in kept_turns
    ]
    return result.model_copy(update={"turns": turn_hits})


def _raw_fused(lists: dict[str, list[Ranked]], k0: int, top: int) -> list[Fused]:
    """The turn hits of a space never built, whose lists rank every turn (BM25: every turn with a query word): RRF
    over the whole lists, a turn a list does not rank tied at the rank after its last (BM25 cannot tell those turns
    apart); the fusion's best ``top`` and each list's best ``top`` are kept, in fused order, with their whole-list
    ranks. Only the kept turns get routes (a list holds every turn of the space)."""
    names = sorted(lists)
    ranks: dict[str, dict[str, int]] = {}
    for name in names:
        ranks[name] = {}
        for e in lists[name]:
            ranks[name].setdefault(e.id, len(ranks[name]) + 1)
    tie = {name: len(ranks[name]) + 1 for name in names}

    def key(tid: str) -> tuple[float, int, str]:
        got = [ranks[name].get(tid, tie[name]) for name in names]
        return -math.fsum(sorted(1.0 / (k0 + r) for r in got)), min(got), tid

    order = sorted(dict.fromkeys(tid for name in names for tid in ranks[name]), key=key)
    keep = set(order[:top])
    for name in names:
        keep.update(list(ranks[name])[:top])
    firsts = {name: {e.id: e for e in reversed(lists[name])} for name in names}
    out = []
    for tid in (t for t in order if t in keep):
        routes = []
        for name in names:
            hit, rank = firsts[name].get(tid), ranks[name].get(tid, tie[name])
            if hit is None:
                routes.append(Route(name=name, rank=rank, score=0.0))
            else:
                routes.append(Route(name=name, rank=rank, score=float(hit.score), view=hit.view, gate=hit.gate))
        out.append(Fused(tid, -key(tid)[0], routes))
    return out


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
        space=index.space.space,
        query=query,
        preset=cfg.name,
        scenes=scene_hits,
        items=item_hits,
        personas=list(index.personas) if cfg.enabled("PS") else [],
        topics=[(f.id, f.score) for f in surviving],
        disabled=sorted(cfg.disabled),
        descriptive_only=index.descriptive_only,
        gated=misses,
    )


_HeldTail = tuple["weakref.ref[SpaceIndex]", TurnTail]
DEFAULT_CACHE_BYTES = 2 * 2**30  # per Retriever: the built indices it keeps (vectors + an estimate of the records)
QUERY_MEMO = 64  # query vectors a Retriever keeps (Retriever.embed_query)


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
        self._tails: dict[Scope, _HeldTail] = {}  # per space: the index a tail extends, and the tail
        self._tail_lock = threading.Lock()
        self._queries: OrderedDict[str, Vector] = OrderedDict()  # recent query vectors (embed_query)
        self._queries_lock = threading.Lock()

    @property
    def builds(self) -> int:
        """How many indices this retriever has built (observability and tests)."""
        return self._cache.builds

    def fingerprint(self, space: Scope) -> tuple[tuple[str, str], ...]:
        """Cheap change detector: the space's state keys (every build stage writes its checkpoints and ``build.*`` keys
        there when it commits nodes; every edit and forget bumps ``memory.edits``) and its sessions (a re-created
        space, an import that changed a session). Sessions *added* after those of the cached index do not count:
        their turns are searched as the index's tail (:meth:`tail`), so that a new message never reloads the index."""
        hashes = [s.content_hash for s in self.store.sessions(space)]
        held = self._cache.stale(space)
        if held is not None and held.session_hashes and hashes[: len(held.session_hashes)] == held.session_hashes:
            hashes = held.session_hashes
        return (*sorted(self.store.state_keys(space).items()), ("sessions", text_hash(",".join(hashes))))

    def index(self, space: Scope) -> SpaceIndex:
        """The space's index, built on first use and updated whenever its fingerprint changed (incrementally: what
        the previous index of the space holds is kept, only new or changed entries are embedded and written)."""
        return self._cache.get(space, self.fingerprint(space), lambda: self._load(space))

    def tail(self, space: Scope, index: SpaceIndex) -> TurnTail | None:
        """The turns added to ``space`` after ``index`` was loaded (None when there are none): read from the store past
        the index's last turn, embedded through the store's cache, kept per space and extended, never re-read, while
        the index is the same (:mod:`tmem.index.tail`)."""
        last = self.store.last_turn(space)
        if last is None or last.seq <= index.max_seq:
            return None
        with self._tail_lock:
            held = self._tails.get(space)
        tail = held[1] if held is not None and held[0]() is index else TurnTail.empty(index.dim)
        after = tail.turns[-1].seq if len(tail) else index.max_seq
        if last.seq > after:
            tail = tail.extend(
                self.store.turns_after(space, after), cached_vectorizer(self.store, space, self.embedder)
            )
            with self._tail_lock:
                self._tails[space] = (weakref.ref(index), tail)
        return tail

    def _load(self, space: Scope) -> SpaceIndex:
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

    def refresh(self, space: Scope) -> bool:
        """Update the cached index of ``space`` now (incrementally), whether or not its fingerprint changed: after a
        write this process made (a build, an edit, a forget). False, doing nothing, when the space is not cached."""
        if self._cache.stale(space) is None:
            return False
        self._cache.get(space, self.fingerprint(space), lambda: self._load(space), force=True)
        return True

    def invalidate(self, space: Scope | None = None) -> None:
        """Forget the cached index of one space (or all): the next search rebuilds it from the store."""
        self._cache.invalidate(space)
        with self._tail_lock:
            if space is None:
                self._tails.clear()
            else:
                self._tails.pop(space, None)

    def embed_query(self, query: str) -> Vector:
        """The query's vector; the last ``QUERY_MEMO`` queries are kept, since one read often searches the same query
        again (a filtered context deepens its search round by round; ``ask`` and the viewer search what a context
        searched). A copy is returned: the kept vector stays as the embedder made it."""
        with self._queries_lock:
            kept = self._queries.get(query)
            if kept is not None:
                self._queries.move_to_end(query)
                return kept.copy()
        vec: Vector = self.embedder.embed([query]).vectors[0]
        with self._queries_lock:
            self._queries[query] = vec.copy()
            while len(self._queries) > QUERY_MEMO:
                self._queries.popitem(last=False)
        return vec

    def _reranker_for(self, cfg: RetrievalConfig) -> Reranker | None:
        if self.reranker is not None:
            return self.reranker
        if cfg.reranker is None:
            return None
        if cfg.reranker not in self._rerankers:
            self._rerankers[cfg.reranker] = CrossEncoderReranker(cfg.reranker)
        return self._rerankers[cfg.reranker]

    def search(self, space: Scope, query: str, config: RetrievalConfig | Asked | None = None) -> SearchResult:
        """Run the cascade for ``query`` in ``space``; the query is embedded exactly once. ``config`` (default: the
        retriever's) is resolved for the space here, once (:func:`tmem.retrieve.recipe.resolve`); an :class:`Asked`
        also names the context layout and the depth of a budgeted context."""
        index = self.index(space)
        tail = self.tail(space, index)
        recipe = resolve(
            config if isinstance(config, Asked) else Asked(config or self.config),
            descriptive_only=index.descriptive_only,
            never_built=RawTurns(index, tail, query).raw_only,
        )
        cfg = recipe.config
        # the dense lists compare meaning: the query without the speakers it names (tmem.retrieve.speakers)
        meant = query if cfg.keep_speaker_names else without_speakers(query, _speakers(index, tail))
        qvec, reranker = self.embed_query(meant), self._reranker_for(cfg)
        if not persistent_vectors(self.store):
            return run_cascade(index, query, qvec, recipe, reranker, tail)
        with self.store.transaction():  # pgvector: the search's lookups on one pooled connection and one snapshot
            return run_cascade(index, query, qvec, recipe, reranker, tail)


def _speakers(index: SpaceIndex, tail: TurnTail | None) -> frozenset[str]:
    """The speakers of the space: those of the index and of the turns added since it was loaded."""
    return index.speakers if tail is None or not tail.turns else index.speakers | {t.speaker for t in tail.turns}
