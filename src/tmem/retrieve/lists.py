"""Ranked lists over a space's nodes and raw turns, as the cascade fuses them: the vector index's nearest entries of
a part, BM25 rows as ranked entries, and :class:`RawTurns`, every raw turn of a search (the index's, then the tail's:
:mod:`tmem.index.tail`) with which of them no scene holds yet (the unbuilt-turn route, docs/retrieval.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tmem.index.space import SpaceIndex
from tmem.index.tail import TurnTail
from tmem.index.topk import Mask, Scores, top_k
from tmem.models import Turn
from tmem.retrieve.fusion import Ranked

Vector = npt.NDArray[np.float32]


def ranked(ids: Sequence[str], scores: Scores, rows: npt.NDArray[np.intp]) -> list[Ranked]:
    return [Ranked(ids[r], float(scores[r])) for r in rows]


def nearest(
    index: SpaceIndex, part: str, qvec: Vector, k: int, allowed: Mask | None = None, ids: Sequence[str] = ()
) -> list[Ranked]:
    """The ``k`` entries of a node part nearest the query, through the vector index (only the rows of ``ids`` set in
    ``allowed`` when given)."""
    only = None if allowed is None else [ids[r] for r in np.flatnonzero(allowed).tolist()]
    return [Ranked(h.id, h.score) for h in index.vectors.top_k(part, qvec, k, only)]


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
