"""A BM25 index over arbitrary (id, text) documents, built on bm25s.

Tokenisation is deliberately simple and language-light: lower case, runs of word characters, English stop words
removed (bm25s' list). No stemmer is required (PyStemmer is optional in bm25s and not a tmem dependency).

bm25s builds and saves the index; searching needs none of it. A saved index is read back as its three arrays (the
per-token BM25 scores of each document, compressed sparse columns) and scored here in numpy, so a cold search (``tmem
search`` in a fresh process) never imports bm25s and the scipy it pulls in (130 ms of a cold search's 720 ms of imports
on an idle machine, `python -X importtime`). Scores equal bm25s' ``get_scores`` exactly (tests/test_index_lexical.py): both add
each query token's column in query order in float32.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tmem.errors import InputError
from tmem.index.topk import Mask, Scores, top_k

if TYPE_CHECKING:
    import bm25s

_TOKEN = re.compile(r"\w+")
K1, B = 1.5, 0.75  # bm25s' defaults, named here because tmem.index.tail scores turns outside the corpus by them too
TOKENIZER_VERSION = 1  # bump when tokenize() changes: saved indices (tmem.index.lexical) are keyed by it


_PARAMS = "params.index.json"
_VOCAB = "vocab.index.json"
_ARRAYS = ("data", "indices", "indptr")  # saved as <name>.csc.index.npy


@cache
def bm25s_version() -> str:
    """The installed bm25s version, read from its metadata (importing bm25s costs scipy)."""
    return metadata.version("bm25s")


@cache
def _stopwords() -> frozenset[str]:
    """bm25s' English stop words, read from its ``stopwords`` module file without running ``bm25s/__init__``."""
    spec = importlib.util.find_spec("bm25s")
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / "stopwords.py" if folders else None
    if path is not None and path.is_file():
        words_spec = importlib.util.spec_from_file_location("tmem_bm25s_stopwords", path)
        if words_spec is not None and words_spec.loader is not None:
            module = importlib.util.module_from_spec(words_spec)
            words_spec.loader.exec_module(module)
            return frozenset(module.STOPWORDS_EN)
    from bm25s.stopwords import STOPWORDS_EN  # a bm25s laid out otherwise: the plain import

    return frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stop words."""
    stop = _stopwords()
    return [t for t in _TOKEN.findall(text.lower()) if t not in stop]


@dataclass(frozen=True)
class _Columns:
    """The index as bm25s computes it: ``data[indptr[t]:indptr[t + 1]]`` are token ``t``'s BM25 scores in the
    documents ``indices[indptr[t]:indptr[t + 1]]``; ``vocab`` maps a token to its column."""

    data: npt.NDArray[np.float32]
    indices: npt.NDArray[np.integer[Any]]
    indptr: npt.NDArray[np.integer[Any]]
    vocab: dict[str, int]

    def scores(self, tokens: Sequence[str], n_docs: int) -> Scores:
        out = np.zeros(n_docs, dtype=np.float32)
        for token in tokens:  # in query order, a repeated token again: bm25s' sum, in its order
            t = self.vocab[token]
            start, end = int(self.indptr[t]), int(self.indptr[t + 1])
            np.add.at(out, self.indices[start:end], self.data[start:end])
        return out


class BM25Index:
    """Okapi BM25 (bm25s' Lucene variant, k1=1.5, b=0.75) over a fixed corpus.

    Build once with :meth:`build`; :meth:`scores` gives one score per document (0 where no query token occurs),
    :meth:`search` the best documents with a positive score.
    """

    def __init__(self, ids: list[str], columns: _Columns | None, model: bm25s.BM25 | None = None) -> None:
        self._ids = ids
        self._columns = columns
        self._model = model  # kept after a build, for save(); None for a loaded index
        self._vocab = frozenset(t for t in columns.vocab if t != "") if columns is not None else frozenset()

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str]) -> BM25Index:
        if len(ids) != len(texts):
            raise InputError(f"BM25Index.build got {len(ids)} ids but {len(texts)} texts; pass one text per id.")
        if len(set(ids)) != len(ids):
            raise InputError("BM25Index.build got duplicate ids; every document needs a distinct id.")
        if not ids:
            return cls([], None)
        import bm25s

        corpus = [tokenize(t) for t in texts]
        if not any(corpus):  # only stop words (or nothing): no token can ever score (bm25s would divide by zero)
            return cls(list(ids), None)
        model = bm25s.BM25(k1=K1, b=B)
        model.index(corpus, show_progress=False)
        arrays = model.scores
        columns = _Columns(
            np.asarray(arrays["data"], dtype=np.float32),
            np.asarray(arrays["indices"]),
            np.asarray(arrays["indptr"]),
            {str(tok): int(col) for tok, col in model.vocab_dict.items()},
        )
        return cls(list(ids), columns, model)

    def save(self, folder: Path) -> None:
        """Write the index (bm25s' arrays, vocabulary and parameters; not the ids) into an existing ``folder``."""
        if self._model is None:
            raise InputError("Only a BM25Index just built can be saved (an empty or a loaded one has nothing new).")
        self._model.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path, ids: Sequence[str]) -> BM25Index:
        """The index saved in ``folder`` by :meth:`save`, over ``ids`` (in build order), its arrays memory-mapped.
        Read without bm25s; a save of other parameters is a ValueError (the lexical store then rebuilds)."""
        params = json.loads((folder / _PARAMS).read_text(encoding="utf-8"))
        wanted = {"k1": K1, "b": B, "method": "lucene", "dtype": "float32"}
        if any(params.get(key) != value for key, value in wanted.items()):
            raise ValueError(f"the saved BM25 index has parameters {params}, not {wanted}")
        n_docs = int(params["num_docs"])
        if n_docs != len(ids):
            raise ValueError(f"the saved BM25 index holds {n_docs} documents, not {len(ids)}")
        data, indices, indptr = (np.load(folder / f"{name}.csc.index.npy", mmap_mode="r") for name in _ARRAYS)
        vocab = {str(k): int(v) for k, v in json.loads((folder / _VOCAB).read_text(encoding="utf-8")).items()}
        columns = max((v for k, v in vocab.items() if k != ""), default=-1) + 1  # bm25s' "" token has no column
        if len(indptr) < columns + 1 or len(data) != len(indices) or data.dtype != np.float32:
            raise ValueError(f"the saved BM25 arrays do not match its vocabulary of {len(vocab)} tokens")
        return cls(list(ids), _Columns(data, indices, indptr, vocab))

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def has_terms(self) -> bool:
        """False when no document holds a searchable token (every score is zero)."""
        return self._columns is not None

    @property
    def ids(self) -> list[str]:
        return self._ids

    def query_tokens(self, query: str) -> list[str]:
        """The query's tokens that occur in the corpus (the only ones that can score)."""
        return [t for t in tokenize(query) if t in self._vocab]

    def scores(self, query: str) -> Scores:
        """One BM25 score per document, in build order; all zeros when no query token is in the corpus."""
        tokens = self.query_tokens(query)
        if self._columns is None or not tokens:
            return np.zeros(len(self._ids), dtype=np.float32)
        return self._columns.scores(tokens, len(self._ids))

    def search(self, query: str, k: int, mask: Mask | None = None) -> list[tuple[str, float]]:
        """The ``k`` best documents with a positive score (inside ``mask`` when given), best first."""
        scores = self.scores(query)
        rows = top_k(scores, k, mask, positive_only=True)
        return [(self._ids[r], float(scores[r])) for r in rows]
