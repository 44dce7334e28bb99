"""Turns added after an index was loaded (tmem.index.tail): searched at once without reloading the index, scored as
documents of the index's own corpus."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem import Memory, MessageInput, Settings
from tmem.embed import HashEmbedder
from tmem.index.anchor import TurnLexicon
from tmem.index.bm25 import BM25Index
from tmem.index.space import turn_search_text
from tmem.index.tail import TurnTail
from tmem.models import Turn
from tmem.store import open_store

T0 = datetime(2024, 3, 1, 9, 0)
WORDS = ["lyon", "cat", "pixel", "cello", "sister", "bakery", "brioche", "moved", "job", "the", "a", "garden", "rain"]


def _turn(n: int, text: str, speaker: str = "ann") -> Turn:
    return Turn(id=f"t{n}", session_id="s", seq=n, speaker=speaker, text=text, time=T0)


def _vectorize(texts: list[str]) -> np.ndarray:
    return HashEmbedder(16).embed(texts).vectors


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
)
def test_a_tail_turn_scores_as_the_same_text_does_inside_the_corpus(docs: list[list[str]], query: list[str]) -> None:
    """The tail's BM25 is bm25s' Lucene BM25 with the corpus's statistics: a tail turn repeating a corpus turn word
    for word gets that turn's score, for any corpus and query."""
    turns = [_turn(n, " ".join(words)) for n, words in enumerate(docs)]
    texts = [turn_search_text(t) for t in turns]
    corpus = BM25Index.build([t.id for t in turns], texts)
    tail = TurnTail.empty(16).extend([t.model_copy(update={"id": f"copy{t.id}"}) for t in turns], _vectorize)
    q = " ".join(query)
    np.testing.assert_allclose(tail.bm25_scores(q, TurnLexicon(texts)), corpus.scores(q), rtol=1e-5, atol=1e-6)


def test_a_word_the_corpus_lacks_scores_in_the_tail() -> None:
    tail = TurnTail.empty(16).extend([_turn(9, "I moved to Lyon")], _vectorize)
    scores = tail.bm25_scores("Lyon", TurnLexicon(["ann: the weather is nice", "bo: a garden"]))
    assert scores[0] > 0
    own = tail.bm25_scores("Lyon", TurnLexicon([]))  # an empty corpus: the tail's own statistics
    assert own[0] > 0


def _mem(path: Path) -> Memory:
    config = Settings(home=path, llm="none", session_gap_minutes=30)
    return Memory(open_store(path / "tmem.db"), config, embedder=HashEmbedder())


def test_new_messages_are_searched_without_reloading_the_index(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        chatter = [
            MessageInput(speaker="bot", text=f"the weather today is grey {k}", time=T0 + timedelta(minutes=k))
            for k in range(8)
        ]
        mem.add_messages("u", chatter)
        mem.build("u")
        mem.context("u", "weather", max_tokens=100)
        loads = mem.retriever.builds
        for k, text in enumerate(["I moved to Lyon", "We adopted a cat called Pixel", "My sister plays cello"]):
            when = T0 + timedelta(minutes=20 + k)
            mem.add_messages("u", [MessageInput(speaker="ann", text=text, time=when)])
            ctx = mem.context("u", text, max_tokens=100)
            assert text in ctx.text and ctx.unbuilt_turns == k + 1
        late = MessageInput(speaker="ann", text="Back from the bakery with brioche", time=T0 + timedelta(hours=5))
        assert mem.add_messages("u", [late]).sessions_created  # a new session: still no reload
        assert "brioche" in mem.context("u", "bakery brioche", max_tokens=100).text
        assert mem.retriever.builds == loads
        hit = mem.search("u", "Lyon").turns[0]
        assert hit.turn.text == "I moved to Lyon" and hit.scene_id is None
        mem.build("u")  # the build reloads the index, which now holds these turns in scenes
        after = mem.context("u", "bakery brioche", max_tokens=100)
        assert after.unbuilt_turns == 0 and after.text.count("brioche") == 1
        assert mem.retriever.builds > loads


def test_a_forgotten_tail_turn_is_gone_from_the_next_read(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        mem.add_messages("u", [MessageInput(speaker="bot", text="hello there", time=T0)])
        mem.context("u", "hello", max_tokens=50)
        added = mem.add_messages("u", [MessageInput(speaker="ann", text="my PIN is 4321", time=T0)]).added
        assert "4321" in mem.context("u", "PIN", max_tokens=50).text
        mem.forget("u", turn_ids=added)
        assert "4321" not in mem.context("u", "PIN", max_tokens=50).text
        assert not [t for t in mem.search("u", "PIN").turns if t.turn.id in added]
