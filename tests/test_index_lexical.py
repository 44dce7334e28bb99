"""Saved BM25 indices: a fresh process loads a space's lexical index instead of rebuilding it, scores exactly as a
rebuilt one, and never uses a save of another corpus; a damaged or unwritable cache costs a rebuild, not a failure."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
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
from tmem.scope import Scope

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
    plain = [Retriever(store, CountingEmbedder()).search(Scope.local(SPACE), q, cfg) for q in queries]
    first = Retriever(store, CountingEmbedder(), lexical=LexicalStore(tmp_path))
    assert [first.search(Scope.local(SPACE), q, cfg) for q in queries] == plain
    assert first.lexical is not None and (first.lexical.builds, first.lexical.loads) == (2, 0)  # nodes and turns
    second = Retriever(store, CountingEmbedder(), lexical=LexicalStore(tmp_path))  # a new process
    assert [second.search(Scope.local(SPACE), q, cfg) for q in queries] == plain
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


@settings(max_examples=40, deadline=None)
@given(docs=texts, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join))
def test_scores_are_bm25s_own(docs: list[str], query: str) -> None:
    """tmem scores the index's arrays itself (no bm25s at search time): the same floats as bm25s' get_scores, repeated
    query tokens included."""
    import bm25s

    from tmem.index.bm25 import K1, B, tokenize

    ids = [f"d{n}" for n in range(len(docs))]
    built = BM25Index.build(ids, docs)
    corpus = [tokenize(t) for t in docs]
    if not any(corpus):
        assert not built.has_terms and not built.scores(query).any()
        return
    model = bm25s.BM25(k1=K1, b=B)
    model.index(corpus, show_progress=False)
    tokens = built.query_tokens(query)
    expected = model.get_scores(tokens) if tokens else np.zeros(len(docs), dtype=np.float32)
    assert np.array_equal(built.scores(query), expected)


def test_a_cold_process_searches_a_saved_index_without_bm25s(tmp_path: Path) -> None:
    """Loading and scoring a saved index imports neither bm25s nor scipy (a third of a cold search's imports)."""
    docs = ["Mel went camping by the lake", "the kids paint pottery", "a new job"]
    ids = ["a", "b", "c"]
    expected = BM25Index.build(ids, docs).scores("camping pottery lake")
    LexicalStore(tmp_path / "lex").index("s/nodes", ids, docs)  # built and saved
    code = (
        "import sys, json; from tmem.index.lexical import LexicalStore; "
        f"lex = LexicalStore({str(tmp_path / 'lex')!r}); "
        f"idx = lex.index('s/nodes', {ids!r}, {docs!r}); "
        "print(json.dumps([lex.loads, idx.scores('camping pottery lake').tolist(), "
        "[m for m in ('bm25s', 'scipy') if m in sys.modules]]))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    loads, scores, imported = json.loads(done.stdout)
    assert loads == 1 and imported == []
    assert np.array_equal(np.asarray(scores, dtype=np.float32), expected)
