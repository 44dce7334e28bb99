"""Contract of the id-scoped store methods behind messages, item edits, forgetting and the build lease.

Written against the ``store`` fixture only (no backend internals), so the same tests run on every backend: add a
parameter to the fixture (e.g. PostgreSQL) and they apply unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tmem.errors import IntegrityError, NotFoundError, StoreError
from tmem.models import (
    Item,
    ItemEdit,
    ItemKind,
    LLMCall,
    Scene,
    Session,
    Topic,
    TopicSceneLink,
    Turn,
)
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store

T0 = datetime(2024, 1, 1, 9, 0)


@pytest.fixture(params=["memory", "file", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        s = open_store(request.getfixturevalue("pg_url"))
    else:
        s = open_store(":memory:" if request.param == "memory" else tmp_path / "tmem.db")
    yield s
    s.close()


def _turn(n: int, session: str = "s1") -> Turn:
    return Turn(id=f"t{n}", session_id=session, seq=n, speaker="A", text=f"text {n}", time=T0 + timedelta(minutes=n))


def _seed(store: Store, space: str = "a") -> None:
    store.ensure_space(Scope.local(space))
    store.add_session(
        Scope.local(space), Session(id="s1", seq=0, started_at=T0, content_hash="h1"), [_turn(0), _turn(1)]
    )
    store.add_session(Scope.local(space), Session(id="s2", seq=1, started_at=T0, content_hash="h2"), [_turn(2, "s2")])


def test_last_turn_and_session_and_find(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    assert store.last_turn(Scope.local("a")) is None and store.last_session(Scope.local("a")) is None
    _seed(store)
    _seed(store, "b")
    last = store.last_turn(Scope.local("a"))
    assert last is not None and last.id == "t2"
    session = store.last_session(Scope.local("a"))
    assert session is not None and session.id == "s2"
    assert [t.id for t in store.find_turns(Scope.local("a"), ["t2", "nope", "t0"])] == ["t0", "t2"]
    assert [s.id for s in store.find_sessions(Scope.local("a"), ["s2", "x"])] == ["s2"]


def test_add_turns_appends_to_a_session(store: Store) -> None:
    _seed(store)
    store.add_turns(Scope.local("a"), "s2", [_turn(3, "s2"), _turn(4, "s2")])
    assert [t.id for t in store.turns(Scope.local("a")) if t.session_id == "s2"] == ["t2", "t3", "t4"]
    with pytest.raises(IntegrityError):
        store.add_turns(Scope.local("a"), "missing", [_turn(5, "missing")])
    with pytest.raises(IntegrityError):
        store.add_turns(Scope.local("a"), "s2", [_turn(6, "s1")])
    assert store.count_turns_after(Scope.local("a"), 2) == 2
    assert store.count_turns_after(Scope.local("a"), -1) == 5
    assert [t.id for t in store.turns_after(Scope.local("a"), 2)] == ["t3", "t4"]  # in seq order, this space only
    assert [t.id for t in store.turns_after(Scope.local("a"), -1)] == ["t0", "t1", "t2", "t3", "t4"]
    assert store.turns_after(Scope.local("a"), 4) == [] and store.turns_after(Scope.local("nope"), -1) == []


def test_scene_and_item_lookups_and_delete_turns(store: Store) -> None:
    _seed(store)
    store.put_scenes(Scope.local("a"), [Scene(id="sc1", seq=0, title="t", summary="s", narrative="", turn_ids=["t0", "t1"],
                                 start=T0, end=T0)])  # fmt: skip
    store.put_topics(Scope.local("a"), [Topic(id="tp", seq=0, label="l")])
    store.link_topics(Scope.local("a"), [TopicSceneLink(topic_id="tp", scene_id="sc1")])
    store.put_items(Scope.local("a"), [Item(id="i1", text="x", kind=ItemKind.ATOMIC, scene_ids=["sc1"], turn_ids=["t1"],
                               date="2023-05-01", date_end="2023-05-31", date_precision="month",
                               conflicts_with=["i0"], slot="dana / employer")])  # fmt: skip
    assert store.count_turns_outside_scenes(Scope.local("a")) == 1
    assert [s.id for s in store.scenes_of_turns(Scope.local("a"), ["t1", "t2"])] == ["sc1"]
    assert [i.id for i in store.items_of_scenes(Scope.local("a"), ["sc1"])] == ["i1"]
    assert store.items_of_scenes(Scope.local("a"), ["sc1"])[0].scene_ids == ["sc1"]
    assert store.items_of_scenes(Scope.local("a"), ["sc1"]) == store.items(
        Scope.local("a"), ["i1"]
    )  # every column, added ones included
    assert store.items_of_scenes(Scope.local("a"), ["sc1"])[0].date_precision == "month"
    assert store.items(Scope.local("a"), ["i1"])[0].slot == "dana / employer"
    assert store.items(Scope.local("a"))[0].slot == "dana / employer"
    assert store.topic_links_of(Scope.local("a"), scene_ids=["sc1"]) == [TopicSceneLink(topic_id="tp", scene_id="sc1")]
    assert store.topic_links_of(Scope.local("a"), topic_ids=["tp"]) == store.topic_links_of(
        Scope.local("a"), scene_ids=["sc1"]
    )
    store.delete_turns(Scope.local("a"), ["t1"])
    assert [t.id for t in store.turns(Scope.local("a"))] == ["t0", "t2"]
    assert store.scenes(Scope.local("a"))[0].turn_ids == ["t0"]


def test_tombstones_stop_items_from_coming_back(store: Store) -> None:
    _seed(store)
    store.put_scenes(Scope.local("a"), [Scene(id="sc1", seq=0, title="t", summary="s", narrative="", turn_ids=["t0"], start=T0,
                                 end=T0)])  # fmt: skip
    store.add_tombstones(Scope.local("a"), "item", ["i1"])
    store.add_tombstones(Scope.local("a"), "item", ["i1"])  # idempotent
    store.add_tombstones(Scope.local("a"), "turn", ["t9"])
    assert store.tombstoned(Scope.local("a"), "item", ["i1", "i2"]) == {"i1"}
    assert store.tombstoned(Scope.local("a"), "turn", ["i1", "t9"]) == {"t9"}
    store.put_items(
        Scope.local("a"), [Item(id=i, text=i, kind=ItemKind.ATOMIC, scene_ids=["sc1"]) for i in ("i1", "i2")]
    )
    assert [i.id for i in store.items(Scope.local("a"))] == ["i2"]


def test_tombstoned_answers_whether_the_space_has_fewer_or_more_tombstones_than_ids_asked(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    store.ensure_space(Scope.local("b"))
    store.add_tombstones(Scope.local("a"), "turn", [f"t{n}" for n in range(1500)])
    store.add_tombstones(Scope.local("a"), "item", ["t1600"])
    store.add_tombstones(Scope.local("b"), "turn", ["t1601"])
    asked = [f"t{n}" for n in range(0, 3000, 2)]  # as many as the space has: one read of its tombstones
    assert store.tombstoned(Scope.local("a"), "turn", asked) == {f"t{n}" for n in range(0, 1500, 2)}
    asked = [f"t{n}" for n in range(900, 2100)] * 2  # fewer (distinct) than it has: IN lists of 500, over 3 chunks
    assert store.tombstoned(Scope.local("a"), "turn", asked) == {f"t{n}" for n in range(900, 1500)}
    assert store.tombstoned(Scope.local("a"), "turn", ["t1600", "t1601", "t7"]) == {"t7"}  # another kind, another space
    assert store.tombstoned(Scope.local("a"), "turn", []) == set()
    assert store.tombstoned(Scope.local("b"), "item", ["t1601"]) == set()


def test_add_sessions_writes_sessions_and_turns_in_one_call_or_nothing(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    first = (Session(id="s1", seq=0, started_at=T0, content_hash="h1"), [_turn(0), _turn(1)])
    second = (Session(id="s2", seq=1, started_at=T0, content_hash="h2"), [_turn(2, "s2")])
    store.add_sessions(Scope.local("a"), [first, second])
    assert [s.id for s in store.sessions(Scope.local("a"))] == ["s1", "s2"]
    assert store.turns(Scope.local("a")) == [_turn(0), _turn(1), _turn(2, "s2")]
    clash = (Session(id="s4", seq=3, started_at=T0, content_hash="h4"), [_turn(1, "s4")])  # t1 is stored
    with pytest.raises(IntegrityError):
        store.add_sessions(
            Scope.local("a"), [(Session(id="s3", seq=2, started_at=T0, content_hash="h3"), [_turn(3, "s3")]), clash]
        )
    with pytest.raises(IntegrityError):
        store.add_sessions(
            Scope.local("a"), [(Session(id="s3", seq=2, started_at=T0, content_hash="h3"), [_turn(3, "s1")])]
        )
    with pytest.raises(NotFoundError):
        store.add_sessions(Scope.local("nope"), [first])
    assert [s.id for s in store.sessions(Scope.local("a"))] == ["s1", "s2"] and len(store.turns(Scope.local("a"))) == 3
    assert not store.has_space(Scope.local("nope"))


def test_item_edits(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    store.add_item_edit(Scope.local("a"), ItemEdit(item_id="i1", version=1, old_text="a", new_text="b", at=T0))
    store.add_item_edit(Scope.local("a"), ItemEdit(item_id="i1", version=2, old_text="b", new_text="c", at=T0))
    store.add_item_edit(Scope.local("a"), ItemEdit(item_id="i2", version=1, old_text="x", new_text="y", at=T0))
    assert [(e.item_id, e.version) for e in store.item_edits(Scope.local("a"))] == [("i1", 1), ("i1", 2), ("i2", 1)]
    assert [e.new_text for e in store.item_edits(Scope.local("a"), ["i1"])] == ["b", "c"]
    with pytest.raises(IntegrityError):
        store.add_item_edit(Scope.local("a"), ItemEdit(item_id="i1", version=2, old_text="c", new_text="d", at=T0))
    store.delete_item_edits(Scope.local("a"), ["i1"])
    assert [e.item_id for e in store.item_edits(Scope.local("a"))] == ["i2"]


def _call(space: str, n: int, stage: str, response: str) -> LLMCall:
    return LLMCall(space=space, stage=stage, model="m", request_hash=f"h{n}", tokens_in=1, tokens_out=1,
                   latency_ms=1.0, attempts=1, outcome="ok", created_at=T0, response=response)  # fmt: skip


def test_delete_llm_responses_by_content_and_stage(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    store.log_llm_call(_call("a", 1, "segment", '{"summary": "Ann said \\"hi\\" at the caf\\u00e9"}'))
    store.log_llm_call(_call("a", 2, "items", '{"text": "unrelated"}'))
    store.log_llm_call(_call("a", 3, "answer", '{"answer": "x"}'))
    store.log_llm_call(_call("b", 4, "segment", '{"summary": "Ann said \\"hi\\" at the caf\\u00e9"}'))
    deleted = store.delete_llm_responses(
        Scope.local("a"), containing=['Ann said "hi" at the café'], stage_prefixes=["answer"]
    )
    assert deleted == 2
    assert [c.request_hash for c in store.llm_calls(Scope.local("a"))] == ["h2"]
    assert [c.request_hash for c in store.llm_calls(Scope.local("b"))] == ["h4"]  # other spaces untouched


def test_delete_embeddings(store: Store) -> None:
    import numpy as np

    store.ensure_space(Scope.local("a"))
    store.put_embeddings(Scope.local("a"), "m", {"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)})
    store.delete_embeddings(Scope.local("a"), ["x"])
    assert set(store.get_embeddings(Scope.local("a"), "m", ["x", "y"])) == {"y"}


def test_lease_is_exclusive_until_released_or_expired(store: Store) -> None:
    store.ensure_space(Scope.local("a"))
    assert store.acquire_lease(Scope.local("a"), "build", "p1", 60.0, now=1000.0)
    assert not store.acquire_lease(Scope.local("a"), "build", "p2", 60.0, now=1010.0)
    assert store.acquire_lease(Scope.local("a"), "build", "p1", 60.0, now=1010.0)  # the holder extends it
    assert store.acquire_lease(Scope.local("a"), "other", "p2", 60.0, now=1010.0)  # leases are per name
    store.release_lease(Scope.local("a"), "build", "p2")  # not p2's lease: no effect
    assert not store.acquire_lease(Scope.local("a"), "build", "p2", 60.0, now=1020.0)
    assert store.acquire_lease(Scope.local("a"), "build", "p2", 60.0, now=1071.0)  # expired
    store.release_lease(Scope.local("a"), "build", "p2")
    assert store.acquire_lease(Scope.local("a"), "build", "p3", 60.0, now=1072.0)


def test_scrub_runs_outside_a_transaction(store: Store) -> None:
    _seed(store)
    store.delete_space(Scope.local("a"))
    store.scrub()
    assert not store.has_space(Scope.local("a"))


def test_erasure_ledger_orders_outlives_and_marks(store: Store) -> None:
    _seed(store, "acme/a")
    _seed(store, "beta/b")
    assert store.latest_erasure() == 0 and store.erasures() == []
    with pytest.raises(RuntimeError), store.transaction():
        store.add_erasure(Scope.local("acme/a"), "forget")
        raise RuntimeError("rolled back with the deletion it records")
    assert store.erasures() == []
    with store.transaction():
        store.delete_space(Scope.local("acme/a"))
        first = store.add_erasure(Scope.local("acme/a"), "delete")
    second = store.add_erasure(Scope.local("beta/b"), "forget")
    assert second > first >= 1
    ledger = store.erasures()
    assert [(e.seq, e.space, e.kind, e.erased) for e in ledger] == [
        (first, "acme/a", "delete", False),
        (second, "beta/b", "forget", False),
    ]  # the deleted space's entry outlives it
    assert [e.seq for e in store.erasures(after=first)] == [second]
    assert [e.space for e in store.erasures(tenant="acme")] == ["acme/a"]
    assert [e.space for e in store.erasures(scope=Scope.local("beta/b"))] == ["beta/b"]
    assert store.latest_erasure() == second and store.latest_erasure(Scope.local("acme/a")) == first
    assert store.latest_erasure(Scope.local("nobody/x")) == 0
    assert store.mark_erased(first) == 1
    assert [e.seq for e in store.erasures(pending=True)] == [second]
    assert store.mark_erased(second) == 1 and store.mark_erased(second) == 0
    assert store.erasures(pending=True) == [] and all(e.erased for e in store.erasures())


def test_a_snapshot_sees_one_committed_state(store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Reads inside ``snapshot()`` never see a commit made meanwhile by another connection (``tmem check`` during a
    build); after the block they do."""
    if request.node.callspec.params["store"] == "memory":
        pytest.skip("an in-memory database has one connection")
    _seed(store)
    url = request.getfixturevalue("pg_url") if request.node.callspec.params["store"] == "postgres" else None
    other = open_store(url if url is not None else tmp_path / "tmem.db")
    try:
        with store.snapshot():
            before = [t.id for t in store.turns(Scope.local("a"))]
            other.add_session(
                Scope.local("a"), Session(id="s3", seq=2, started_at=T0, content_hash="h3"), [_turn(3, "s3")]
            )
            assert [t.id for t in store.turns(Scope.local("a"))] == before
            assert [s.id for s in store.sessions(Scope.local("a"))] == ["s1", "s2"]
        assert [t.id for t in store.turns(Scope.local("a"))] == [*before, "t3"]
    finally:
        other.close()


def test_a_write_inside_a_snapshot_is_refused_and_nothing_is_kept(store: Store) -> None:
    _seed(store)
    with pytest.raises(StoreError, match=r"snapshot|read-only"), store.snapshot():
        store.add_session(Scope.local("a"), Session(id="s9", seq=9, started_at=T0, content_hash="h9"), [_turn(9, "s9")])
    assert "s9" not in [s.id for s in store.sessions(Scope.local("a"))]
