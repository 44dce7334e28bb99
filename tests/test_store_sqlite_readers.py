"""SQLite readers in parallel with the writer (issue 32, item 2): while one thread holds a write transaction open,
reads and snapshots of other threads run at once on the reader pool and see the last committed state; the thread
inside the transaction reads its own writes; a reader connection cannot write."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tmem.errors import StoreError
from tmem.models import Session, Turn
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.store.sqlite_readers import READERS

T0 = datetime(2024, 3, 1, 9, 0)
A, B = Scope.local("a"), Scope.local("b")
WAIT = 10.0  # seconds a step may take at most on a loaded machine (a blocked read would wait for the writer)


def _turn(i: int) -> Turn:
    return Turn(id=f"t{i}", session_id="s", seq=i, speaker="Ann", text=f"turn {i}", time=T0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore.open(tmp_path / "tmem.db")
    for scope in (A, B):
        s.ensure_space(scope)
        s.add_session(scope, Session(id="s", seq=0, started_at=T0, content_hash="h"), [_turn(0)])
    yield s
    s.close()


def _while_writing(store: SQLiteStore, read: Callable[[], object]) -> object:
    """Run ``read`` in another thread while this thread holds a write transaction that added turn 1 to space a;
    returns what it read before the transaction ended (fails when the read waited for the writer)."""
    got: list[object] = []
    done = threading.Event()

    def reader() -> None:
        got.append(read())
        done.set()

    with store.transaction():
        store.add_turns(A, "s", [_turn(1)])
        assert [t.id for t in store.turns(A)] == ["t0", "t1"]  # the writer reads its own writes
        thread = threading.Thread(target=reader)
        thread.start()
        assert done.wait(WAIT), "the read waited for the writer's transaction"
    thread.join()
    return got[0]


def test_a_read_runs_while_another_thread_writes(store: SQLiteStore) -> None:
    seen = _while_writing(store, lambda: ([t.id for t in store.turns(A)], [t.id for t in store.turns(B)]))
    assert seen == (["t0"], ["t0"])  # the last committed state
    assert [t.id for t in store.turns(A)] == ["t0", "t1"]


def test_a_snapshot_runs_while_another_thread_writes(store: SQLiteStore) -> None:
    def snapshot() -> list[str]:
        with store.snapshot():
            return [t.id for t in store.turns(A)] + [s.id for s in store.sessions(B)]

    assert _while_writing(store, snapshot) == ["t0", "s"]


def test_reader_connections_cannot_write(store: SQLiteStore) -> None:
    with store.snapshot(), pytest.raises(StoreError, match="readonly"):
        store._rows("DELETE FROM turns")  # the primitive, past the store's own refusal of writes in a snapshot
    assert [t.id for t in store.turns(A)] == ["t0"]


def test_a_scrub_completes_while_readers_keep_reading(store: SQLiteStore) -> None:
    """The erasure guarantee with parallel readers: snapshots of the reader pool held open back to back, as a stream
    of searches holds them, leave the scrub's WAL checkpoint (which must empty the log) able to complete."""
    stop = threading.Event()
    reads: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            with store.snapshot():
                reads.append(len(store.turns(A)))
                stop.wait(0.05)  # a long read: its snapshot stays open meanwhile

    threads = [threading.Thread(target=reader) for _ in range(READERS)]
    for t in threads:
        t.start()
    try:
        while len(reads) < 2 * READERS:
            stop.wait(0.01)
        store.delete_turns(B, ["t0"])
        assert store.scrub() is True
        before = len(reads)
        while len(reads) < before + 4:  # and the readers go on afterwards
            stop.wait(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert set(reads) == {1}
