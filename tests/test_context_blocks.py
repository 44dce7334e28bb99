"""How the budgeted context lays out raw turns: scene blocks on an LLM-built space, one block per session under one
date header on an extractive space (docs/retrieval.md, "Scene headers")."""

from __future__ import annotations

from datetime import datetime, timedelta

from tmem.answer.budget import pack_context
from tmem.models import BuildMode, Scene, Turn
from tmem.retrieve.types import Route, SceneHit, SearchResult, TurnHit
from tmem.util.text import count_tokens

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
    ctx = pack_context(_result(True, ["D2:1"], scene_hits=2), None)
    assert (
        ctx.text
        == "\n".join(
            [
                "[8 May 2023]",
                *(f"{t.speaker}: {t.text}" for t in TURNS[:2]),
                "…",  # a scene hit is its best turn and the turns beside it: S0's third turn is left out
                *(f"{t.speaker}: {t.text}" for t in TURNS[3:5]),
                "",
                "[11 May 2023]",
                "Melanie: Back from the beach.",
            ]
        )
    )
    assert ctx.tokens == count_tokens(ctx.text)
    assert sorted(ctx.turn_ids) == sorted(t.id for t in TURNS if t.id != "D1:3")


def test_turns_left_out_between_two_of_a_session_are_marked() -> None:
    ctx = pack_context(_result(True, ["D1:4", "D1:1"]), None)
    assert (
        ctx.text
        == "[8 May 2023]\nMelanie: I went to the support group yesterday.\n…\nCaroline: We took the kids camping by the lake."
    )
    assert ctx.tokens == count_tokens(ctx.text)


def test_titled_blocks_stay_one_per_scene() -> None:
    ctx = pack_context(_result(False, [], scene_hits=2), None)
    assert ctx.text.count("Scene (8 May 2023)") == 2
    assert "keyphrases of S0" in ctx.text and "keyphrases of S1" in ctx.text
    assert ctx.tokens == count_tokens(ctx.text)
