"""Trigger instantiation and persona: validation paths and the stored records and views."""

from __future__ import annotations

from datetime import datetime

import pytest

from tmem.construct.common import StageRun
from tmem.construct.options import BuildOptions
from tmem.construct.persona import PersonaReply, TraitOut, check_reply, run_persona
from tmem.construct.triggers import (
    ItemTriggerReply,
    ItemTriggersOut,
    SceneTriggerOut,
    SceneTriggerReply,
    TriggerTuple,
    check_item_reply,
    check_scene_reply,
    item_trigger_records,
    run_item_triggers,
    run_scene_triggers,
    scene_trigger_records,
)
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.models import Item, ItemKind, PersonaTrait, Scene, Session, TriggerFamily, Turn
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2023, 5, 8, 13, 56)
TUP = TriggerTuple(
    concept="food allergy",
    bridge="Choosing a restaurant for the team dinner.",
    rationale="because a colleague cannot eat seafood",
)
ITEM = Item(
    id="i1",
    text="On 8 May 2023 Caroline said her colleague is allergic to seafood.",
    kind=ItemKind.ATOMIC,
    scene_ids=["sc1"],
    speaker="Caroline",
    date="2023-05-08",
)
SCENE_OUT = SceneTriggerOut(
    scene="S1",
    situation="A catch-up.",
    object="A painting.",
    event="She showed it.",
    emotion="Proud.",
    horizon=["Choosing a gift for Melanie.", "Visiting a gallery."],
)


def test_item_triggers_become_entity_and_bridge_records_with_their_views() -> None:
    records = item_trigger_records(ITEM, [TUP, TUP.model_copy(update={"concept": "dietary restriction"})])
    entity = [r for r in records if r.family is TriggerFamily.ENTITY]
    bridge = [r for r in records if r.family is TriggerFamily.BRIDGE]
    assert [r.group for r in entity] == [0, 1] and [r.group for r in bridge] == [0, 1]
    assert [(v.name, v.text) for v in entity[1].views] == [("concept", "dietary restriction")]
    assert [(v.name, v.text) for v in bridge[0].views] == [
        ("bridge", "Choosing a restaurant for the team dinner. (Caroline)"),  # the item's names it lacks
        ("joint", "food allergy | Choosing a restaurant for the team dinner. | because a colleague cannot eat seafood"),
    ]
    assert len({r.id for r in records}) == 4 and all(r.host_kind == "item" and r.host_id == "i1" for r in records)
    assert bridge[0].fields["bridge"] == "Choosing a restaurant for the team dinner."  # as the model wrote it
    named = item_trigger_records(ITEM, [TUP.model_copy(update={"bridge": "Booking a table for Caroline's team."})])
    assert named[1].views[0].text == "Booking a table for Caroline's team."  # nothing to add


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([ItemTriggersOut(item="I2", triggers=[TUP, TUP])], "must list"),
        ([ItemTriggersOut(item="I1", triggers=[TUP])], "exactly 2 triggers, got 1"),
        ([ItemTriggersOut(item="I1", triggers=[TUP, TUP.model_copy(update={"bridge": " "})])], "bridge is empty"),
    ],
)
def test_invalid_item_trigger_replies(entries: list[ItemTriggersOut], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_item_reply(ItemTriggerReply(items=entries), ["I1"], 2)


def test_scene_triggers_become_scene_and_horizon_records() -> None:
    scene = Scene(id="sc1", seq=0, title="t", summary="s", narrative="n", turn_ids=["D1:1"], start=T0, end=T0)
    scn, hor = scene_trigger_records(scene, SCENE_OUT)
    assert scn.family is TriggerFamily.SCENE and [v.name for v in scn.views] == [
        "situation",
        "object",
        "event",
        "emotion",
    ]
    assert hor.family is TriggerFamily.HORIZON and [(v.name, v.text) for v in hor.views] == [
        ("horizon:0", "Choosing a gift for Melanie."),
        ("horizon:1", "Visiting a gallery."),
    ]
    assert scn.host_kind == hor.host_kind == "scene"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (SCENE_OUT.model_copy(update={"scene": "S2"}), "must list"),
        (SCENE_OUT.model_copy(update={"emotion": ""}), "emotion is empty"),
        (SCENE_OUT.model_copy(update={"horizon": ["only one"]}), "horizon needs 2 to 3"),
        (SCENE_OUT.model_copy(update={"horizon": ["a", "b", "c", "d"]}), "horizon needs 2 to 3"),
        (SCENE_OUT.model_copy(update={"horizon": ["a", " "]}), "horizon needs 2 to 3"),
    ],
)
def test_invalid_scene_trigger_replies(entry: SceneTriggerOut, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_scene_reply(SceneTriggerReply(scenes=[entry]), ["S1"], 3)


def _store() -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("s"))
    store.set_speakers(Scope.local("s"), ["Caroline", "Melanie"])
    store.add_session(
        Scope.local("s"),
        Session(id="x", seq=0, started_at=T0, content_hash="h"),
        [Turn(id="D1:1", session_id="x", seq=0, speaker="Caroline", text="t", time=T0)],
    )
    store.put_scenes(
        Scope.local("s"),
        [
            Scene(
                id="sc1",
                seq=0,
                title="t",
                summary="s",
                narrative="On 8 May 2023 ...",
                turn_ids=["D1:1"],
                start=T0,
                end=T0,
            )
        ],
    )
    store.put_items(
        Scope.local("s"),
        [ITEM.model_copy(update={"id": f"i{k}", "seq": k, "text": f"Caroline fact {k}."}) for k in range(5)],
    )
    return store


