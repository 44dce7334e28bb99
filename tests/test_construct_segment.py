"""Scene segmentation: reply validation against the buffer (every failure path), retry through the LLM layer, the
maximum scene length, the provisional tail."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from tmem.construct.common import StageRun
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space
from tmem.construct.segment import STATE_OPEN_TAIL, Buffer, SceneOut, SegmentReply, check_reply, run_segment
from tmem.embed.hashing import HashEmbedder
from tmem.llm.scripted import scripted_llm
from tmem.models import Session, Turn
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2023, 5, 8, 13, 56)


def _turns(n: int, session: str = "session_1", prefix: str = "D1") -> list[Turn]:
    speakers = ("Caroline", "Melanie")
    return [
        Turn(id=f"{prefix}:{i + 1}", session_id=session, seq=i, speaker=speakers[i % 2], text=f"line {i + 1}", time=T0)
        for i in range(n)
    ]


def _scene(first: str, last: str, narrative: str = "On 8 May 2023, Caroline told Melanie about it.") -> SceneOut:
    return SceneOut(first_turn=first, last_turn=last, title="A title", summary="A summary.", narrative=narrative)


BUF = Buffer(turns=_turns(6), input_ends=False, max_scene_turns=4)


def test_a_valid_reply_gives_spans() -> None:
    reply = SegmentReply(scenes=[_scene("D1:1", "D1:3"), _scene("[D1:4]", "D1:4")])
    assert check_reply(reply, BUF) == [(0, 2), (3, 3)]


@pytest.mark.parametrize(
    ("scenes", "message"),
    [
        ([], "close at least the first scene"),
        ([_scene("D1:9", "D1:2")], "not a turn id of this buffer"),
        ([_scene("D1:1", "D9:9")], "not a turn id of this buffer"),
        ([_scene("D1:2", "D1:3")], "must be D1:1"),
        ([_scene("D1:1", "D1:2"), _scene("D1:4", "D1:5")], "must be D1:3"),
        ([_scene("D1:1", "D1:2"), _scene("D1:2", "D1:3")], "must be D1:3"),
        ([_scene("D1:3", "D1:1")], "must be D1:1"),
        ([_scene("D1:1", "D1:5")], "more than the maximum of 4"),
        ([_scene("D1:1", "D1:2", narrative="Caroline told Melanie about it yesterday.")], "no absolute date"),
        ([_scene("D1:1", "D1:2", narrative="On 8 May 2022 they met.")], "no absolute date"),
        (
            [SceneOut(first_turn="D1:1", last_turn="D1:2", title=" ", summary="s", narrative="In 2023.")],
            "title is empty",
        ),
    ],
)
def test_invalid_replies_are_rejected_with_an_actionable_message(scenes: list[SceneOut], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reply(SegmentReply(scenes=scenes), BUF)


def test_reversed_span_after_a_valid_start_is_rejected() -> None:
    buffer = Buffer(turns=_turns(6), input_ends=False, max_scene_turns=4)
    with pytest.raises(ValueError, match="comes before first_turn"):
        check_reply(SegmentReply(scenes=[_scene("D1:1", "D1:1"), _scene("D1:2", "D1:1")]), buffer)


def test_at_the_end_of_input_every_turn_must_be_closed() -> None:
    ending = Buffer(turns=_turns(6), input_ends=True, max_scene_turns=4)
    with pytest.raises(ValueError, match="every turn must be in a scene"):
        check_reply(SegmentReply(scenes=[_scene("D1:1", "D1:4")]), ending)
    assert check_reply(SegmentReply(scenes=[_scene("D1:1", "D1:4"), _scene("D1:5", "D1:6")]), ending)[-1] == (4, 5)


def _store_with(turns: list[Turn]) -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("s"))
    store.add_session(Scope.local("s"), Session(id="session_1", seq=0, started_at=T0, content_hash="h"), turns)
    return store


def _reply(*spans: tuple[str, str]) -> str:
    return SegmentReply(scenes=[_scene(a, b) for a, b in spans]).model_dump_json()


async def test_run_segment_slides_the_buffer_and_marks_the_provisional_tail() -> None:
    store = _store_with(_turns(10))
    options = BuildOptions(segment_window=6, max_scene_turns=4)
    # buffer D1:1-6 -> closes 1-3 and 4-5 (6 stays open); buffer D1:6-10 (end) -> 6-8, 9-10
    llm = scripted_llm(
        store, replies=[_reply(("D1:1", "D1:3"), ("D1:4", "D1:5")), _reply(("D1:6", "D1:8"), ("D1:9", "D1:10"))]
    )
    run = StageRun("segment", llm, Scope.local("s"), 1, False)
    await run_segment(store, Scope.local("s"), run, options)
    scenes = store.scenes(Scope.local("s"))
    assert [s.turn_ids for s in scenes] == [
        ["D1:1", "D1:2", "D1:3"],
        ["D1:4", "D1:5"],
        ["D1:6", "D1:7", "D1:8"],
        ["D1:9", "D1:10"],
    ]
    assert [s.seq for s in scenes] == [0, 1, 2, 3]
    assert store.get_state(Scope.local("s"), STATE_OPEN_TAIL) == scenes[-1].id
    second = llm.backend.requests[1].messages[1].content  # type: ignore[attr-defined]
    assert (
        "The buffer holds 5 turns, from <turn_id>D1:6</turn_id> to <turn_id>D1:10</turn_id>" in second
        and "last turns recorded so far" in second
    )
    assert "The scene just before this buffer (context only): <previous_scene>" in second
    assert run.report.created == 4 and run.report.llm_calls == 2


async def test_an_invalid_reply_is_fed_back_and_corrected() -> None:
    store = _store_with(_turns(4))
    llm = scripted_llm(store, replies=[_reply(("D1:2", "D1:4")), _reply(("D1:1", "D1:4"))])
    await run_segment(
        store,
        Scope.local("s"),
        StageRun("segment", llm, Scope.local("s"), 1, False),
        BuildOptions(segment_window=6, max_scene_turns=4),
    )
    retry = llm.backend.requests[1].messages  # type: ignore[attr-defined]
    assert retry[-1].role == "user" and "must be D1:1" in retry[-1].content
    assert [s.turn_ids for s in store.scenes(Scope.local("s"))] == [["D1:1", "D1:2", "D1:3", "D1:4"]]


async def test_a_window_the_model_never_segments_is_a_failed_unit_or_falls_back() -> None:
    store = _store_with(_turns(4))
    bad = json.dumps(
        {
            "scenes": [
                {
                    "first_turn": "D1:1",
                    "last_turn": "D1:4",
                    "title": "t",
                    "summary": "s",
                    "narrative": "They talked yesterday.",
                }
            ]
        }
    )
    llm = scripted_llm(store, fn=lambda _req: bad, settings=Settings(llm="openai", llm_model="m", llm_output_retries=1))
    run = StageRun("segment", llm, Scope.local("s"), 1, False)
    await run_segment(store, Scope.local("s"), run, BuildOptions(fallback=False))
    assert store.scenes(Scope.local("s")) == []
    (unit,) = run.failed
    assert unit.stage == "segment" and unit.refs == ["D1:1", "D1:2", "D1:3", "D1:4"]
    assert "no absolute date" in unit.reason
    report = await build_space(
        store, Scope.local("s"), llm=llm, embedder=HashEmbedder(), options=BuildOptions(fallback=False)
    )
    assert not report.complete and report.failed[0].unit == "segment:D1:1"
    # with the fallback (the default) the window is split without the model, and marked as such
    report = await build_space(store, Scope.local("s"), llm=llm, embedder=HashEmbedder())
    (scene,) = store.scenes(Scope.local("s"))
    assert report.fallback == {scene.id: f"segment: {unit.reason}"}
    assert {u.stage for u in report.failed} == {"topics", "triggers.scene"}  # it fails every later request
    assert scene.turn_ids == ["D1:1", "D1:2", "D1:3", "D1:4"] and scene.narrative.startswith("On ")


def test_a_part_segmented_on_its_own_is_told_so() -> None:
    from tmem.construct.segment import messages_for

    turns = _turns(4)
    alone = messages_for(Buffer(turns=turns, input_ends=True, max_scene_turns=4, alone=True), None)
    user = alone[1].content + alone[0].content
    assert "segmented on its own" in user and "beginning of the conversation" not in user
    first = messages_for(Buffer(turns=turns, input_ends=True, max_scene_turns=4), None)
    assert "beginning of the conversation" in first[0].content + first[1].content
