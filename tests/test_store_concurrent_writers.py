"""Concurrent writers of one space (issue 33, item 1): N writers on two servers, each server a store of its own (its
own connection pool on PostgreSQL, its own connection on SQLite) on one database, add messages to the same space at
once. Every call is answered without error, and every acknowledged message is stored exactly once, at a sequence
number of its own, in the order its writer sent it; id-less messages (stored on every call) keep working."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from tmem.errors import StoreError, TmemError
from tmem.ingest.messages import MessageInput, add_messages
from tmem.models import Turn
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store

T0 = datetime(2024, 3, 1, 9, 0)
GAP = timedelta(minutes=30)
SPACE = Scope.local("shared")
WRITERS = 8  # four on each server
CALLS = 10  # per writer; every other call also sends an id-less "ok"


def _writer(store: Store, w: int, start: threading.Barrier, acked: list[list[str]], errors: list[str]) -> None:
    start.wait()
    for c in range(CALLS):
        when = T0 + timedelta(seconds=c)
        messages = [MessageInput(speaker=f"writer{w}", text=f"message {c} of writer {w}", time=when, id=f"w{w}-{c}")]
        if c % 2:
            messages.append(MessageInput(speaker=f"writer{w}", text="ok", time=when))  # the same text from everyone
        try:
            report = add_messages(store, SPACE, messages, gap=GAP)
        except TmemError as exc:  # counted: the test asserts there are none
            errors.append(f"writer {w} call {c}: {type(exc).__name__}: {exc}")
            continue
        acked[w].extend(report.added)


def test_concurrent_writers_on_two_servers_store_every_acknowledged_message_once(store_url: str) -> None:
    servers = [open_store(store_url), open_store(store_url)]
    try:
        acked: list[list[str]] = [[] for _ in range(WRITERS)]
        errors: list[str] = []
        start = threading.Barrier(WRITERS)
        threads = [
            threading.Thread(target=_writer, args=(servers[w % 2], w, start, acked, errors)) for w in range(WRITERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        stored: list[Turn] = servers[0].turns(SPACE)
        ids = [t.id for t in stored]
        assert len(ids) == len(set(ids))  # nothing stored twice
        assert sorted(ids) == sorted(i for per in acked for i in per)  # every acknowledged message, nothing else
        assert len(ids) == WRITERS * CALLS * 3 // 2
        assert [t.seq for t in stored] == list(range(len(stored)))  # one sequence number each, none skipped
        assert sum(t.text == "ok" for t in stored) == WRITERS * CALLS // 2  # the id-less rule: each "ok" is a turn
        by_id = {t.id: t for t in stored}
        for w, mine in enumerate(acked):  # each writer's messages in the order it sent them
            assert [by_id[i].seq for i in mine] == sorted(by_id[i].seq for i in mine), w
            assert {by_id[i].speaker for i in mine} == {f"writer{w}"}
        sessions = servers[1].sessions(SPACE)
        assert {t.session_id for t in stored} <= {s.id for s in sessions}
        assert sorted(servers[1].get_space(SPACE).speakers) == sorted(f"writer{w}" for w in range(WRITERS))
    finally:
        for s in servers:
            s.close()


def test_the_space_lock_is_taken_inside_a_write_transaction_only(store_url: str) -> None:
    store = open_store(store_url)
    try:
        with pytest.raises(StoreError, match="outside a write transaction"):
            store.lock_space(SPACE)  # a lock outside a transaction would end with its statement
        with store.snapshot(), pytest.raises(StoreError):
            store.lock_space(SPACE)  # a read of one committed state writes nothing
        assert not store.has_space(SPACE)
        with store.transaction():
            assert store.lock_space(SPACE).name == SPACE.space  # created if new
        assert store.has_space(SPACE)
    finally:
        store.close()