async def test_trigger_stages_group_nodes_and_only_serve_nodes_without_triggers() -> None:
    store = _store()

    def reply(request: ChatRequest) -> str:
        user = request.messages[1].content
        if "<items>" in user:
            refs = [line.split("]")[0][1:] for line in user.splitlines() if line.startswith("[I")]
            return ItemTriggerReply(items=[ItemTriggersOut(item=r, triggers=[TUP] * 3) for r in refs]).model_dump_json()
        return SceneTriggerReply(scenes=[SCENE_OUT]).model_dump_json()

    llm = scripted_llm(store, fn=reply)
    options = BuildOptions(items_per_trigger_call=2)
    await run_item_triggers(
        store, Scope.local("s"), StageRun("triggers.item", llm, Scope.local("s"), 2, False), options
    )
    await run_scene_triggers(
        store, Scope.local("s"), StageRun("triggers.scene", llm, Scope.local("s"), 2, False), options
    )
    assert len(llm.backend.requests) == 3 + 1  # type: ignore[attr-defined]  # 5 items in groups of 2, one scene
    assert len(store.triggers(Scope.local("s"), family=TriggerFamily.BRIDGE)) == 15
    assert len(store.triggers(Scope.local("s"), family=TriggerFamily.HORIZON, host_ids=["sc1"])) == 1
    store.put_items(Scope.local("s"), [ITEM.model_copy(update={"id": "i9", "seq": 9, "text": "Caroline fact 9."})])
    await run_item_triggers(
        store, Scope.local("s"), StageRun("triggers.item", llm, Scope.local("s"), 2, False), options
    )
    await run_scene_triggers(
        store, Scope.local("s"), StageRun("triggers.scene", llm, Scope.local("s"), 2, False), options
    )
    assert len(llm.backend.requests) == 5  # type: ignore[attr-defined]  # only the new item was sent
    assert "[I1] Caroline fact 9." in llm.backend.requests[-1].messages[1].content  # type: ignore[attr-defined]


ITEMS = {"I1": ITEM, "I2": ITEM.model_copy(update={"id": "i2"})}
PRIOR = {"P1": PersonaTrait(category="hobbies", value="Paints", item_ids=["i0"])}


def test_persona_support_resolves_items_and_earlier_traits() -> None:
    reply = PersonaReply(
        summary="Caroline ...",
        traits=[
            TraitOut(category="health", value="Colleague's allergy matters to her", support=["I1", "[i2]"]),
            TraitOut(category="hobbies", value="Paints landscapes", support=["P1", "I2"]),
        ],
    )
    traits = check_reply(reply, ITEMS, PRIOR)
    assert [t.item_ids for t in traits] == [["i1", "i2"], ["i0", "i2"]]


@pytest.mark.parametrize(
    ("traits", "summary", "message"),
    [
        ([TraitOut(category="goals", value="x", support=["I3"])], "s", "is not a given reference"),
        ([TraitOut(category="goals", value="x", support=[])], "s", "cites no support"),
        ([TraitOut(category="goals", value=" ", support=["I1"])], "s", "value is empty"),
        ([], " ", "summary is empty"),
    ],
)
def test_invalid_persona_replies(traits: list[TraitOut], summary: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reply(PersonaReply(summary=summary, traits=traits), ITEMS, PRIOR)


async def test_persona_folds_chunks_and_skips_superseded_items() -> None:
    store = _store()
    store.put_items(
        Scope.local("s"), [store.items(Scope.local("s"), ["i4"])[0].model_copy(update={"superseded_by": "i3"})]
    )

    def reply(request: ChatRequest) -> str:
        user = request.messages[1].content
        support = ["P1", "I1"] if "[P1]" in user else ["I1", "I2"]
        return PersonaReply(
            summary="Caroline.", traits=[TraitOut(category="goals", value="Adopt", support=support)]
        ).model_dump_json()

    llm = scripted_llm(store, fn=reply)
    await run_persona(
        store,
        Scope.local("s"),
        StageRun("persona", llm, Scope.local("s"), 2, False),
        BuildOptions(persona_items_per_call=3),
    )
    first, second = llm.backend.requests  # type: ignore[attr-defined]  # Melanie has no items: no call
    (persona,) = store.personas(Scope.local("s"))
    assert persona.speaker == "Caroline" and persona.traits[0].item_ids == ["i0", "i1", "i3"]
    assert "[P1] goals: Adopt" in second.messages[1].content and "[I1] Caroline fact 3." in second.messages[1].content
    assert all("fact 4" not in r.messages[1].content for r in (first, second))


async def test_superseded_items_get_no_triggers() -> None:
    """A superseded item is left out of every index, so paying for its triggers would be wasted calls."""
    store = _store()
    store.put_items(
        Scope.local("s"), [store.items(Scope.local("s"), ["i4"])[0].model_copy(update={"superseded_by": "i3"})]
    )

    def reply(request: ChatRequest) -> str:
        user = request.messages[1].content
        refs = [line.split("]")[0][1:] for line in user.splitlines() if line.startswith("[I")]
        return ItemTriggerReply(items=[ItemTriggersOut(item=r, triggers=[TUP] * 3) for r in refs]).model_dump_json()

    llm = scripted_llm(store, fn=reply)
    run = StageRun("triggers.item", llm, Scope.local("s"), 2, False)
    await run_item_triggers(store, Scope.local("s"), run, BuildOptions(items_per_trigger_call=10))
    (request,) = llm.backend.requests  # type: ignore[attr-defined]
    assert "fact 4" not in request.messages[1].content
    assert {t.host_id for t in store.triggers(Scope.local("s"), family=TriggerFamily.ENTITY)} == {
        "i0",
        "i1",
        "i2",
        "i3",
    }
    assert run.report.skipped == 1
