"""The turns added to a space after its index was loaded: searched at once, without reloading the index.

A :class:`tmem.index.space.SpaceIndex` is loaded from the store as a whole (records, BM25 corpora, vectors) and is
reused while the space's build state is unchanged. A message added after that (``Memory.add_messages``, an import of
new sessions) would otherwise cost a reload of the whole index at the next read: seconds on a space of 10k turns. The
tail holds those turns instead, and the cascade searches them beside the index's own turns:

- **lexical**: each tail turn gets the BM25 score it would have as one more document of the index's turn corpus
  whose statistics stay those of the corpus (document frequencies, count and average length, the Lucene formula and
  parameters bm25s uses), so its score is comparable with the index's own turns' scores: a tail turn that repeated an
  indexed one word for word would score exactly as that one does (tests/test_index_tail.py);
- **dense**: its vector, embedded through the store's cache at the first read that needs it (one text per new turn;
  ``add_messages`` itself embeds nothing), compared by cosine like the index's turn vectors.

The next build (or any change to the space's state) reloads the index, which then holds these turns itself.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tmem.embed.texts import turn_embedding_text
from tmem.index.anchor import TurnLexicon
from tmem.index.bm25 import K1, B, tokenize
from tmem.index.dense import Matrix
from tmem.index.space import turn_search_text
from tmem.index.topk import Scores
from tmem.index.views import Vectorize
from tmem.models import Turn


@dataclass(frozen=True)
class TurnTail:
    """Turns after an index's last turn, in seq order, with their token counts and vectors."""

    turns: tuple[Turn, ...]
    counts: tuple[Counter[str], ...]
    vectors: Matrix

    @classmethod
    def empty(cls, dim: int) -> TurnTail:
        return cls((), (), np.zeros((0, dim), dtype=np.float32))

    def extend(self, turns: Sequence[Turn], vectorize: Vectorize) -> TurnTail:
        """This tail with ``turns`` (later ones) appended: only they are tokenized and embedded."""
        if not turns:
            return self
        vectors = vectorize([turn_embedding_text(t) for t in turns])
        return TurnTail(
            (*self.turns, *turns),
            (*self.counts, *(Counter(tokenize(turn_search_text(t))) for t in turns)),
            np.vstack([self.vectors, vectors]).astype(np.float32, copy=False),
        )

    def __len__(self) -> int:
        return len(self.turns)

    def bm25_scores(self, query: str, corpus: TurnLexicon) -> Scores:
        """One BM25 score per tail turn, as one more document of ``corpus`` (its statistics unchanged): Lucene's
        ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times ``tf / (tf + k1 (1 - b + b dl / avgdl))``, summed over
        the query's tokens (each as often as the query holds it, as bm25s does). A corpus without tokens gives the
        tail its own statistics."""
        stats = corpus if corpus.tokens > 0 else TurnLexicon(turn_search_text(t) for t in self.turns)
        out = np.zeros(len(self.turns), dtype=np.float32)
        if stats.tokens == 0:
            return out
        avgdl = stats.tokens / stats.n
        query_tokens = tokenize(query)
        for row, counts in enumerate(self.counts):
            dl = sum(counts.values())
            norm = K1 * ((1 - B) + B * dl / avgdl)
            total = 0.0
            for token in query_tokens:
                tf = counts.get(token, 0)
                if tf:
                    df = stats.df.get(token, 0)
                    total += math.log(1 + (stats.n - df + 0.5) / (df + 0.5)) * tf / (norm + tf)
            out[row] = total
        return out

    def cosines(self, qvec: Matrix) -> Scores:
        """The query's cosine with every tail turn (vectors and query are L2-normalised)."""
        scores: Scores = (self.vectors @ qvec.astype(np.float32, copy=False)).astype(np.float32, copy=False)
        return scores
