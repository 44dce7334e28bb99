"""The lexical anchor of a query and the anchorless context (docs/retrieval.md, "The lexical anchor")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_retrieve_extractive import SPACE, db  # noqa: F401  (module fixture: conv-26, 4 sessions, extractive)
from tmem.answer.budget import recall, route_filter
from tmem.embed.hashing import HashEmbedder
from tmem.index.anchor import TurnLexicon, date_words, is_question
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

TURNS = [
    "Caroline: I went to the LGBTQ support group yesterday.",
    "Melanie: The kids and I went camping by the lake.",
    "Caroline: Painting helps me relax after work.",
    "Melanie: We went to the beach with the kids.",
]


def test_anchor_is_the_share_of_the_query_idf_mass_its_best_turn_holds() -> None:
    lex = TurnLexicon(TURNS)
    assert lex.n == 4
    assert lex.anchor("support group", TURNS) == pytest.approx(1.0)
    assert lex.anchor("support group", []) == 0.0
    assert lex.anchor("", TURNS) == 0.0
    assert lex.anchor("quantum chromodynamics", TURNS) == 0.0
    # "kids" is in two turns, "support" in one, "volcano" in none (unexplained, largest idf)
    idf = {w: lex.idf(w) for w in ("kids", "support", "volcano")}
    assert idf["volcano"] > idf["support"] > idf["kids"]
    got = lex.anchor("kids support volcano", [TURNS[1], TURNS[0]])
    assert got == pytest.approx(max(idf["kids"], idf["support"]) / math.fsum(idf.values()))
    assert 0.0 < got < 1.0


def test_a_calendar_date_in_the_query_weighs_nothing() -> None:
    lex = TurnLexicon(TURNS)
    plain = lex.anchor("What did Caroline do at the support group?", TURNS)
    assert 0.0 < plain < 1.0  # "what", "did" and "do" are not stop words and no turn holds them
    for dated in (
        "What did Caroline do at the support group on 5 November, 2022?",
        "What did Caroline do at the support group in May 2023?",
        "What did Caroline do at the support group on the 3rd of July?",
        "What did Caroline do at the support group on Sept. 4th, 2021?",
    ):
        assert lex.anchor(dated, TURNS) == pytest.approx(plain), dated
    assert date_words("on 5 November, 2022 and in 2021") == {"5", "november", "2022", "2021"}
    assert lex.anchor("What did Caroline do at the support group on 2022-11-05?", TURNS) == pytest.approx(plain)
    assert lex.anchor("What did Caroline do at the support group on 11/5/2022?", TURNS) == pytest.approx(plain)
    assert date_words("in mid-May, since Jan 2020, from 2019 to 2021") == {"may", "jan", "2020", "2019", "2021"}
    assert date_words("in may 2023") == {"may", "2023"}  # lower case counts with its year
    assert lex.anchor("November 2022", TURNS) == 0.0  # nothing but a date: nothing lexical to anchor


@pytest.mark.parametrize(
    "query",
    [
        "I have 3 kids and a march to go to",  # a number or a verb alone
        "We plan to march next week",
        "a protest in march",  # a month in lower case counts only with its year
        "Which of the 5 may help her?",
        "Did May go camping?",  # names
        "What did Melanie give to June for her birthday?",
        "What gift did Caroline get from April?",
        "What painting by August did John buy?",
        "Did she pay 2000 dollars for it?",  # a number that could be a year
        "calories, 1800 or 2100?",
    ],
)
def test_what_is_not_a_date_stays_in_the_anchor(query: str) -> None:
    assert date_words(query) == set()


@given(st.text(max_size=120), st.lists(st.sampled_from(TURNS), max_size=3))
def test_anchor_is_a_share(query: str, best: list[str]) -> None:
    got = TurnLexicon(TURNS).anchor(query, best)
    assert 0.0 <= got <= 1.0 + 1e-12


def test_route_filter_keeps_names_and_prefixes_only_under_the_floor() -> None:
    cfg = ContextLayout.of_recipe("extractive").replace(anchorless_routes=frozenset({"turn.dense", "scene.trigger."}))
    assert cfg.lexical_floor is not None
    from tmem.retrieve.types import SearchResult

    def result(anchor: float | None) -> SearchResult:
        return SearchResult(space="s", query="q", preset="extractive", scenes=[], items=[], lexical_anchor=anchor)

    assert route_filter(result(None), cfg) is None
    assert route_filter(result(cfg.lexical_floor), cfg) is None
    counts = route_filter(result(cfg.lexical_floor / 2), cfg)
    assert counts is not None
    assert counts("turn.dense") and counts("scene.trigger.horizon")
    assert not counts("turn.bm25") and not counts("item.direct.dense") and not counts("turn.dense2")
    assert route_filter(result(0.0), cfg.replace(lexical_floor=None)) is None


def test_an_anchorless_query_on_an_extractive_space_is_ordered_by_dense_raw_turns(db: Path) -> None:  # noqa: F811
    store = SQLiteStore.open(db / "tmem.db")
    try:
        retriever = Retriever(store, HashEmbedder())
        # a question that names what it asks about: anchored, every route counts
        res, ctx = recall(retriever, Scope.local(SPACE), "When did Caroline go to the LGBTQ support group?", 400)
        assert res.lexical_anchor is not None and res.lexical_anchor >= 0.25 and not ctx.anchorless
        assert ctx.lexical_anchor == res.lexical_anchor
        assert {r.name for h in ctx.hits for r in h.routes} - {"turn.dense"}
        # a message sharing no rare word with the conversation: anchorless, dense raw-turn order first
        res, ctx = recall(
            retriever, Scope.local(SPACE), "Honestly my week felt strange and slow, nothing much to report.", 400
        )
        assert res.lexical_anchor is not None and res.lexical_anchor < 0.25 and ctx.anchorless
        assert ctx.tokens <= 400
        dense = {th.turn.id: r.rank for th in res.turns for r in th.routes if r.name == "turn.dense"}
        lead = [h for h in ctx.hits if h.kind == "turn" and h.id in dense]
        assert lead and ctx.hits[: len(lead)] == lead, "dense raw turns come first"
        assert [dense[h.id] for h in lead] == sorted(dense[h.id] for h in lead)
        # the scene blocks of an extractive space carry a date, not the keyphrase title
        assert "Scene (" not in ctx.text and ctx.text.startswith("[")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Caroline find in her neighborhood during her walk?", True),
        ("Would Caroline likely have Dr. Seuss books on her bookshelf?", True),
        ("  how are you ?  ", True),
        ("In what ways is Caroline participating?", False),  # no interrogative word first
        ("It's funny, who am I, choosing rest over gadgets?", False),  # a statement ending on a rhetorical question
        ("Remember how hard I pursued that? Now I barely think about it.", False),  # no question mark last
        ("Whatever happened to the band?", False),  # "whatever" is not "what"
        ("What did we decide", False),
    ],
)
def test_a_direct_question_opens_with_an_interrogative_and_ends_with_a_question_mark(
    query: str, expected: bool
) -> None:
    assert is_question(query) is expected
