"""Flat turn baselines and the query-agnostic control, packed to a token budget.

* ``bm25``, ``dense``, ``hybrid`` rank every raw turn of a space (BM25 over speaker + text + caption; cosine over
  the same text the extractive build embeds, so vectors come from the store's cache; hybrid = RRF of the two lists,
  k0 = 60) and pack turns best first until the budget is spent.
* ``random-scenes`` packs the space's own scenes in a random order fixed by the question key: the same kind of
  context as tmem's, chosen without looking at the query. Any figure tmem reaches only because small sessions or
  scenes fit into leftover budget shows up here too (the LoCoMo-Plus cue session is ~41 tokens against 300-1,600).

Packing is first-fit: units are taken in order and a unit that would overflow the budget is skipped, so that the
context gets as close to the budget as the units allow. Each unit's size is counted by the same tokenizer as tmem's
context (``Settings.tokenizer``, cl100k by default): a turn as its dated line with the newline that ends it, a scene
as its block with the blank line after it, so that the units joined into one text never count more than their sum
(:mod:`tmem.util.tokens`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmem.answer.context import format_scene, format_turn
from tmem.embed.texts import turn_embedding_text
from tmem.eval.position import flat_positions
from tmem.index.bm25 import BM25Index
from tmem.index.dense import DenseTable
from tmem.index.space import turn_search_text
from tmem.models import Turn
from tmem.retrieve.fusion import rrf
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.text import text_hash
from tmem.util.tokens import TokenCounter, default_counter

Vectorize = Callable[[Sequence[str]], npt.NDArray[np.float32]]
BASELINES = ("bm25", "dense", "hybrid")
CONTROL = "random-scenes"


@dataclass(frozen=True)
class Packed:
    """A packed context: which turns it holds and its size in tokens."""

    turn_ids: list[str]
    tokens: int


def pack(units: Sequence[tuple[list[str], int]], budget: int) -> Packed:
    """First-fit packing of (turn ids, tokens) units in the given order into ``budget`` tokens."""
    ids: list[str] = []
    used = 0
    for turn_ids, tokens in units:
        if used + tokens > budget:
            continue
        ids.extend(turn_ids)
        used += tokens
    return Packed(turn_ids=ids, tokens=used)


class SpaceBaselines:
    """Every raw turn and scene of one space, ready to be ranked and packed per query."""

    def __init__(self, store: Store, space: Scope, vectorize: Vectorize, counter: TokenCounter | None = None) -> None:
        self.space = space
        self.counter = counter or default_counter()
        count = self.counter.count
        self.turns: list[Turn] = store.turns(space)
        by_id = {t.id: t for t in self.turns}
        ids = [t.id for t in self.turns]
        self._seq = {t.id: t.seq for t in self.turns}
        self._turn_tokens = {t.id: count(format_turn(t, dated=True) + "\n") for t in self.turns}
        self._bm25 = BM25Index.build(ids, [turn_search_text(t) for t in self.turns])
        self._vectorize = vectorize
        self._dense = DenseTable(ids, vectorize([turn_embedding_text(t) for t in self.turns]))
        self._scenes: list[tuple[list[str], int]] = []
        for scene in store.scenes(space):
            turns = [by_id[tid] for tid in scene.turn_ids if tid in by_id]
            self._scenes.append((list(scene.turn_ids), count(format_scene(scene.title, turns) + "\n\n")))

    def positions(self, packed: Packed, gold: Sequence[str]) -> tuple[float | None, float | None]:
        """Where ``gold`` first appears in ``packed``: in rank order and in time order (tmem.eval.position)."""
        return flat_positions(packed.turn_ids, gold, self._turn_tokens, self._seq.__getitem__)

    def rankings(self, query: str) -> dict[str, list[str]]:
        """Turn ids best first for each baseline (every turn ranked; BM25 zeros keep build order)."""
        n = len(self.turns)
        bm25 = [doc for doc, _ in self._bm25.search(query, n)]
        seen = set(bm25)
        bm25 += [t.id for t in self.turns if t.id not in seen]
        qvec = self._vectorize([query])[0]
        dense = [doc for doc, _ in self._dense.search(qvec, n)]
        hybrid = [doc for doc, _ in rrf([bm25, dense])]
        return {"bm25": bm25, "dense": dense, "hybrid": hybrid}

    def packed(self, query: str, key: str, budget: int) -> dict[str, Packed]:
        """The three turn baselines and the query-agnostic scene control at ``budget`` tokens."""
        return self.packed_many(query, key, [budget])[budget]

    def packed_many(self, query: str, key: str, budgets: Sequence[int]) -> dict[int, dict[str, Packed]]:
        """:meth:`packed` at several budgets (the query is ranked once)."""
        rankings = self.rankings(query)
        order = list(self._scenes)
        random.Random(int(text_hash(key)[:16], 16)).shuffle(order)
        out: dict[int, dict[str, Packed]] = {}
        for budget in budgets:
            out[budget] = {
                name: pack([([tid], self._turn_tokens[tid]) for tid in ranking], budget)
                for name, ranking in rankings.items()
            }
            out[budget][CONTROL] = pack(order, budget)
        return out
