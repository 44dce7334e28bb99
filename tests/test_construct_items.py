"""Item extraction: validation paths, atomic and connected links, duplicates, supersession, re-extraction of only the
topics that gained scenes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tmem.construct.common import StageRun
from tmem.construct.items import (
    AtomicItemOut,
    ConnectedItemOut,
    ExtractionRequest,
    ItemReply,
    check_reply,
    item_id,
    run_items,
)
from tmem.construct.options import BuildOptions
from tmem.construct.revert import load_covered
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.models import Item, ItemKind, Scene, Session, Topic, TopicSceneLink, Turn
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2023, 5, 8, 13, 56)
T1 = datetime(2023, 5, 25, 13, 14)


def _scene(n: int, when: datetime) -> Scene:
    return Scene(
        id=f"sc{n}",
        seq=n,
        title=f"Scene {n}",
        summary="s",
        narrative="On 8 May 2023 ...",
        turn_ids=[f"D{n}:1", f"D{n}:2"],
        start=when,
        end=when,
    )


OLD = _scene(1, T0)
NEW = _scene(2, T1)
TOPIC = Topic(id="t1", seq=0, label="Caroline's adoption plans", description="Adoption.")
EXISTING = Item(
    id="i_old",
    text="On 8 May 2023 Caroline planned to adopt one child.",
    kind=ItemKind.ATOMIC,
    scene_ids=["sc1"],
    topic_id="t1",
    speaker="Caroline",
    date="2023-05-08",
)
REQ = ExtractionRequest(topic=TOPIC, old=[OLD], new=[NEW], existing=[EXISTING], speakers=["Caroline", "Melanie"])


def _atomic(**kw: Any) -> AtomicItemOut:
    base: dict[str, Any] = {
        "text": "On 25 May 2023 Caroline chose an adoption agency.",
        "speaker": "Caroline",
        "date": "2023-05-25",
        "scene": "S2",
        "turns": ["D2:1"],
        "updates": None,
    }
    return AtomicItemOut(**{**base, **kw})


def _connected(**kw: Any) -> ConnectedItemOut:
    base: dict[str, Any] = {
        "text": "Caroline moved from planning (8 May 2023) to choosing an agency (25 May 2023).",
        "speaker": "Caroline",
        "date": "2023-05-25",
        "scenes": ["S1", "S2"],
        "turns": ["D2:1"],
        "updates": None,
    }
    return ConnectedItemOut(**{**base, **kw})


def test_refs_follow_scene_order_and_a_valid_reply_resolves_ids() -> None:
    assert list(REQ.scene_refs) == ["S1", "S2"] and REQ.new_refs == ["S2"] and list(REQ.item_refs) == ["E1"]
    out = check_reply(ItemReply(atomic_items=[_atomic(updates="E1")], connected_items=[_connected()]), REQ)
    assert [(e.kind, e.scene_ids, e.updates) for e in out] == [
        (ItemKind.ATOMIC, ["sc2"], "i_old"),
        (ItemKind.CONNECTED, ["sc1", "sc2"], None),
    ]


@pytest.mark.parametrize(
    ("atomic", "connected", "message"),
    [
        ([_atomic(scene="S1", turns=["D1:1"])], [], "is not new"),
        ([_atomic(scene="S9")], [], "is not one of"),
        ([_atomic(turns=["D1:1"])], [], "must list ids of turns of its source scene"),
        ([_atomic(turns=[])], [], "must list ids of turns"),
        ([_atomic(speaker="Bob")], [], "is not one of"),
        ([_atomic(text="On 25 May 2023 she chose an adoption agency.")], [], "must name Caroline"),
        ([_atomic(date="25 May 2023")], [], "is not a date in one of the forms YYYY-MM-DD"),
        ([_atomic(date="2023-13")], [], "not a calendar date"),
        ([_atomic(date="2023-05-09/2023-05-01")], [], "ends before it starts"),
        ([_atomic(conflicts="E7")], [], "conflicts 'E7' is not an existing item"),
        ([_atomic(updates="E1", conflicts="E1")], [], "both updated and contradicted"),
        ([_atomic(date="2023-02-30")], [], "not a calendar date"),
        ([_atomic(updates="E7")], [], "is not an existing item"),
        ([_atomic(text="  ")], [], "text is empty"),
        ([], [_connected(scenes=["S2"])], "two or more distinct scenes"),
        ([], [_connected(scenes=["S2", "s2"])], "two or more distinct scenes"),
        ([], [_connected(scenes=["S1", "S1"], turns=["D1:1"])], "two or more distinct scenes"),
    ],
)
def test_invalid_replies_are_rejected(
    atomic: list[AtomicItemOut], connected: list[ConnectedItemOut], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_reply(ItemReply(atomic_items=atomic, connected_items=connected), REQ)


def test_a_connected_item_must_touch_a_new_scene() -> None:
    old2 = _scene(3, T0).model_copy(update={"seq": 0, "id": "sc0", "turn_ids": ["D0:1"]})
    req = ExtractionRequest(topic=TOPIC, old=[old2, OLD], new=[NEW], existing=[], speakers=["Caroline"])
    with pytest.raises(ValueError, match="at least one new scene"):
        check_reply(ItemReply(atomic_items=[], connected_items=[_connected(scenes=["S1", "S2"], turns=["D0:1"])]), req)


def _store() -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("s"))
    store.set_speakers(Scope.local("s"), ["Caroline", "Melanie"])
    turns = [
        Turn(id=f"D{n}:{k}", session_id=f"x{n}", seq=2 * n + k, speaker="Caroline", text="t", time=T0)
        for n in (1, 2, 3)
        for k in (1, 2)
    ]
    for n in (1, 2, 3):
        store.add_session(
            Scope.local("s"),
            Session(id=f"x{n}", seq=n, started_at=T0, content_hash=f"h{n}"),
            [t for t in turns if t.session_id == f"x{n}"],
        )
    return store


async def test_incremental_extraction_sees_old_context_supersedes_and_skips_duplicates() -> None:
    store = _store()
    store.put_scenes(Scope.local("s"), [OLD, NEW])
    store.put_topics(Scope.local("s"), [TOPIC])
    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id="sc1")])
    first = ItemReply(
        atomic_items=[
            AtomicItemOut(
                text=EXISTING.text, speaker="Caroline", date="2023-05-08", scene="S1", turns=["D1:1"], updates=None
            )
        ],
        connected_items=[],
    )
    llm = scripted_llm(store, replies=[first])
    await run_items(store, Scope.local("s"), StageRun("items", llm, Scope.local("s"), 2, False), BuildOptions())
    (old,) = store.items(Scope.local("s"))
    assert old.id == item_id(ItemKind.ATOMIC, EXISTING.text, ["sc1"]) and load_covered(store, Scope.local("s")) == {
        "t1": ["sc1"]
    }

    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id="sc2")])
    duplicate = AtomicItemOut(
        text=EXISTING.text, speaker="Caroline", date="2023-05-08", scene="S2", turns=["D2:1"], updates=None
    )
    second = ItemReply(
        atomic_items=[
            _atomic(updates="E1"),
            _atomic(),
            duplicate.model_copy(update={"text": "On 25 May 2023 Caroline chose an adoption agency."}),
        ],
        connected_items=[_connected()],
    )
    llm2 = scripted_llm(store, replies=[second])
    await run_items(store, Scope.local("s"), StageRun("items", llm2, Scope.local("s"), 2, False), BuildOptions())
    prompt = llm2.backend.requests[0].messages[1].content  # type: ignore[attr-defined]
    assert "[S1] 8 May 2023 · Scene 1: s" in prompt and "[S2] (new)" in prompt and f"[E1] {EXISTING.text}" in prompt
    items = {it.id: it for it in store.items(Scope.local("s"))}
    assert len(items) == 3  # the repeated atomic fact is stored once
    new_atomic = next(it for it in items.values() if it.kind is ItemKind.ATOMIC and it.id != old.id)
    assert new_atomic.supersedes == old.id and items[old.id].superseded_by == new_atomic.id
    connected = next(it for it in items.values() if it.kind is ItemKind.CONNECTED)
    assert connected.scene_ids == ["sc1", "sc2"] and connected.topic_id == "t1"
    assert [it.seq for it in store.items(Scope.local("s"))] == [0, 1, 2]

    llm3 = scripted_llm(store)  # nothing new: no request at all
    await run_items(store, Scope.local("s"), StageRun("items", llm3, Scope.local("s"), 2, False), BuildOptions())
    assert llm3.backend.requests == []  # type: ignore[attr-defined]


async def test_a_topic_with_many_new_scenes_is_read_in_chunks_that_see_earlier_items() -> None:
    store = _store()
    scenes = [_scene(n, T0) for n in (1, 2, 3)]
    store.put_scenes(Scope.local("s"), scenes)
    store.put_topics(Scope.local("s"), [TOPIC])
    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id=s.id) for s in scenes])

    def reply(request: ChatRequest) -> str:
        user = request.messages[1].content
        ref = "S3" if "[S3] (new)" in user else "S1"
        turn = "D3:1" if ref == "S3" else "D1:1"
        return ItemReply(
            atomic_items=[_atomic(scene=ref, turns=[turn], text=f"Caroline fact from {ref}.")], connected_items=[]
        ).model_dump_json()

    llm = scripted_llm(store, fn=reply)
    await run_items(
        store,
        Scope.local("s"),
        StageRun("items", llm, Scope.local("s"), 2, False),
        BuildOptions(item_scenes_per_call=2),
    )
    first, second = (r.messages[1].content for r in llm.backend.requests)  # type: ignore[attr-defined]
    assert "[S1] (new)" in first and "[S2] (new)" in first and "(none)" in first
    assert "[S3] (new)" in second and "[E1] Caroline fact from S1." in second and "[S1] 8 May 2023" in second
    assert len(store.items(Scope.local("s"))) == 2 and load_covered(store, Scope.local("s")) == {
        "t1": ["sc1", "sc2", "sc3"]
    }


@pytest.mark.parametrize(
    ("given", "start", "end", "precision"),
    [
        ("2023-05-25", "2023-05-25", None, "day"),
        ("2023-W20", "2023-05-15", "2023-05-21", "week"),
        ("2023-05", "2023-05-01", "2023-05-31", "month"),
        ("2022-summer", "2022-06-01", "2022-08-31", "season"),
        ("2010", "2010-01-01", "2010-12-31", "year"),
        ("2023-05-20/2023-05-21", "2023-05-20", "2023-05-21", "range"),
    ],
)
async def test_an_item_keeps_the_precision_of_its_date(given: str, start: str, end: str | None, precision: str) -> None:
    store = _store()
    store.put_scenes(Scope.local("s"), [OLD, NEW])
    store.put_topics(Scope.local("s"), [TOPIC])
    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id="sc2")])
    reply = ItemReply(atomic_items=[_atomic(date=given, scene="S1")], connected_items=[])  # sc2 is the only scene
    await run_items(
        store,
        Scope.local("s"),
        StageRun("items", scripted_llm(store, replies=[reply]), Scope.local("s"), 1, False),
        BuildOptions(),
    )
    (item,) = store.items(Scope.local("s"))
    assert (item.date, item.date_end, item.date_precision) == (start, end, precision)


async def test_a_contradiction_is_kept_on_both_items_and_neither_supersedes() -> None:
    store = _store()
    store.put_scenes(Scope.local("s"), [OLD, NEW])
    store.put_topics(Scope.local("s"), [TOPIC])
    store.put_items(Scope.local("s"), [EXISTING])
    from tmem.construct.revert import save_covered

    save_covered(store, Scope.local("s"), {"t1": ["sc1"]})
    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id=s) for s in ("sc1", "sc2")])
    said = _atomic(text="On 25 May 2023 Caroline said she never wanted to adopt.", conflicts="E1")
    await run_items(
        store,
        Scope.local("s"),
        StageRun(
            "items",
            scripted_llm(store, replies=[ItemReply(atomic_items=[said], connected_items=[])]),
            Scope.local("s"),
            1,
            False,
        ),
        BuildOptions(),
    )
    items = {it.id: it for it in store.items(Scope.local("s"))}
    new = next(it for it in items.values() if it.id != EXISTING.id)
    assert new.conflicts_with == [EXISTING.id] and items[EXISTING.id].conflicts_with == [new.id]
    assert new.supersedes is None and items[EXISTING.id].superseded_by is None


async def test_items_on_one_slot_are_linked_in_code_even_when_no_request_saw_the_other() -> None:
    """Few-rounds plan: the two chunks of one topic are asked at once, so neither request shows the other's items
    (the model cannot fill `updates`); the slot each item names links the older to the newer after the round, the
    labels matched by their normalised form ('Caroline / job' and "caroline's / current employer")."""
    store = _store()
    scenes = [_scene(n, T0) for n in (1, 2, 3)]
    store.put_scenes(Scope.local("s"), scenes)
    store.put_topics(Scope.local("s"), [TOPIC])
    store.link_topics(Scope.local("s"), [TopicSceneLink(topic_id="t1", scene_id=s.id) for s in scenes])

    def reply(request: ChatRequest) -> str:
        user = request.messages[1].content
        assert "(none)" in user.split("<existing_items>")[1][:20]  # a fresh build: no existing items are shown
        if "[S3] (new)" in user:
            atomic = [
                _atomic(scene="S3", turns=["D3:1"], date="2023-06-02", slot="caroline's / current employer",
                        text="On 2 June 2023 Caroline started working at Globex."),
            ]  # fmt: skip
        else:
            atomic = [
                _atomic(scene="S1", turns=["D1:1"], date="2023-05-01", slot="Caroline / job",
                        text="On 1 May 2023 Caroline worked at Acme."),
                _atomic(scene="S1", turns=["D1:2"], date="2023-05-01", slot="Caroline / home",
                        text="On 1 May 2023 Caroline lived in Lyon."),
                _atomic(scene="S2", turns=["D2:1"], date="2023-05-01", slot="Caroline / dog",
                        text="On 1 May 2023 Caroline had a dog named Rex."),
                _atomic(scene="S2", turns=["D2:1"], date="2023-05-01", slot="Caroline / dogs",
                        text="On 1 May 2023 Caroline said her dog Rex is a beagle."),
            ]  # fmt: skip
        return ItemReply(atomic_items=atomic, connected_items=[]).model_dump_json()

    llm = scripted_llm(store, fn=reply)
    options = BuildOptions(item_scenes_per_call=2, few_rounds=True)
    await run_items(store, Scope.local("s"), StageRun("items", llm, Scope.local("s"), 2, False), options)
    assert len(llm.backend.requests) == 2  # type: ignore[attr-defined]
    items = {it.text.split(" Caroline ", 1)[1]: it for it in store.items(Scope.local("s"))}
    acme, globex = items["worked at Acme."], items["started working at Globex."]
    assert (acme.slot, globex.slot) == ("caroline / job", "caroline / employer")
    assert acme.superseded_by == globex.id and globex.supersedes == acme.id
    assert items["lived in Lyon."].superseded_by is None  # another slot
    # two items of one turn on one slot restate one moment: not a change, neither is superseded
    assert items["had a dog named Rex."].superseded_by is None and items["said her dog Rex is a beagle."].slot == (
        "caroline / dog"
    )
    assert items["said her dog Rex is a beagle."].superseded_by is None
