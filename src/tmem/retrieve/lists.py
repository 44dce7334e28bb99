"""Ranked lists over a space's nodes and raw turns, as the cascade fuses them: the vector index's nearest entries of
a part, BM25 rows as ranked entries, trigger views grouped by host, :class:`RawTurns`, every raw turn of a search
(the index's, then the tail's: :mod:`tmem.index.tail`) with which of them no scene holds yet (the unbuilt-turn route,
docs/retrieval.md), and :class:`StageLists`, which builds a stage's lists from the route table
(:mod:`tmem.retrieve.routes`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from tmem.index.backend import view_part
from tmem.index.space import NodeType, SpaceIndex
from tmem.index.tail import TurnTail
from tmem.index.topk import Mask, Scores, top_k
from tmem.models import ITEM_FAMILIES, TriggerFamily, Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.fusion import Ranked, fuse, split_gate
from tmem.retrieve.routes import Candidates, RouteSpec, Source, Stage, stage_routes
from tmem.retrieve.types import GateMiss

Vector = npt.NDArray[np.float32]
# A space never built: how many times as many turns as it keeps each unbuilt-turn list ranks (docs/retrieval.md). A
# turn past that depth ties at the rank after it: at k0 60 it weighs under 1/(60 + 20 x kept) in the fusion, and
# ranking every turn of a large space costs a sort and a Python object per turn on every read.
RAW_RANK_DEPTH = 20


def ranked(ids: Sequence[str], scores: Scores, rows: npt.NDArray[np.intp]) -> list[Ranked]:
    return [Ranked(ids[r], float(scores[r])) for r in rows]


def nearest(
    index: SpaceIndex, part: str, qvec: Vector, k: int, allowed: Mask | None = None, ids: Sequence[str] = ()
) -> list[Ranked]:
    """The ``k`` entries of a node part nearest the query, through the vector index (only the rows of ``ids`` set in
    ``allowed`` when given)."""
    only = None if allowed is None else [ids[r] for r in np.flatnonzero(allowed).tolist()]
    known = index.held.get(part, (frozenset(), frozenset()))[0]
    hits = index.vectors.top_k(part, qvec, k, only)
    if any(h.id not in known for h in hits):
        # a shared vector host already holds a newer build's entries: ask again among this index's own (issue 33)
        hits = index.vectors.top_k(part, qvec, k, only if only is not None else sorted(known))
    return [Ranked(h.id, h.score) for h in hits if h.id in known]


class RawTurns:
    """Every raw turn of a search: the index's, then the tail's (turns added since the index was loaded), with their
    BM25 scores for the query (the tail's as documents of the index's corpus) and which of them no scene holds."""

    def __init__(self, index: SpaceIndex, tail: TurnTail | None, query: str) -> None:
        self.index = index
        self.tail = tail if tail is not None and len(tail) else None
        extra = list(self.tail.turns) if self.tail is not None else []
        self.list = index.turn_list + extra if extra else index.turn_list
        self.ids = index.turn_ids + [t.id for t in extra] if extra else index.turn_ids
        self._extra = {t.id: t for t in extra}
        self.unbuilt: Mask = np.concatenate([index.unbuilt, np.ones(len(extra), dtype=np.bool_)])
        self._query = query
        self._scores: Scores | None = None

    @property
    def raw_only(self) -> bool:
        """No scene holds any of these turns: a space never built (its hits can only be raw turns)."""
        return bool(self.list) and bool(self.unbuilt.all())

    def turn(self, turn_id: str) -> Turn:
        found = self.index.turns.get(turn_id)
        return found if found is not None else self._extra[turn_id]

    @property
    def scores(self) -> Scores:
        """BM25 scores, one per turn of :attr:`list` (computed once)."""
        if self._scores is None:
            own = self.index.turn_bm25.scores(self._query)
            if self.tail is not None:
                own = np.concatenate([own, self.tail.bm25_scores(self._query, self.index.turn_lexicon)])
            self._scores = own
        return self._scores

    def bm25(self, k: int, allowed: Mask | None = None) -> list[Ranked]:
        return ranked(self.ids, self.scores, top_k(self.scores, k, allowed, positive_only=True))

    def dense(self, qvec: Vector, k: int, allowed: Mask | None = None) -> list[Ranked]:
        """The ``k`` turns nearest the query (among ``allowed``): the index's through its vector backend, the tail's by
        their cosines, merged by score (the index's first on a tie)."""
        n = len(self.index.turn_list)
        if allowed is None or bool(allowed[:n].all()):
            found = nearest(self.index, "turn", qvec, k)
        elif allowed[:n].any():
            found = nearest(self.index, "turn", qvec, k, allowed[:n], self.index.turn_ids)
        else:
            found = []
        if self.tail is None:
            return found
        cos = self.tail.cosines(qvec)
        rows = top_k(cos, k, None if allowed is None else allowed[n:])
        merged = found + [Ranked(self.tail.turns[int(r)].id, float(cos[r])) for r in rows]
        order = sorted(range(len(merged)), key=lambda m: (-merged[m].score, m))
        return [merged[m] for m in order[:k]]


def _trigger_route(
    index: SpaceIndex, spec: RouteSpec, cfg: RetrievalConfig, qvec: Vector, misses: list[GateMiss]
) -> list[Ranked]:
    """Hosts reached through the views of the route's families: host score = max over all those views. Those of the
    top list under the route's gate are dropped and recorded in ``misses``."""
    families, top = spec.families_for(cfg), spec.top(cfg)
    if top <= 0 or not families:
        return []
    out: list[Ranked] = []
    parts = [view_part(f.value) for f in families]
    known = frozenset().union(*(index.held.get(p, (frozenset(), frozenset()))[1] for p in parts))
    hits = index.vectors.top_hosts(parts, qvec, top)
    if any(h.host not in known for h in hits):
        # a shared vector host already holds a newer build's views: ask again among this index's hosts (issue 33)
        hits = index.vectors.top_hosts(parts, qvec, top, sorted(known))
    for hit in (h for h in hits if h.host in known):
        winner = TriggerFamily(hit.part.removeprefix("views."))
        # the item route unites Entity and Bridge views: its view label names the family that gave the max
        label = f"{winner.value}:{hit.view}" if winner in ITEM_FAMILIES else hit.view
        out.append(Ranked(hit.host, hit.score, label))
    kept, fell = split_gate(out, spec.gate_for(cfg))
    host_kind: Literal["item", "scene"] = "item" if spec.unit is Stage.ITEM else "scene"
    rank = {e.id: n for n, e in enumerate(out, start=1)}
    misses.extend(
        GateMiss(
            route=spec.name, host_kind=host_kind, host_id=e.id, rank=rank[e.id], score=e.score, view=e.view, gate=g
        )
        for e in fell
        if (g := e.gate) is not None
    )
    return kept


def _scenes_via_items(
    index: SpaceIndex, i_bm: Scores, qvec: Vector, admitted: Mask, cfg: RetrievalConfig, top: int
) -> list[Ranked]:
    """Scenes ranked by their best item: BM25 + dense over every item, fused, each item voting for its source
    scenes in rank order (the view names the item that reached the scene). Admitted scenes only: this is a
    descriptive route, so the topic prefilter applies."""
    i_ids = index.ids["item"]
    items = fuse(
        {
            "bm25": ranked(i_ids, i_bm, top_k(i_bm, cfg.depth, positive_only=True)),
            "dense": nearest(index, "item", qvec, cfg.depth),
        },
        cfg.k0,
    )
    out: dict[str, Ranked] = {}
    for f in items:
        for sid in index.items[index.item_pos[f.id]].scene_ids:
            pos = index.scene_pos.get(sid)
            if pos is not None and admitted[pos] and sid not in out:
                out[sid] = Ranked(sid, f.score, view=f.id)
        if len(out) >= top:
            break
    return list(out.values())


_NODES: dict[Stage, NodeType] = {Stage.TOPIC: "topic", Stage.SCENE: "scene", Stage.ITEM: "item"}


@dataclass
class StageLists:
    """The ranked lists of one search, stage by stage, as the route table says: each active route of a stage
    (:func:`tmem.retrieve.routes.stage_routes`) gives one list, ranked by its source over its scope. Stage 2 reads
    ``admitted`` (set by the topic prefilter when it ran), Stage 3 ``pool`` (the items of the kept scenes)."""

    index: SpaceIndex
    query: str
    qvec: Vector
    cfg: RetrievalConfig
    turns: RawTurns
    misses: list[GateMiss] = field(default_factory=list)  # trigger-route candidates that fell under a gate
    admitted: Mask | None = None  # scenes admitted by the topic prefilter (None: it did not run, every scene is)
    pool: Mask | None = None  # items of the kept scenes
    _bm25: dict[Stage, Scores] = field(default_factory=dict)
    _bm25_all: Scores | None = None

    def bm25(self, stage: Stage) -> Scores:
        """BM25 scores of every node of ``stage`` (computed once per search)."""
        if stage not in self._bm25:
            if self._bm25_all is None:
                self._bm25_all = self.index.bm25.scores(self.query)
            self._bm25[stage] = self.index.bm25_scores(_NODES[stage], self.query, self._bm25_all)
        return self._bm25[stage]

    def lists(self, stage: Stage) -> dict[str, list[Ranked]]:
        """Every active route of ``stage`` with its list (a route over an empty scope of raw turns gives none), keyed
        by its :class:`RouteName`."""
        out: dict[str, list[Ranked]] = {}
        for spec in stage_routes(stage, self.cfg):
            entries = self._turn_list(spec) if spec.stage is Stage.TURN else self._node_list(spec)
            if entries is not None:
                out[spec.name] = entries
        return out

    def _mask(self, candidates: Candidates) -> Mask | None:
        if candidates is Candidates.ADMITTED:
            return self.admitted
        if candidates is Candidates.POOL:
            return self.pool
        return None

    def _node_list(self, spec: RouteSpec) -> list[Ranked]:
        index, k = self.index, spec.top(self.cfg)
        if spec.source is Source.TRIGGER:
            return _trigger_route(index, spec, self.cfg, self.qvec, self.misses)
        mask = self._mask(spec.candidates)
        if spec.source is Source.ITEMS:
            admitted = mask if mask is not None else np.ones(len(index.scenes), dtype=np.bool_)
            return _scenes_via_items(index, self.bm25(Stage.ITEM), self.qvec, admitted, self.cfg, k)
        if spec.candidates is Candidates.POOL and mask is not None:
            k = max(k, int(mask.sum()))  # every item of the kept scenes is ranked
        part = _NODES[spec.unit]
        ids = index.ids[part]
        if spec.source is Source.BM25:
            scores = self.bm25(spec.stage)
            return ranked(ids, scores, top_k(scores, k, mask, positive_only=True))
        return nearest(index, part, self.qvec, k, mask, ids)

    def _turn_list(self, spec: RouteSpec) -> list[Ranked] | None:
        turns, k = self.turns, spec.top(self.cfg)
        mask = turns.unbuilt if spec.candidates is Candidates.UNBUILT else None
        if not turns.list or (mask is not None and not mask.any()):
            return None
        if turns.raw_only and self.cfg.unbuilt_top:
            # A space never built: the unbuilt route ranks RAW_RANK_DEPTH times as many turns as it keeps (ranks deep
            # enough to fuse as flat hybrid fuses whole lists; the cascade keeps the best of the fusion and of each
            # list), and the turn route, which would rank the same turns again, gives no list of its own.
            if spec.candidates is not Candidates.UNBUILT:
                return None
            k, mask = min(len(turns.list), k * RAW_RANK_DEPTH), None
        return turns.bm25(k, mask) if spec.source is Source.BM25 else turns.dense(self.qvec, k, mask)
