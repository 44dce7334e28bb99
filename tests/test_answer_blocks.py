"""How the budgeted context lays out raw turns: scene blocks on an LLM-built space, one block per session under one
date header on an extractive space (docs/retrieval.md, "Scene headers")."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from tmem.answer.blocks import Draft, TurnBlock
from tmem.answer.budget import pack_context
from tmem.models import BuildMode, Scene, Turn
from tmem.retrieve.types import Route, SceneHit, SearchResult, TurnHit
from tmem.util.tokens import TOKENIZERS, token_counter

DAY = datetime(2023, 5, 8, 13, 0)
TURNS = [
    Turn(
        id=f"D1:{n + 1}", session_id="session_1", seq=n, speaker="Caroline" if n % 2 else "Melanie", text=text, time=DAY
    )
    for n, text in enumerate(
        [
            "I went to the support group yesterday.",
            "How did it feel?",
            "It gave me courage to be myself.",
            "We took the kids camping by the lake.",
            "That sounds lovely!",
        ]
    )
] + [
    Turn(
        id="D2:1",
        session_id="session_2",
        seq=5,
        speaker="Melanie",
        text="Back from the beach.",
        time=DAY + timedelta(days=3),
    )
]


def _scene(sid: str, turns: list[Turn], mode: BuildMode) -> Scene:
    return Scene(
        id=sid,
        seq=int(sid[1:]),
        title=f"keyphrases of {sid}",
        summary="",
        narrative="",
        turn_ids=[t.id for t in turns],
        start=turns[0].time,
        end=turns[-1].time,
        mode=mode,
    )


def _result(descriptive_only: bool, picked: list[str], scene_hits: int = 0) -> SearchResult:
    """Turn hits for ``picked`` and scene hits for the first ``scene_hits`` scenes."""
    mode = BuildMode.EXTRACTIVE if descriptive_only else BuildMode.LLM
    scenes = [_scene("S0", TURNS[:3], mode), _scene("S1", TURNS[3:5], mode), _scene("S2", TURNS[5:], mode)]
    home = {tid: s for s in scenes for tid in s.turn_ids}
    by_id = {t.id: t for t in TURNS}
    turns = [
        TurnHit(
            turn=by_id[tid], scene_id=home[tid].id, score=1.0 / n, routes=[Route(name="turn.dense", rank=n, score=0.5)]
        )
        for n, tid in enumerate(picked, start=1)
    ]
    found = [
        SceneHit(
            scene=s,
            turns=[by_id[t] for t in s.turn_ids],
            score=1.0 / n,
            routes=[Route(name="scene.dense", rank=n, score=0.5)],
        )
        for n, s in enumerate(scenes[:scene_hits], start=1)
    ]
    return SearchResult(
        space="s", query="q", preset="x", scenes=found, items=[], turns=turns, descriptive_only=descriptive_only
    )


def test_an_extractive_context_puts_the_scenes_of_one_session_under_one_date_header() -> None:
    """Blocks are read newest first (the later session above the earlier), each block's turns in conversation
    order."""
    ctx = pack_context(_result(True, ["D2:1"], scene_hits=2), None)
    assert (
        ctx.text
        == "\n".join(
            [
                "[11 May 2023]",
                "Melanie: Back from the beach.",
                "",
                "[8 May 2023]",
                *(f"{t.speaker}: {t.text}" for t in TURNS[:2]),
                "…",  # a scene hit is its best turn and the turns beside it: S0's third turn is left out
                *(f"{t.speaker}: {t.text}" for t in TURNS[3:5]),
            ]
        )
    )
    assert sorted(ctx.turn_ids) == sorted(t.id for t in TURNS if t.id != "D1:3")


def test_turns_left_out_between_two_of_a_session_are_marked() -> None:
    ctx = pack_context(_result(True, ["D1:4", "D1:1"]), None)
    assert (
        ctx.text
        == "[8 May 2023]\nMelanie: I went to the support group yesterday.\n…\nCaroline: We took the kids camping by the lake."
    )


def test_titled_blocks_stay_one_per_scene() -> None:
    ctx = pack_context(_result(False, [], scene_hits=2), None)
    assert ctx.text.count("Scene (8 May 2023)") == 2
    assert "keyphrases of S0" in ctx.text and "keyphrases of S1" in ctx.text


# ------------------------------------------------------------------------------------------------ properties

SESSION_TURNS = [
    Turn(
        id=f"T{n}",
        session_id="session_1",
        seq=n,
        speaker="Caroline" if n % 3 else "Melanie",
        text=" ".join(["word"] * (1 + n % 4)) + ("!" if n % 2 else ""),
        time=DAY + timedelta(hours=10 * n),  # the session runs over several days
    )
    for n in range(9)
]
SESSION_SCENES = [
    _scene("S0", SESSION_TURNS[0:4], BuildMode.EXTRACTIVE),
    _scene("S1", SESSION_TURNS[4:7], BuildMode.EXTRACTIVE),
    _scene("S2", SESSION_TURNS[7:9], BuildMode.EXTRACTIVE),
]
HOME = {tid: s for s in SESSION_SCENES for tid in s.turn_ids}


@given(
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 8), st.booleans(), st.booleans()), min_size=1, max_size=30),
    st.sampled_from(TOKENIZERS),
)
def test_a_block_count_always_equals_the_count_of_its_text(
    titled: bool, ops: list[tuple[int, bool, bool]], tokenizer: str
) -> None:
    """Adds and removals in any order, known and unknown scenes, a session over several days: the running count is
    the count of the rendered block with its newline, and its ends are what the count gains followed by a blank line
    or alone (what keeps a context within its budget)."""
    counter = token_counter(tokenizer)
    block = TurnBlock(titled, SESSION_SCENES[0] if titled else None, counter)
    for n, add, known in ops:
        turn = SESSION_TURNS[n]
        if titled and turn.id not in SESSION_SCENES[0].turn_ids:
            continue
        present = turn in block.turns
        if add and not present:
            block.add(turn, HOME[turn.id] if known else None)
        elif not add and present:
            block.remove(turn)
        else:
            continue
        if block.turns:
            text = block.render()
            assert block.tokens == counter.count(text + "\n")
            assert block.tokens + block.ends[0] == counter.count(text + "\n\n")
            assert block.tokens + block.ends[1] == counter.count(text)
            assert [t.seq for t in block.turns] == sorted(t.seq for t in block.turns)
        else:
            assert block.tokens == 0


@given(
    st.lists(st.sampled_from([t.id for t in SESSION_TURNS]), unique=True, max_size=9),
    st.integers(0, 3),
    st.integers(0, 120),
    st.sampled_from(TOKENIZERS),
)
def test_an_extractive_context_stays_within_any_budget(
    picked: list[str], scene_hits: int, budget: int, tokenizer: str
) -> None:
    by_id = {t.id: t for t in SESSION_TURNS}
    result = SearchResult(
        space="s",
        query="q",
        preset="x",
        scenes=[
            SceneHit(
                scene=s,
                turns=[by_id[t] for t in s.turn_ids],
                score=1.0,
                routes=[Route(name="scene.dense", rank=n + 1, score=0.5)],
            )
            for n, s in enumerate(SESSION_SCENES[:scene_hits])
        ],
        items=[],
        turns=[
            TurnHit(turn=by_id[t], scene_id=HOME[t].id, score=1.0, routes=[Route(name="turn.dense", rank=n, score=0.5)])
            for n, t in enumerate(picked, start=1)
        ],
        descriptive_only=True,
    )
    counter = token_counter(tokenizer)
    ctx = pack_context(result, budget, counter=counter)
    assert ctx.tokens <= budget and ctx.tokens == counter.count(ctx.text) and ctx.counter == tokenizer
    assert ctx.evidence_tokens == sum(h.tokens for h in ctx.hits)
    for tid in ctx.turn_ids:
        assert by_id[tid].text in ctx.text


def test_two_copies_of_one_scene_are_one_scene() -> None:
    """A turn hit's scene and an item's source scene are equal records, not one object: adjacency goes by scene id."""
    block = TurnBlock(False)
    block.add(SESSION_TURNS[0], SESSION_SCENES[0])
    block.add(SESSION_TURNS[1], SESSION_SCENES[0].model_copy())
    assert "…" not in block.render()
    block.add(SESSION_TURNS[4], SESSION_SCENES[1])  # another scene: something may lie between
    assert block.render().count("…") == 1


# ------------------------------------------------------------------------------------------------ associative recipe


def test_a_scene_without_neighbours_enters_as_its_best_matched_turn() -> None:
    result = _result(False, ["D1:2"], scene_hits=1)  # S0's best-matched turn is D1:2, the turn route's pick
    with_neighbours = pack_context(result, None)
    alone = pack_context(result, None, neighbours=False)
    assert set(with_neighbours.turn_ids) == {"D1:1", "D1:2", "D1:3"}
    assert alone.turn_ids == ["D1:2"]


def test_an_llm_built_context_without_titles_is_laid_out_by_session_dates() -> None:
    result = _result(False, [], scene_hits=3)
    titled = pack_context(result, None)
    dated = pack_context(result, None, titles=False)
    assert "keyphrases of" in titled.text and "keyphrases of" not in dated.text
    assert dated.text.startswith("[11 May 2023]\n") and "\n\n[8 May 2023]\n" in dated.text  # newest first
    assert dated.text.count("[8 May 2023]") == 1  # S0 and S1 are one session: one header
    assert dated.tokens < titled.tokens
    assert set(dated.turn_ids) == set(titled.turn_ids)


# ------------------------------------------------------------------------------------------------ newest first

SESSIONS = [
    Turn(
        id=f"U{n}",
        session_id=f"session_{n // 3}",
        seq=n,
        speaker="Caroline" if n % 2 else "Melanie",
        text=" ".join(["word"] * (1 + n % 3)) + ("." if n % 2 else ""),
        time=DAY + timedelta(days=7 * (n // 3)),
    )
    for n in range(9)
]
FACTS = [
    (f"- fact {n} ({d})", (d, n)) for n, d in enumerate(["2023-05-03", "2023-05-20", "2023-05-03", "2023-05-15", ""])
]


@given(
    st.booleans(),
    st.lists(st.tuples(st.booleans(), st.integers(0, 8), st.booleans()), min_size=1, max_size=30),
    st.sampled_from(TOKENIZERS),
)
def test_a_context_reads_newest_first_and_its_count_stays_exact(
    timeline: bool, ops: list[tuple[bool, int, bool]], tokenizer: str
) -> None:
    """Fact lines (newest date first, then latest said) and blocks (latest session first) are rendered newest first
    whatever order they entered in, the facts under "Facts:" before the blocks or, on a ``timeline`` (an extractive
    space), among them by date; the running count is the count of the text throughout (issue 21: a changed fact's
    current statement is read before the older one whenever both are in the context)."""
    counter = token_counter(tokenizer)
    draft = Draft(counter, titled=False, timeline=timeline)
    for is_fact, n, add in ops:
        if is_fact:
            line, when = FACTS[n % len(FACTS)]
            if line in draft.facts:
                continue
            draft.add_fact(line, when)
            if not add:
                draft.pop_fact()  # takes back the line just added, wherever it went
                assert line not in draft.facts
        else:
            turn = SESSIONS[n]
            present = any(turn in block.turns for block in draft.blocks.values())
            if add and not present:
                draft.add_turn(turn, None)
            elif not add and present:
                draft.remove_turn(turn, None)
        text = draft.evidence()
        assert draft.tokens == (counter.count(text) if text else 0)
        assert draft.fact_dates == sorted(draft.fact_dates, reverse=True)
        headers = [line for line in text.splitlines() if line.startswith("[")]
        days = [datetime.strptime(h.strip("[]"), "%d %B %Y").date() for h in headers]
        assert days == sorted(days, reverse=True)
        assert ("Facts:" in text) == (bool(draft.facts) and not timeline)
        if timeline:  # headers and dated fact lines, newest first through the whole text
            dated = [
                date.fromisoformat(line[-11:-1])
                if line.startswith("- ")
                else datetime.strptime(line[1:-1], "%d %B %Y").date()
                for line in text.splitlines()
                if line.startswith("[") or (line.startswith("- ") and not line.endswith("()"))
            ]
            assert dated == sorted(dated, reverse=True)
