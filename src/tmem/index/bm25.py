"""A BM25 index over arbitrary (id, text) documents, built on bm25s.

Tokenisation is deliberately simple and language-light: lower case, runs of word characters, English stop words
removed (bm25s' list). No stemmer is required (PyStemmer is optional in bm25s and not a tmem dependency).

bm25s (and the scipy it pulls in) is imported on first use, not with this module, so that ``import tmem`` and every
CLI command that never searches stay fast.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tmem.errors import InputError
from tmem.index.topk import Mask, Scores, top_k

if TYPE_CHECKING:
    import bm25s

_TOKEN = re.compile(r"\w+")
K1, B = 1.5, 0.75  # bm25s' defaults, named here because tmem.index.tail scores turns outside the corpus by them too
TOKENIZER_VERSION = 1  # bump when tokenize() changes: saved indices (tmem.index.lexical) are keyed by it


@cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stop words."""
    stop = _stopwords()
    return [t for t in _TOKEN.findall(text.lower()) if t not in stop]


class BM25Index:
    """Okapi BM25 (bm25s' Lucene variant, k1=1.5, b=0.75) over a fixed corpus.

    Build once with :meth:`build`; :meth:`scores` gives one score per document (0 where no query token occurs),
    :meth:`search` the best documents with a positive score.
    """

    def __init__(self, ids: list[str], model: bm25s.BM25 | None, vocab: frozenset[str]) -> None:
        self._ids = ids
        self._model = model
        self._vocab = vocab

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str]) -> BM25Index:
        if len(ids) != len(texts):
            raise InputError(f"BM25Index.build got {len(ids)} ids but {len(texts)} texts; pass one text per id.")
        if len(set(ids)) != len(ids):
            raise InputError("BM25Index.build got duplicate ids; every document needs a distinct id.")
        if not ids:
            return cls([], None, frozenset())
        import bm25s

        corpus = [tokenize(t) for t in texts]
        if not any(corpus):  # only stop words (or nothing): no token can ever score (bm25s would divide by zero)
            return cls(list(ids), None, frozenset())
        model = bm25s.BM25(k1=K1, b=B)
        model.index(corpus, show_progress=False)
        vocab = frozenset(str(tok) for tok in model.vocab_dict if tok != "")
        return cls(list(ids), model, vocab)

    def save(self, folder: Path) -> None:
        """Write the index (bm25s' arrays, vocabulary and parameters; not the ids) into an existing ``folder``."""
        if self._model is None:
            raise InputError("An empty BM25Index has nothing to save.")
        self._model.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path, ids: Sequence[str]) -> BM25Index:
        """The index saved in ``folder`` by :meth:`save`, over ``ids`` (in build order), its arrays memory-mapped."""
        import bm25s

        model = bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
        n_docs = int(model.scores["num_docs"])
        if n_docs != len(ids):
            raise ValueError(f"the saved BM25 index holds {n_docs} documents, not {len(ids)}")
        vocab = frozenset(str(tok) for tok in model.vocab_dict if tok != "")
        return cls(list(ids), model, vocab)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def has_terms(self) -> bool:
        """False when no document holds a searchable token (every score is zero)."""
        return self._model is not None

    @property
    def ids(self) -> list[str]:
        return self._ids

    def query_tokens(self, query: str) -> list[str]:
        """The query's tokens that occur in the corpus (the only ones that can score)."""
        return [t for t in tokenize(query) if t in self._vocab]

    def scores(self, query: str) -> Scores:
        """One BM25 score per document, in build order; all zeros when no query token is in the corpus."""
        tokens = self.query_tokens(query)
        if self._model is None or not tokens:
            return np.zeros(len(self._ids), dtype=np.float32)
        return np.asarray(self._model.get_scores(tokens), dtype=np.float32)

    def search(self, query: str, k: int, mask: Mask | None = None) -> list[tuple[str, float]]:
        """The ``k`` best documents with a positive score (inside ``mask`` when given), best first."""
        scores = self.scores(query)
        rows = top_k(scores, k, mask, positive_only=True)
        return [(self._ids[r], float(scores[r])) for r in rows]
