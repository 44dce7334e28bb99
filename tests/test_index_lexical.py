"""Saved BM25 indices: a fresh process loads a space's lexical index instead of rebuilding it, scores exactly as a
rebuilt one, and never uses a save of another corpus; a damaged or unwritable cache costs a rebuild, not a failure."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_retrieve_fixtures import SPACE, CountingEmbedder, make_store
from tmem.index.bm25 import BM25Index
from tmem.index.lexical import LexicalStore, corpus_digest
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig

WORDS = ["dog", "cat", "pottery", "hike", "paint", "job", "the", "a", "lake", "camping", "kids", "mel"]
texts = st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join), min_size=1, max_size=30)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=texts, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join))
def test_a_loaded_index_scores_like_a_rebuilt_one(docs: list[str], query: str, tmp_path: Path) -> None:
    ids = [f"d{n}" for n in range(len(docs))]
    lexical = LexicalStore(tmp_path / "lex")
    first = lexical.index("s/nodes", ids, docs)
    again = lexical.index("s/nodes", ids, docs)
    fresh = BM25Index.build(ids, docs)
    assert np.array_equal(again.scores(query), fresh.scores(query))
    assert np.array_equal(first.scores(query), fresh.scores(query))
    assert again.query_tokens(query) == fresh.query_tokens(query)


def test_only_a_save_of_the_same_corpus_is_used(tmp_path: Path) -> None:
    lexical = LexicalStore(tmp_path)
    ids, docs = ["a", "b"], ["red apple pie", "green pear tart"]
    lexical.index("s/nodes", ids, docs)
    lexical.index("s/nodes", ids, docs)
    assert (lexical.builds, lexical.loads) == (1, 1)
    changed = ["red apple pie", "blue plum cake"]
    got = lexical.index("s/nodes", ids, changed)
    assert lexical.builds == 2 and got.search("plum", 1) == [("b", pytest.approx(got.scores("plum")[1]))]
    (slot,) = list(tmp_path.iterdir())
    assert [p.name for p in slot.iterdir()] == [corpus_digest(ids, changed)]  # the older save is gone
    assert corpus_digest(["a", "b"], ["x", "y"]) != corpus_digest(["a", "b"], ["y", "x"])
    assert corpus_digest(["ab"], ["c"]) != corpus_digest(["a"], ["bc"])


def test_a_damaged_save_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lexical = LexicalStore(tmp_path)
    ids, docs = ["a", "b"], ["red apple pie", "green pear tart"]
    lexical.index("s/nodes", ids, docs)
    (folder,) = list(next(tmp_path.iterdir()).iterdir())
    for f in folder.glob("*.npy"):
        f.write_bytes(b"not numpy")
    with caplog.at_level(logging.WARNING):
        got = lexical.index("s/nodes", ids, docs)
    assert lexical.builds == 2 and "Rebuilding the lexical index" in caplog.text
    assert got.search("pear", 1)[0][0] == "b"
    assert lexical.index("s/nodes", ids, docs).search("pear", 1)[0][0] == "b" and lexical.loads == 1


def test_an_unwritable_cache_costs_a_rebuild_not_a_failure(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    lexical = LexicalStore(blocker / "lex")
    with caplog.at_level(logging.WARNING):
        got = lexical.index("s/nodes", ["a"], ["red apple"])
    assert got.search("apple", 1)[0][0] == "a" and "Could not save the lexical index" in caplog.text


def test_a_fresh_retriever_loads_the_saved_indices_and_answers_alike(tmp_path: Path) -> None:
    store = make_store()
    cfg = RetrievalConfig.preset("paper").replace(gate=None)
    queries = ["Gina clothing store", "dance studio", "pet fish named Bubbles"]
    plain = [Retriever(store, CountingEmbedder()).search(SPACE, q, cfg) for q in queries]
    first = Retriever(store, CountingEmbedder(), lexical=LexicalStore(tmp_path))
    assert [first.search(SPACE, q, cfg) for q in queries] == plain
    assert first.lexical is not None and (first.lexical.builds, first.lexical.loads) == (2, 0)  # nodes and turns
    second = Retriever(store, CountingEmbedder(), lexical=LexicalStore(tmp_path))  # a new process
    assert [second.search(SPACE, q, cfg) for q in queries] == plain
    assert second.lexical is not None and (second.lexical.builds, second.lexical.loads) == (0, 2)
    store.close()


def test_forget_and_delete_remove_the_saved_indices(tmp_path: Path) -> None:
    """A save holds the vocabulary of its texts: a forget replaces the space's saves, a delete removes them."""
    from tmem.core import MemoryCore
    from tmem.settings import Settings

    store = make_store()
    core = MemoryCore(
        store, Settings(home=tmp_path / "home", lexical_dir=tmp_path / "lex"), embedder=CountingEmbedder()
    )
    core.search(SPACE, "Gina clothing store")
    before = {p.relative_to(tmp_path) for p in (tmp_path / "lex").glob("*/*")}
    assert len(before) == 2  # the node and the turn corpus
    core.forget(SPACE, item_ids=["i1"])
    after = {p.relative_to(tmp_path) for p in (tmp_path / "lex").glob("*/*")}
    # the node corpus was saved again without the forgotten item and its older save is gone; the turns are unchanged
    assert len(after) == 2 and len(before - after) == 1 and len(after - before) == 1
    core.delete_space(SPACE)
    assert not list((tmp_path / "lex").glob("*/*"))
    store.close()
