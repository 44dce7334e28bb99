"""Reads that assemble an index see one committed state (issue 33, item 2): a build that commits between two of the
reads - made deterministic by a hook on the reading store that commits it through a second store (another
connection, as another server would) right after the first read - changes nothing the reader gets: it sees the
space wholly before the build. Run on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tmem.index.space import SpaceRecords, load_space
from tmem.models import Item, ItemKind, Scene, Session, Topic, TopicSceneLink, Trigger, TriggerFamily, TriggerView, Turn
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store

T0 = datetime(2024, 3, 1, 9, 0)
SPACE = Scope.local("built")


def _generation(store: Store, n: int) -> None:
    """Replace the space's memory with generation ``n``: topic, scene, item and trigger all named ``...{n}``, as a
    rebuild does (the old nodes go, the new ones come, in one transaction)."""
    with store.transaction():
        old = [s.id for s in store.scenes(SPACE)]
        store.delete_items(SPACE, [i.id for i in store.items(SPACE)])
        store.delete_scenes(SPACE, old)
        store.delete_topics(SPACE, [t.id for t in store.topics(SPACE)])
        scene = Scene(
            id=f"s{n}", seq=n, title="t", summary="s", narrative="n", turn_ids=["m:0", "m:1"], start=T0, end=T0
        )
        store.put_scenes(SPACE, [scene])
        store.put_topics(SPACE, [Topic(id=f"t{n}", seq=n, label="pets")])
        store.link_topics(SPACE, [TopicSceneLink(topic_id=f"t{n}", scene_id=f"s{n}")])
        store.put_items(SPACE, [Item(id=f"i{n}", text="x", kind=ItemKind.ATOMIC, scene_ids=[f"s{n}"])])
        view = TriggerView(name="concept", text="pet")
        trigger = Trigger(id=f"e{n}", family=TriggerFamily.ENTITY, host_kind="item", host_id=f"i{n}", views=[view])
        store.put_triggers(SPACE, [trigger])


@pytest.fixture
def stores(store_url: str) -> Iterator[tuple[Store, Store]]:
    reader, builder = open_store(store_url), open_store(store_url)
    builder.ensure_space(SPACE)
    session = Session(id="s", seq=0, started_at=T0, content_hash="h")
    turns = [
        Turn(id=f"m:{i}", session_id="s", seq=i, speaker="Ann", text=f"turn {i}", time=T0 + timedelta(minutes=i))
        for i in range(2)
    ]
    builder.add_session(SPACE, session, turns)
    _generation(builder, 1)
    yield reader, builder
    reader.close()
    builder.close()


def _after_first_call(reader: Store, name: str, commit: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Hook: the reader's method ``name`` commits ``commit`` (through another store) right after its first call."""
    original = getattr(reader, name)
    fired: list[bool] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if not fired:
            fired.append(True)
            commit()
        return out

    monkeypatch.setattr(reader, name, hooked)


def _ids(records: SpaceRecords) -> dict[str, list[str]]:
    return {
        "topics": [t.id for t in records.topics],
        "scenes": [s.id for s in records.scenes],
        "items": [i.id for i in records.items],
        "item scenes": [s for i in records.items for s in i.scene_ids],
        "links": [f"{link.topic_id}-{link.scene_id}" for link in records.links],
        "triggers": [t.id for t in records.triggers],
    }


def test_load_space_reads_one_committed_state_while_a_build_commits(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, builder = stores
    # topics and scenes are read first: the rebuild commits right after them, before the items, links and triggers
    _after_first_call(reader, "scenes", lambda: _generation(builder, 2), monkeypatch)
    records = load_space(reader, SPACE)
    assert _ids(records) == {
        "topics": ["t1"],
        "scenes": ["s1"],
        "items": ["i1"],
        "item scenes": ["s1"],
        "links": ["t1-s1"],
        "triggers": ["e1"],
    }
    assert [i.id for i in builder.items(SPACE)] == ["i2"]  # the build did commit
    assert _ids(load_space(reader, SPACE))["triggers"] == ["e2"]  # and the next load sees it whole


def test_a_record_and_its_links_are_read_in_one_state(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item read while a rebuild commits between its row and its scene links (the ValidationError of an item
    with no scenes): the store's own two reads are one state too."""
    reader, builder = stores
    _after_first_call(reader, "_records", lambda: _generation(builder, 2), monkeypatch)
    items = reader.items(SPACE)
    assert [(i.id, i.scene_ids) for i in items] == [("i1", ["s1"])]
