"""The store contract, run on every backend (SQLite file and PostgreSQL via the ``store_url`` fixture): round trips,
isolation between spaces, invariants, transactions. SQLite-only behaviour is at the end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem.errors import IntegrityError, NotFoundError, SpaceNotFound, StoreError
from tmem.models import (
    Item,
    ItemEdit,
    ItemKind,
    LLMCall,
    PendingRequest,
    Persona,
    PersonaTrait,
    Scene,
    Session,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store
from tmem.store.sqlite import SQLiteStore

T0 = datetime(2023, 5, 8, 13, 56)


def _seed(store: Store, space: str, n_turns: int = 4) -> list[Turn]:
    store.ensure_space(Scope.local(space))
    session = Session(id="session_1", seq=0, started_at=T0, content_hash="h1")
    turns = [
        Turn(
            id=f"D1:{i + 1}",
            session_id="session_1",
            seq=i,
            speaker="Caroline" if i % 2 == 0 else "Melanie",
            text=f"turn {i} in {space}",
            time=T0 + timedelta(minutes=i),
            caption="a photo of a dog" if i == 1 else None,
        )
        for i in range(n_turns)
    ]
    store.add_session(Scope.local(space), session, turns)
    return turns


def _scene(sid: str, turn_ids: list[str], seq: int = 0) -> Scene:
    return Scene(
        id=sid, seq=seq, title="t", summary="s", narrative="n", turn_ids=turn_ids, start=T0, end=T0 + timedelta(hours=1)
    )


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def test_turns_round_trip_and_summary(store: Store) -> None:
    turns = _seed(store, "a")
    assert store.turns(Scope.local("a")) == turns
    assert store.turns(Scope.local("a"), ["D1:2"]) == [turns[1]]
    with pytest.raises(NotFoundError):
        store.turns(Scope.local("a"), ["D9:9"])
    (summary,) = store.list_spaces()
    assert (summary.sessions, summary.turns, summary.build_state) == (1, 4, "not built")
    store.set_state(Scope.local("a"), "build.mode", "extractive")
    store.set_state(Scope.local("a"), "build.sessions", "1")
    assert store.list_spaces()[0].build_state == "built"


def test_every_turn_in_one_scene(store: Store) -> None:
    _seed(store, "a")
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1", "D1:2"])])
    with pytest.raises(IntegrityError, match="exactly one scene"):
        store.put_scenes(Scope.local("a"), [_scene("s2", ["D1:2", "D1:3"], seq=1)])
    assert [s.id for s in store.scenes(Scope.local("a"))] == ["s1"]  # the failed write left nothing behind
    with pytest.raises(IntegrityError):
        store.put_scenes(Scope.local("a"), [_scene("s3", ["D7:1"], seq=2)])  # not a turn of the space


def test_upsert_scene_replaces_turns_and_keeps_links(store: Store) -> None:
    _seed(store, "a")
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1", "D1:2"])])
    store.put_topics(Scope.local("a"), [Topic(id="t1", seq=0, label="pets")])
    store.link_topics(Scope.local("a"), [TopicSceneLink(topic_id="t1", scene_id="s1")])
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1", "D1:2", "D1:3"])])
    assert store.scenes(Scope.local("a"))[0].turn_ids == ["D1:1", "D1:2", "D1:3"]
    assert store.topic_links(Scope.local("a")) == [TopicSceneLink(topic_id="t1", scene_id="s1")]


def test_delete_scene_cascades(store: Store) -> None:
    _seed(store, "a")
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1"]), _scene("s2", ["D1:2"], 1)])
    store.put_topics(Scope.local("a"), [Topic(id="t1", seq=0, label="x")])
    store.link_topics(Scope.local("a"), [TopicSceneLink(topic_id="t1", scene_id="s1")])
    store.put_triggers(
        Scope.local("a"),
        [
            Trigger(
                id="tr1",
                family=TriggerFamily.HORIZON,
                host_kind="scene",
                host_id="s1",
                views=[TriggerView(name="horizon:0", text="planning a trip")],
            )
        ],
    )
    store.delete_scenes(Scope.local("a"), ["s1"])
    assert [s.id for s in store.scenes(Scope.local("a"))] == ["s2"]
    assert store.topic_links(Scope.local("a")) == [] and store.triggers(Scope.local("a")) == []


def test_atomic_item_needs_one_scene(store: Store) -> None:
    _seed(store, "a")
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1"]), _scene("s2", ["D1:2"], 1)])
    with pytest.raises(IntegrityError):
        store.put_items(Scope.local("a"), [Item(id="i1", text="x", kind=ItemKind.ATOMIC, scene_ids=["s1", "s2"])])
    item = Item(id="i2", text="y", kind=ItemKind.CONNECTED, scene_ids=["s2", "s1"], date="2023-05-07")
    store.put_items(Scope.local("a"), [item])
    assert store.items(Scope.local("a")) == [item]


def test_spaces_are_isolated(store: Store) -> None:
    _seed(store, "a")
    _seed(store, "b", n_turns=2)
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1"])])
    store.put_scenes(Scope.local("b"), [_scene("s1", ["D1:1"])])  # same ids in another space do not collide
    store.put_persona(
        Scope.local("a"), Persona(speaker="Caroline", traits=[PersonaTrait(category="identity", value="x")])
    )
    assert store.personas(Scope.local("b")) == []
    assert len(store.turns(Scope.local("b"))) == 2
    store.delete_space(Scope.local("a"))
    assert [s.name for s in store.list_spaces()] == ["b"]
    assert [s.id for s in store.scenes(Scope.local("b"))] == ["s1"]
    with pytest.raises(NotFoundError, match="Known spaces: b"):
        store.get_space(Scope.local("a"))


def test_missing_space_names_only_the_asking_tenants_spaces(store: Store) -> None:
    """issue 20 High 1: a tenant's missing space never lists another tenant's spaces or any store key."""
    for key in ("acme/alice", "acme/big", "bobco/notes", "plain"):
        store.ensure_space(Scope.local(key))
    with pytest.raises(SpaceNotFound) as caught:
        store.get_space(Scope.local("bobco/gone"))
    err = caught.value
    assert (err.tenant, err.space, err.known) == ("bobco", "gone", ("notes",))
    assert "acme" not in str(err) and "bobco/" not in str(err) and "plain" not in str(err)
    with pytest.raises(SpaceNotFound) as caught:
        store.get_space(Scope.local("carol/x"))
    assert caught.value.known == () and "acme" not in str(caught.value) and "bobco" not in str(caught.value)
    with pytest.raises(SpaceNotFound, match=r"Known spaces: plain\.") as caught:
        store.get_space(Scope.local("nothere"))
    assert caught.value.tenant == ""


def test_transaction_rolls_back_everything(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    with pytest.raises(RuntimeError), store.transaction():
        store.set_state(Scope.local("a"), "k", "v")
        store.put_topics(Scope.local("a"), [Topic(id="t", seq=0, label="l")])
        raise RuntimeError("boom")
    assert store.get_state(Scope.local("a"), "k") is None and store.topics(Scope.local("a")) == []


def test_llm_log_cache_and_pending(store: Store) -> None:
    call = LLMCall(
        space="a",
        stage="segment",
        model="m",
        request_hash="h",
        tokens_in=10,
        tokens_out=2,
        latency_ms=1.0,
        attempts=1,
        outcome="ok",
        created_at=T0,
        response='{"x": 1}',
    )
    store.log_llm_call(call)
    assert store.cached_response(Scope.local("a"), "h") == '{"x": 1}'
    assert store.cached_response(Scope.local("b"), "h") is None  # the cache is per space
    store.put_pending([PendingRequest(space="a", stage="items", request_hash="p", body="{}")])
    assert [p.request_hash for p in store.pending(Scope.local("a"))] == ["p"]
    store.delete_pending(["p"])
    assert store.pending() == [] and store.llm_calls(Scope.local("a")) == [call]


def test_state_prefix_is_literal(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    store.set_state(Scope.local("a"), "build.mode", "llm")
    store.set_state(Scope.local("a"), "buildXmode", "other")
    assert store.state_keys(Scope.local("a"), "build.") == {"build.mode": "llm"}


def test_reopen_persists(store_url: str) -> None:
    s = open_store(store_url)
    _seed(s, "a")
    s.close()
    s2 = open_store(store_url)
    assert len(s2.turns(Scope.local("a"))) == 4
    s2.close()


# PostgreSQL text cannot hold NUL, and lone surrogates are not UTF-8 (no backend can store them); every other
# character must round-trip.
_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), min_size=1, max_size=30)
_examples = itertools.count()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    vectors=st.dictionaries(
        st.text(alphabet="0123456789abcdef", min_size=4, max_size=8),
        st.lists(st.floats(-1, 1, width=32), min_size=3, max_size=3),
        max_size=5,
    ),
    traits=st.lists(st.tuples(_text, _text), max_size=4),
    views=st.lists(st.tuples(_text, _text), min_size=1, max_size=4),
)
def test_round_trips_are_lossless(
    store: Store, vectors: dict[str, list[float]], traits: list[tuple[str, str]], views: list[tuple[str, str]]
) -> None:
    a = f"a{next(_examples)}"  # one space per example: the store fixture is shared by the examples
    _seed(store, a)
    store.put_scenes(Scope.local(a), [_scene("s1", ["D1:1", "D1:3"])])
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
    store.put_embeddings(Scope.local(a), "m", arrays)
    got = store.get_embeddings(Scope.local(a), "m", [*list(arrays), "missing"])
    assert set(got) == set(arrays) and all(np.array_equal(got[k], arrays[k]) for k in arrays)
    persona = Persona(speaker="C", traits=[PersonaTrait(category=c, value=v, item_ids=["i"]) for c, v in traits])
    store.put_persona(Scope.local(a), persona)
    assert store.personas(Scope.local(a)) == [persona]
    trig = Trigger(
        id="t",
        family=TriggerFamily.SCENE,
        host_kind="scene",
        host_id="s1",
        fields={n: t for n, t in views},
        views=[TriggerView(name=n, text=t) for n, t in views],
    )
    store.put_triggers(Scope.local(a), [trig])
    assert store.triggers(Scope.local(a)) == [trig]
    assert store.triggers(Scope.local(a), family=TriggerFamily.HORIZON) == []


def test_a_commit_that_fails_rolls_back_and_leaves_the_store_usable() -> None:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("a"))
    # Deferred foreign keys move the check to COMMIT: the one way to make a commit fail on demand.
    with store._driver() as db:
        db.execute("PRAGMA defer_foreign_keys = ON")
    with pytest.raises(StoreError, match="Nothing of it was written"):
        store.link_topics(Scope.local("a"), [TopicSceneLink(topic_id="no-topic", scene_id="no-scene")])
    assert store.topic_links(Scope.local("a")) == []
    store.ensure_space(Scope.local("b"))  # a new transaction starts: the failed one did not stay open
    assert store.has_space(Scope.local("b"))


def test_delete_space_leaves_no_trace_in_any_table(store: Store) -> None:
    """Deleting a space removes every row that names it (conversation, memory, embeddings, LLM log, pending
    requests, build state), in every table the schema has, and touches no other space."""
    for space in ("a", "b"):
        _seed(store, space)
        store.put_scenes(Scope.local(space), [_scene("s1", ["D1:1", "D1:2"])])
        store.put_topics(Scope.local(space), [Topic(id="t1", seq=0, label="dogs", description="d")])
        store.link_topics(Scope.local(space), [TopicSceneLink(topic_id="t1", scene_id="s1")])
        store.put_items(Scope.local(space), [Item(id="i1", text="x", kind=ItemKind.ATOMIC, scene_ids=["s1"])])
        store.put_triggers(
            Scope.local(space),
            [
                Trigger(
                    id="tr1",
                    family=TriggerFamily.ENTITY,
                    host_kind="item",
                    host_id="i1",
                    views=[TriggerView(name="concept", text="pet")],
                )
            ],
        )
        store.put_persona(Scope.local(space), Persona(speaker="Caroline", traits=[]))
        store.set_state(Scope.local(space), "build.mode", "llm")
        store.put_embeddings(Scope.local(space), "m", {"h": np.ones(4, dtype=np.float32)})
        store.log_llm_call(
            LLMCall(
                space=space,
                stage="s",
                model="m",
                request_hash="h",
                tokens_in=1,
                tokens_out=1,
                latency_ms=1.0,
                attempts=1,
                outcome="ok",
                created_at=T0,
                response="{}",
            )
        )
        store.put_pending([PendingRequest(space=space, stage="s", request_hash="p", body="{}")])
        store.add_tombstones(Scope.local(space), "turn", ["gone"])
        store.add_item_edit(Scope.local(space), ItemEdit(item_id="i1", version=1, old_text="a", new_text="b", at=T0))
        assert store.acquire_lease(Scope.local(space), "build", "me", 60.0, 0.0)
    # the service's control tables are keyed by tenant (tmem.store.control); the erasure ledger names the deleted
    # space on purpose, and nothing else (tests/test_edit_erasure_ledger.py): it is how other nodes learn to drop copies
    tables = [t for t in _space_tables(store) if not t.startswith("service_") and t != "erasures"]
    assert len(tables) >= 15  # every table of the schema that holds per-space rows

    def rows(space: str) -> dict[str, int]:
        return {t: _count(store, t, space) for t in tables}

    before_b = rows("b")
    assert all(before_b.values()), before_b  # the fixture fills every table
    store.delete_space(Scope.local("a"))
    assert rows("a") == dict.fromkeys(tables, 0)
    assert rows("b") == before_b


def test_filtered_triggers_carry_exactly_their_own_views(store: Store) -> None:
    _seed(store, "a")
    store.put_scenes(Scope.local("a"), [_scene("s1", ["D1:1"])])
    store.put_items(
        Scope.local("a"), [Item(id=f"i{n}", text="x", kind=ItemKind.ATOMIC, scene_ids=["s1"]) for n in (1, 2)]
    )
    store.put_triggers(
        Scope.local("a"),
        [
            Trigger(id="e1", family=TriggerFamily.ENTITY, host_kind="item", host_id="i1",
                    views=[TriggerView(name="concept", text="pet")]),
            Trigger(id="b1", family=TriggerFamily.BRIDGE, host_kind="item", host_id="i1",
                    views=[TriggerView(name="bridge", text="vet visit"), TriggerView(name="joint", text="pet | vet")]),
            Trigger(id="e2", family=TriggerFamily.ENTITY, host_kind="item", host_id="i2",
                    views=[TriggerView(name="concept", text="hobby")]),
        ],
    )  # fmt: skip

    def views(triggers: list[Trigger]) -> dict[str, list[str]]:
        return {t.id: [v.text for v in t.views] for t in triggers}

    assert views(store.triggers(Scope.local("a"), family=TriggerFamily.ENTITY)) == {"e1": ["pet"], "e2": ["hobby"]}
    assert views(store.triggers(Scope.local("a"), host_ids=["i1"])) == {"b1": ["vet visit", "pet | vet"], "e1": ["pet"]}
    assert views(store.triggers(Scope.local("a"), family=TriggerFamily.BRIDGE, host_ids=["i2"])) == {}
    assert len(views(store.triggers(Scope.local("a")))) == 3


def _space_tables(store: Store) -> list[str]:
    """Every table with a ``space`` column, read from the backend's catalogue."""
    if isinstance(store, SQLiteStore):
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%space TEXT%'"
        return [r[0] for r in store._rows(sql)]
    return [
        r[0]
        for r in store._rows(  # type: ignore[attr-defined]
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'space' "
            "AND table_schema = current_schema()"
        )
    ]


def _count(store: Store, table: str, space: str) -> int:
    if isinstance(store, SQLiteStore):
        return int(store._rows(f"SELECT COUNT(*) FROM {table} WHERE space = ?", (space,))[0][0])
    return int(store._rows(f"SELECT COUNT(*) FROM {table} WHERE space = %s", (space,))[0][0])  # type: ignore[attr-defined]


def test_text_that_is_not_utf8_is_a_store_error_and_writes_nothing(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    with pytest.raises(StoreError, match="not valid UTF-8"):
        store.put_topics(Scope.local("a"), [Topic(id="t1", seq=0, label="broken \ud800 escape")])
    assert store.topics(Scope.local("a")) == []
