"""BM25Index and DenseTable: hand-checked rankings, empty inputs, masks and stable ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmem.errors import InputError
from tmem.index import BM25Index, DenseTable, tokenize
from tmem.index.topk import top_k


def test_tokenize_drops_stopwords_and_case() -> None:
    assert tokenize("The Cat sat on THE mat!") == ["cat", "sat", "mat"]


def test_bm25_ranks_matching_documents() -> None:
    idx = BM25Index.build(
        ["a", "b", "c"],
        ["Caroline went to a support group", "Melanie painted a sunrise", "support for the painting class"],
    )
    hits = idx.search("support group", 5)
    assert [h[0] for h in hits] == ["a", "c"]
    assert hits[0][1] > hits[1][1] > 0


def test_bm25_matches_reference_formula() -> None:
    # Lucene BM25 by hand for a 2-document corpus; bm25s must agree.
    docs = [["apple", "banana"], ["apple", "apple", "cherry"]]
    idx = BM25Index.build(["x", "y"], [" ".join(d) for d in docs])
    k1, b = 1.5, 0.75
    avgdl = sum(len(d) for d in docs) / len(docs)
    n = len(docs)

    def score(doc: list[str], term: str) -> float:
        df = sum(term in d for d in docs)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = doc.count(term)
        return idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))

    got = idx.scores("apple cherry")
    for row, doc in enumerate(docs):
        assert math.isclose(float(got[row]), score(doc, "apple") + score(doc, "cherry"), rel_tol=1e-5)


def test_bm25_empty_corpus_and_unknown_query() -> None:
    empty = BM25Index.build([], [])
    assert len(empty) == 0
    assert empty.search("anything", 3) == []
    idx = BM25Index.build(["a"], ["hello world"])
    assert idx.search("zebra quokka", 3) == []
    assert idx.search("the of and", 3) == []  # stop words only
    assert idx.search("", 3) == []
    assert idx.scores("zebra").tolist() == [0.0]


def test_bm25_mask_and_errors() -> None:
    idx = BM25Index.build(["a", "b"], ["red apple", "red cherry"])
    assert [h[0] for h in idx.search("red", 5, mask=np.array([False, True]))] == ["b"]
    with pytest.raises(InputError):
        BM25Index.build(["a", "a"], ["x", "y"])
    with pytest.raises(InputError):
        BM25Index.build(["a"], ["x", "y"])


def test_dense_search_cosine_order_mask_and_normalisation() -> None:
    m = np.array([[1.0, 0.0], [3.0, 4.0], [0.0, 2.0]], dtype=np.float32)  # rows get normalised
    table = DenseTable(["x", "y", "z"], m)
    q = np.array([0.0, 1.0], dtype=np.float32)
    hits = table.search(q, 2)
    assert [h[0] for h in hits] == ["z", "y"]
    assert math.isclose(hits[1][1], 0.8, rel_tol=1e-6)
    assert [h[0] for h in table.search(q, 5, mask=np.array([True, True, False]))] == ["y", "x"]
    assert DenseTable.empty(2).search(q, 3) == []


def test_dense_rejects_bad_input() -> None:
    with pytest.raises(InputError):
        DenseTable(["a"], np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(InputError):
        DenseTable(["a", "b"], np.ones((1, 3), dtype=np.float32))
    with pytest.raises(InputError, match="dimension"):
        DenseTable(["a"], np.ones((1, 3), dtype=np.float32)).search(np.ones(4, dtype=np.float32), 1)


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, math.nan]), min_size=0, max_size=30),
    st.integers(min_value=0, max_value=35),
)
def test_top_k_is_stable_and_drops_nan(values: list[float], k: int) -> None:
    scores = np.array(values, dtype=np.float32)
    rows = top_k(scores, k).tolist()
    expected = sorted((i for i, v in enumerate(values) if not math.isnan(v)), key=lambda i: (-values[i], i))[:k]
    assert rows == expected
