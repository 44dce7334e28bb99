"""A query's speaker names say whom it asks about; it is embedded without them (tmem.retrieve.speakers)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_retrieve_fixtures import CountingEmbedder
from tmem.answer.budget import recall_context
from tmem.construct.extractive import build_extractive
from tmem.ingest import import_file
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.speakers import without_speakers
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

UPDATES = Path(__file__).resolve().parents[1] / "bench" / "data" / "updates.json"
NAMES = ["Dana", "Sam"]


@pytest.mark.parametrize(
    ("query", "embedded"),
    [
        ("Where does Dana work?", "Where does work?"),
        ("What is Dana's favourite band?", "What is favourite band?"),
        ("What is Dana’s favourite band?", "What is favourite band?"),  # a typographic apostrophe
        ("where does dana live", "where does live"),  # any case
        ("What did Sam suggest to Dana?", "What did suggest to?"),
        ("What about Danaher shares?", "What about Danaher shares?"),  # a name inside a word is no name
        ("Who is Dana?", "Who is Dana?"),  # only question words would remain: the name is what is asked
        ("Tell me about Dana", "Tell me about Dana"),
        ("Where is the Acme depot?", "Where is the Acme depot?"),  # names no speaker
    ],
)
def test_speaker_names_are_taken_out_of_what_is_embedded(query: str, embedded: str) -> None:
    assert without_speakers(query, NAMES) == embedded


def test_a_multi_word_name_goes_whole_or_by_its_words() -> None:
    names = ["Dana Smith", "Dr. O'Brien"]
    assert without_speakers("What did Dana Smith buy?", names) == "What did buy?"
    assert without_speakers("What did Dana buy?", names) == "What did buy?"
    assert without_speakers("Where did Dr. O'Brien's sister move?", names) == "Where did sister move?"
    assert without_speakers("What did Dana buy?", []) == "What did Dana buy?"


@given(st.text(max_size=60), st.lists(st.text(min_size=1, max_size=12), max_size=4))
def test_no_speaker_name_is_left_as_a_word_unless_nothing_else_would_remain(query: str, names: list[str]) -> None:
    ranked = without_speakers(query, names)
    if ranked == query:
        return
    for name in names:
        if re.search(r"\w", name):
            assert not re.search(rf"(?<!\w){re.escape(name.strip())}(?!\w)", ranked, re.IGNORECASE), (name, ranked)
    assert ranked == ranked.strip() and "  " not in ranked


@pytest.mark.slow
def test_a_question_naming_the_speaker_reaches_her_answer(tmp_path: Path) -> None:
    """On the made-up conversation of the update probes (Dana and Sam, small talk between the facts), "Where does Dana
    work?" embedded with the name is nearest to greetings to Dana, and the 500-token context holds neither employer;
    embedded without it, the context holds the current one (Globex)."""
    from tmem.embed.sentence import SentenceTransformerEmbedder

    embedder = CountingEmbedder(inner=SentenceTransformerEmbedder())
    store = SQLiteStore.open(tmp_path / "tmem.db")
    try:
        import_file(store, UPDATES)
        space = Scope.local(json.loads(UPDATES.read_text(encoding="utf-8"))[0]["space"])
        assert space.space == "upd-dana"
        asyncio.run(build_extractive(store, space, embedder=embedder))
        retriever = Retriever(store, embedder)
        question = "Where does Dana work?"
        stripped = recall_context(retriever, space, question, 500, include_persona=False)
        assert embedder.texts[-1] == "Where does work?" and stripped.query == question
        kept = recall_context(
            retriever, space, question, 500, RetrievalConfig.preset("auto").replace(keep_speaker_names=True)
        )
        assert embedder.texts[-1] == question
        assert "Globex" in stripped.text
        assert "Globex" not in kept.text and "Acme" not in kept.text
    finally:
        store.close()
