"""Parsing and storage on realistic content: hand-written replies (tests/fixtures/handwritten/, labelled as such) that
a capable model would give to tmem's prompts for LoCoMo conv-26 sessions 1-2."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.stage_replies import dev_space
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.importer import import_spaces
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.models import ItemKind, TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

HERE = Path(__file__).parent / "fixtures" / "handwritten"
FIXTURE = json.loads((HERE / "conv26_sessions_1_2.json").read_text(encoding="utf-8"))
SESSION_3 = json.loads((HERE / "conv26_session_3_incremental.json").read_text(encoding="utf-8"))
SPACE = "conv-26"
OPTIONS = BuildOptions(items_per_trigger_call=20, item_triggers_n=2, scenes_per_trigger_call=4)


def _by_prefix(table: dict[str, Any], text: str) -> Any:
    (hit,) = [v for k, v in table.items() if text.startswith(k)]
    return hit


def handwritten(request: ChatRequest, fixture: dict[str, Any] = FIXTURE) -> str:
    """Routes each request to its hand-written reply (the routing reads the request; the content is the fixture's)."""
    system, user = request.messages[0].content, request.messages[1].content
    if "scene segmenter" in system:
        return json.dumps(fixture["segment"])
    if "topic labels" in system:
        return json.dumps(fixture["topics"])
    if "extract the memory items" in system:
        topic = re.search(r"^Topic: <topic>(.*)</topic>$", user, flags=re.M)[1]  # type: ignore[index]
        return json.dumps(_by_prefix(fixture["items"], topic))
    if "triggers for the items" in system:
        items = re.findall(r"^\[(I\d+)\] (.*)$", user, flags=re.M)
        return json.dumps(
            {"items": [{"item": ref, "triggers": _by_prefix(fixture["item_triggers"], text)} for ref, text in items]}
        )
    if "triggers for the scenes" in system:
        scenes = re.findall(r"^\[(S\d+)\] [^·]+· (.*)$", user, flags=re.M)
        return json.dumps({"scenes": [{"scene": ref, **fixture["scene_triggers"][title]} for ref, title in scenes]})
    speaker = re.search(r"^Speaker: <speaker>(.*)</speaker>$", user, flags=re.M)[1]  # type: ignore[index]
    facts = re.findall(r"^\[(I\d+)\] (.*)$", user, flags=re.M)
    persona = fixture["persona"][speaker]
    traits = [
        {**t, "support": [next(ref for ref, text in facts if cue in text) for cue in t["support"]]}
        for t in persona["traits"]
    ]
    return json.dumps({"summary": persona["summary"], "traits": traits})


async def test_handwritten_replies_parse_and_store() -> None:
    store = SQLiteStore.open(":memory:")
    import_spaces(store, [dev_space(SPACE, slice(0, 2))], source="dev")
    llm = scripted_llm(store, fn=handwritten)
    report = await build_space(store, Scope.local(SPACE), llm=llm, embedder=HashEmbedder(), options=OPTIONS)

    requests = llm.backend.requests  # type: ignore[attr-defined]
    assert [r.stage for r in requests].count("items") == 6 and len(requests) == 1 + 1 + 6 + 1 + 1 + 2
    for r in requests:  # conversation text is fenced as data, every placeholder filled
        assert "$" not in r.messages[0].content.replace("$$", "")
        assert re.search(r"<(conversation|scenes|items|facts)>", r.messages[1].content)
        assert "never instructions" in r.messages[0].content
    assert all(c.outcome == "ok" for c in store.llm_calls(Scope.local(SPACE)))

    scenes = store.scenes(Scope.local(SPACE))
    assert [(s.turn_ids[0], s.turn_ids[-1]) for s in scenes] == [
        ("D1:1", "D1:11"),
        ("D1:12", "D1:18"),
        ("D2:1", "D2:7"),
        ("D2:8", "D2:17"),
    ]
    assert [tid for s in scenes for tid in s.turn_ids] == [t.id for t in store.turns(Scope.local(SPACE))]
    assert scenes[2].start.date().isoformat() == "2023-05-25" and "20 May 2023" in scenes[2].narrative

    topics = {t.id: t for t in store.topics(Scope.local(SPACE))}
    assert len(topics) == 6 and all(t.description for t in topics.values())
    per_scene: dict[str, list[str]] = {}
    for link in store.topic_links(Scope.local(SPACE)):
        per_scene.setdefault(link.scene_id, []).append(topics[link.topic_id].label)
    assert [len(per_scene[s.id]) for s in scenes] == [2, 2, 2, 2]
    assert "Melanie's family life with her kids" in per_scene[scenes[2].id]  # matched case-insensitively
    assert "Caroline's LGBTQ community and identity" in per_scene[scenes[3].id]  # admitted to an existing label

    items = store.items(Scope.local(SPACE))
    assert len(items) == 15 and report.counts["items_connected"] == 2
    for it in items:
        assert (it.kind is ItemKind.ATOMIC) == (len(it.scene_ids) == 1) and it.turn_ids and it.date
    bridge = next(it for it in items if it.text.startswith("Caroline's LGBTQ support carried"))
    assert bridge.scene_ids == [scenes[0].id, scenes[3].id] and bridge.turn_ids == ["D1:7", "D2:12"]
    race = next(it for it in items if "charity race" in it.text)
    assert race.date == "2023-05-20" and race.scene_ids == [scenes[2].id] and race.speaker == "Melanie"

    entity = store.triggers(Scope.local(SPACE), family=TriggerFamily.ENTITY, host_ids=[bridge.id])
    brg = store.triggers(Scope.local(SPACE), family=TriggerFamily.BRIDGE, host_ids=[bridge.id])
    assert [t.group for t in entity] == [0, 1] and [v.name for v in entity[0].views] == ["concept"]
    assert entity[0].views[0].text == "identity shaping life plans"
    assert [v.name for v in brg[1].views] == ["bridge", "joint"]
    assert brg[1].views[1].text.startswith("LGBTQ+ parenting | Finding playgroups")
    assert brg[1].fields["rationale"] == "because Caroline plans to adopt as an LGBTQ+ single parent"
    assert len(store.triggers(Scope.local(SPACE), family=TriggerFamily.BRIDGE)) == 30
    (scn,) = store.triggers(Scope.local(SPACE), family=TriggerFamily.SCENE, host_ids=[scenes[3].id])
    (hor,) = store.triggers(Scope.local(SPACE), family=TriggerFamily.HORIZON, host_ids=[scenes[3].id])
    assert [v.name for v in scn.views] == ["situation", "object", "event", "emotion"]
    assert [v.name for v in hor.views] == ["horizon:0", "horizon:1", "horizon:2", "horizon:3"]
    assert "adoption" in hor.views[0].text

    personas = {p.speaker: p for p in store.personas(Scope.local(SPACE))}
    ids = {it.id for it in items}
    goals = next(t for t in personas["Caroline"].traits if t.category == "goals")
    assert len(goals.item_ids) == 2 and set(goals.item_ids) <= ids
    assert all(set(t.item_ids) <= ids and t.item_ids for p in personas.values() for t in p.traits)
    assert [t.category for t in personas["Melanie"].traits] == ["relationships", "hobbies", "hobbies", "values"]


async def test_handwritten_incremental_session_keeps_the_closed_tail_and_extends_topics_and_items() -> None:
    store = SQLiteStore.open(":memory:")
    import_spaces(store, [dev_space(SPACE, slice(0, 2))], source="dev")
    await build_space(
        store, Scope.local(SPACE), llm=scripted_llm(store, fn=handwritten), embedder=HashEmbedder(), options=OPTIONS
    )
    before = {it.id for it in store.items(Scope.local(SPACE))}
    tail = store.scenes(Scope.local(SPACE))[-1]

    import_spaces(store, [dev_space(SPACE, slice(2, 3))], source="dev")
    llm = scripted_llm(store, fn=lambda request: handwritten(request, SESSION_3))
    report = await build_space(store, Scope.local(SPACE), llm=llm, embedder=HashEmbedder(), options=OPTIONS)
    stages = [r.stage for r in llm.backend.requests]  # type: ignore[attr-defined]
    assert stages == ["segment", "topics", *["items"] * 5, "triggers.item", "triggers.scene", "persona", "persona"]
    first = llm.backend.requests[0].messages[1].content  # type: ignore[attr-defined]
    assert first.index("[D2:8]") < first.index("--- session_3") and "last turns recorded so far" in first

    scenes = store.scenes(Scope.local(SPACE))
    assert scenes[3] == tail and report.stages[0].skipped == 1  # the re-examined tail closed where it did
    assert [(s.turn_ids[0], s.turn_ids[-1]) for s in scenes[4:]] == [
        ("D3:1", "D3:9"),
        ("D3:10", "D3:13"),
        ("D3:14", "D3:23"),
    ]
    topics = {t.label: t for t in store.topics(Scope.local(SPACE))}
    assert len(topics) == 9 and topics["Caroline's LGBTQ community and identity"].seq == 0
    items_call = next(
        r.messages[1].content
        for r in llm.backend.requests  # type: ignore[attr-defined]
        if r.stage == "items" and "Topic: <topic>Caroline's LGBTQ community and identity" in r.messages[1].content
    )
    assert "[S1] 8 May 2023 · Caroline tells Melanie" in items_call and "[S3] (new) 9 June 2023" in items_call
    assert "[E5] Caroline's LGBTQ support carried into her family plans" in items_call

    items = store.items(Scope.local(SPACE))
    added = [it for it in items if it.id not in before]
    assert len(added) == 10 and all(it.seq >= len(before) for it in added)
    arc = next(it for it in added if it.text.startswith("Caroline went from finding acceptance"))
    assert arc.kind is ItemKind.CONNECTED and arc.scene_ids == [scenes[0].id, scenes[4].id]
    family = next(it for it in added if it.text.startswith("Family time is central"))
    assert family.scene_ids == [scenes[1].id, scenes[2].id, scenes[6].id]
    assert len(store.triggers(Scope.local(SPACE), family=TriggerFamily.ENTITY)) == 2 * 25
    assert len(store.triggers(Scope.local(SPACE), family=TriggerFamily.HORIZON)) == 7
    caroline = next(p for p in store.personas(Scope.local(SPACE)) if p.speaker == "Caroline")
    assert any("home country" in t.value for t in caroline.traits) and "transgender" in caroline.summary
