"""Topic assignment: validation paths, arrival order inside one call, label identity, multi-label links."""

from __future__ import annotations

from datetime import datetime

import pytest

from tmem.construct.common import StageRun
from tmem.construct.options import BuildOptions
from tmem.construct.topics import SceneTopics, TopicChoice, TopicReply, check_reply, label_key, run_topics, topic_id
from tmem.llm.scripted import scripted_llm
from tmem.models import Scene, Session, Topic, Turn
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2023, 5, 8, 13, 56)
EXISTING = [Topic(id=topic_id("Melanie's painting"), seq=0, label="Melanie's painting", description="Her art.")]


def _a(ref: str, *choices: tuple[str, str | None]) -> SceneTopics:
    return SceneTopics(scene=ref, topics=[TopicChoice(label=label, description=d) for label, d in choices])


def test_label_identity_ignores_case_spacing_and_trailing_punctuation() -> None:
    assert label_key("  Melanie's   PAINTING. ") == label_key("melanie's painting")
    assert topic_id("Melanie's Painting") == topic_id("melanie's  painting")


def test_arrival_order_inside_one_call() -> None:
    reply = TopicReply(
        assignments=[
            _a("S1", ("Caroline's adoption plans", "Adopting children."), ("melanie's painting", None)),
            _a("[s2]", ("CAROLINE'S ADOPTION PLANS", None)),  # opened by S1 in the same reply: existing for S2
        ]
    )
    picks = check_reply(reply, ["S1", "S2"], EXISTING)
    assert [[c.label for c in p] for p in picks] == [
        ["Caroline's adoption plans", "melanie's painting"],
        ["CAROLINE'S ADOPTION PLANS"],
    ]


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ([_a("S2", ("Melanie's painting", None)), _a("S1", ("Melanie's painting", None))], "once each, in order"),
        ([_a("S1", ("Melanie's painting", None))], "once each, in order"),
        ([_a("S1", ("New label", None)), _a("S2", ("Melanie's painting", None))], "needs a one-sentence description"),
        ([_a("S1", ("New label", "  ")), _a("S2", ("Melanie's painting", None))], "needs a one-sentence description"),
        ([_a("S1", (" ", "x")), _a("S2", ("Melanie's painting", None))], "label is empty"),
        ([_a("S1"), _a("S2", ("Melanie's painting", None))], "give 1 to 3 distinct labels, got 0"),
        ([_a("S1", ("a", "x"), ("b", "x"), ("c", "x"), ("d", "x")), _a("S2", ("a", None))], "got 4"),
    ],
)
def test_invalid_replies_are_rejected(assignments: list[SceneTopics], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reply(TopicReply(assignments=assignments), ["S1", "S2"], EXISTING)


def test_duplicate_labels_for_one_scene_collapse() -> None:
    reply = TopicReply(assignments=[_a("S1", ("Melanie's painting", None), ("MELANIE'S PAINTING", None))])
    assert len(check_reply(reply, ["S1"], EXISTING)[0]) == 1


async def test_run_topics_groups_scenes_in_arrival_order_and_links_them() -> None:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("s"))
    turns = [Turn(id=f"D1:{i}", session_id="x", seq=i, speaker="Caroline", text="t", time=T0) for i in range(3)]
    store.add_session(Scope.local("s"), Session(id="x", seq=0, started_at=T0, content_hash="h"), turns)
    store.put_scenes(
        Scope.local("s"),
        [
            Scene(
                id=f"sc{i}",
                seq=i,
                title=f"Scene {i}",
                summary="s",
                narrative="n",
                turn_ids=[f"D1:{i}"],
                start=T0,
                end=T0,
            )
            for i in range(3)
        ],
    )
    replies = [
        TopicReply(assignments=[_a("S1", ("Adoption", "Adopting.")), _a("S2", ("adoption", None), ("Art", "Art."))]),
        TopicReply(assignments=[_a("S1", ("Art", None))]),
    ]
    llm = scripted_llm(store, replies=replies)
    await run_topics(
        store,
        Scope.local("s"),
        StageRun("topics", llm, Scope.local("s"), 1, False),
        BuildOptions(topic_scenes_per_call=2),
    )
    topics = store.topics(Scope.local("s"))
    assert [(t.seq, t.label) for t in topics] == [(0, "Adoption"), (1, "Art")]
    links = {(lk.topic_id, lk.scene_id) for lk in store.topic_links(Scope.local("s"))}
    assert links == {
        (topic_id("Adoption"), "sc0"),
        (topic_id("Adoption"), "sc1"),
        (topic_id("Art"), "sc1"),
        (topic_id("Art"), "sc2"),
    }
    second = llm.backend.requests[1].messages[1].content  # type: ignore[attr-defined]
    assert "- Adoption: Adopting.\n- Art: Art." in second and "[S1]" in second and "Scene 2" in second
