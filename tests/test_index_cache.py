"""The per-space index cache: bounded by bytes, least recently used out, one lock per space."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from tmem.index.cache import SpaceCache
from tmem.scope import Scope


def test_lru_by_bytes_and_fingerprints() -> None:
    cache: SpaceCache[bytes] = SpaceCache(max_bytes=10, size_of=len)
    assert cache.get("a", 1, lambda: b"aaaa") == b"aaaa"
    assert cache.get("b", 1, lambda: b"bbbb") == b"bbbb"
    assert cache.get("a", 1, lambda: b"XXXX") == b"aaaa"  # a hit; a is now the most recent
    cache.get("c", 1, lambda: b"cccc")  # 12 bytes > 10: the least recently used (b) goes
    assert cache.spaces() == ["a", "c"] and cache.evictions == 1
    assert cache.get("a", 2, lambda: b"new") == b"new"  # a changed fingerprint rebuilds
    assert cache.get("huge", 1, lambda: b"x" * 11) == b"x" * 11  # over budget: served, not kept
    assert "huge" not in cache.spaces() and cache.nbytes <= 10
    cache.invalidate("a")
    assert cache.spaces() == ["c"]


def test_a_slow_build_blocks_neither_other_spaces_nor_builds_twice() -> None:
    cache: SpaceCache[str] = SpaceCache(max_bytes=100, size_of=len)
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow() -> str:
        calls.append("slow")
        started.set()
        release.wait(10)
        return "slow"

    threads = [threading.Thread(target=cache.get, args=("a", 1, slow)) for _ in range(2)]
    threads[0].start()
    assert started.wait(10)
    threads[1].start()
    t0 = time.monotonic()
    assert cache.get("b", 1, lambda: "fast") == "fast"  # not blocked by a's build
    assert time.monotonic() - t0 < 5
    release.set()
    for t in threads:
        t.join()
    assert calls == ["slow"]  # the second search of a waited for the first build and reused it


@settings(max_examples=50, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 3), st.integers(1, 8)), max_size=40))
def test_the_budget_always_holds(ops: list[tuple[str, int, int]]) -> None:
    cache: SpaceCache[bytes] = SpaceCache(max_bytes=12, size_of=len)
    for space, fp, size in ops:
        value = cache.get(space, fp, lambda size=size: b"x" * size)  # type: ignore[misc]
        assert value == cache.get(space, fp, lambda: b"other") or len(value) > 12
        assert cache.nbytes <= 12


def test_the_retriever_keeps_indices_within_its_byte_budget() -> None:
    """Two built spaces with a budget for one: the least recently searched is dropped and rebuilt on demand."""
    from tmem.embed.hashing import HashEmbedder
    from tmem.models import Item, ItemKind, Scene, Session, Turn
    from tmem.retrieve.cascade import Retriever, index_bytes
    from tmem.store import open_store
    from tmem.util.state import STATE_MODE, STATE_SESSIONS

    store = open_store(":memory:")
    when = datetime(2023, 5, 1, 9, 0)
    for space in ("a", "b"):
        store.ensure_space(Scope.local(space))
        store.add_session(
            Scope.local(space),
            Session(id="s1", seq=0, started_at=when, content_hash="h"),
            [Turn(id="t1", session_id="s1", seq=0, speaker="A", text=f"dogs in {space}", time=when)],
        )
        store.put_scenes(
            Scope.local(space),
            [Scene(id="sc", seq=0, title="dogs", summary="dogs", narrative="", turn_ids=["t1"], start=when, end=when)],
        )
        store.put_items(
            Scope.local(space), [Item(id="i", text=f"A likes dogs ({space})", kind=ItemKind.ATOMIC, scene_ids=["sc"])]
        )
        store.set_state(Scope.local(space), STATE_MODE, "extractive")
        store.set_state(Scope.local(space), STATE_SESSIONS, "1")
    probe = Retriever(store, HashEmbedder())
    one = index_bytes(probe.index(Scope.local("a")))
    r = Retriever(store, HashEmbedder(), cache_bytes=one + one // 2)
    r.search(Scope.local("a"), "dogs")
    r.search(Scope.local("b"), "dogs")  # a is evicted
    r.search(Scope.local("b"), "dogs")
    assert r.builds == 2
    r.search(Scope.local("a"), "dogs")
    assert r.builds == 3
    store.close()
