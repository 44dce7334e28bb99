"""Messages as they arrive (Memory.add_messages): sessions by idle gap, idempotence, dates from the conversation,
staleness, extending a built session, and the build lease."""

from __future__ import annotations

import itertools
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem import BuildBusy, InputError, Memory, MessageInput, Settings
from tmem.construct.check import check_space
from tmem.construct.policy import BUILD_LEASE
from tmem.embed import HashEmbedder
from tmem.ingest.messages import with_request_ids
from tmem.scope import Scope
from tmem.store import open_store

T0 = datetime(2024, 3, 1, 9, 0)


def _mem(tmp_path: Path | None = None) -> Memory:
    settings = Settings(home=tmp_path or Path("/nonexistent"), llm="none", session_gap_minutes=30)
    store = open_store(":memory:" if tmp_path is None else tmp_path / "tmem.db")
    return Memory(store, settings, embedder=HashEmbedder())


def _msgs(n: int, start: int = 0, minutes: int = 1) -> list[MessageInput]:
    return [
        MessageInput(
            speaker="alice" if k % 2 else "bot",
            text=f"message number {k} about hiking trips near Grenoble and the weather",
            time=T0 + timedelta(minutes=minutes * k),
        )
        for k in range(start, start + n)
    ]


def test_open_session_and_idle_gap() -> None:
    with _mem() as mem:
        first = mem.add_messages("u", _msgs(3))
        assert first.sessions_created == ["live-1"] and len(first.added) == 3
        late = MessageInput(speaker="alice", text="back after lunch", time=T0 + timedelta(hours=3))
        soon = MessageInput(speaker="bot", text="welcome back")  # no time: the previous message's time
        second = mem.add_messages("u", [late, soon])
        assert second.sessions_created == ["live-2"]
        sessions = mem.store.sessions(Scope.local("u"))
        assert [s.id for s in sessions] == ["live-1", "live-2"]
        assert sessions[1].started_at == T0 + timedelta(hours=3)
        turns = mem.store.turns(Scope.local("u"))
        assert [t.session_id for t in turns] == ["live-1"] * 3 + ["live-2"] * 2
        assert turns[-1].time == turns[-2].time
        assert mem.store.get_space(Scope.local("u")).speakers == ["bot", "alice"]


def test_idempotent_by_id_and_messages_without_ids_are_never_dropped() -> None:
    """Issue 20 Medium 8: idempotency is decided by id, never by content alone."""
    with _mem() as mem:
        batch = [*_msgs(2), MessageInput(id="x-1", speaker="alice", text="with an id", time=T0)]
        mem.add_messages("u", batch)
        again = mem.add_messages("u", batch)
        assert len(again.added) == 2 and again.skipped == ["x-1"]  # the id-less two were sent again: kept
        assert len(mem.store.turns(Scope.local("u"))) == 5
        with pytest.raises(InputError, match="already stored for another message"):
            mem.add_messages("u", [MessageInput(id="x-1", speaker="alice", text="other text")])


def test_three_separate_oks_are_three_turns() -> None:
    """Issue 20 Medium 8: three separate {"speaker": "user", "text": "ok"} calls stored one turn."""
    with _mem() as mem:
        for _ in range(3):
            report = mem.add_messages("u", [MessageInput(speaker="user", text="ok")], received_at=T0)
            assert len(report.added) == 1 and report.skipped == []
        turns = mem.store.turns(Scope.local("u"))
        assert [t.text for t in turns] == ["ok"] * 3 and len({t.id for t in turns}) == 3


def test_request_ids_give_exactly_once_without_message_ids() -> None:
    """A client without message ids that resends a request (its answer was lost) under one request key stores it
    once; a new request key is a new message."""
    with _mem() as mem:
        ok = [MessageInput(speaker="user", text="ok", time=T0), MessageInput(speaker="bot", text="fine")]
        first = mem.add_messages("u", with_request_ids(ok, "req-1"))
        assert first.added == ["req-1:0", "req-1:1"]
        assert mem.add_messages("u", with_request_ids(ok, "req-1")).skipped == ["req-1:0", "req-1:1"]
        assert mem.add_messages("u", with_request_ids(ok, "req-2")).added == ["req-2:0", "req-2:1"]
        with pytest.raises(InputError, match="idempotency key"):
            with_request_ids(ok, "bad\nkey")


def test_an_id_less_message_again_after_its_twin_was_forgotten_is_stored() -> None:
    with _mem() as mem:
        first = mem.add_messages("u", [MessageInput(speaker="user", text="ok", time=T0)]).added
        mem.forget("u", turn_ids=first)
        again = mem.add_messages("u", [MessageInput(speaker="user", text="ok", time=T0)])
        assert len(again.added) == 1 and again.forgotten == [] and again.added != first
        assert [t.text for t in mem.store.turns(Scope.local("u"))] == ["ok"]


def test_repeated_identical_messages_in_one_call_are_kept_apart() -> None:
    with _mem() as mem:
        ok = MessageInput(speaker="alice", text="ok", time=T0)
        report = mem.add_messages("u", [ok, ok])
        assert len(report.added) == 2 and len(set(report.added)) == 2


def test_first_message_needs_a_time_or_an_arrival_time() -> None:
    with _mem() as mem:
        with pytest.raises(InputError, match="has no time"):
            mem.add_messages("u", [{"speaker": "alice", "text": "hello there"}])
        assert not mem.store.has_space(Scope.local("u")) or not mem.store.turns(Scope.local("u"))  # nothing written
        arrived = datetime(2025, 1, 2, 8, 30)
        mem.add_messages("u", [{"speaker": "alice", "text": "hello there"}], received_at=arrived)
        assert mem.store.turns(Scope.local("u"))[0].time == arrived


def test_bad_input_says_what_to_fix() -> None:
    with _mem() as mem:
        with pytest.raises(InputError, match="speaker is empty"):
            mem.add_messages("u", [{"speaker": " ", "text": "x", "time": "2024-01-01"}])
        with pytest.raises(InputError, match="Cannot read the date"):
            mem.add_messages("u", [{"speaker": "a", "text": "x", "time": "yesterday"}])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gaps=st.lists(st.sampled_from([0, 1, 5, 45, 600]), min_size=1, max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=14), max_size=5),
    retry=st.booleans(),
)
def test_any_chunking_gives_the_same_turns(gaps: list[int], cuts: list[int], retry: bool) -> None:
    """Incremental == full: messages sent in any chunks (and chunks sent twice) give the same sessions and turns."""
    messages: list[MessageInput] = []
    when = T0
    for k, gap in enumerate(gaps):
        when += timedelta(minutes=gap)
        timed = k % 3 != 2  # every third message carries no time
        # a chunk sent twice is idempotent by id only (docs/agents.md): messages carry ids when chunks are resent
        messages.append(
            MessageInput(
                speaker=f"s{k % 2}", text=f"m{k}", time=when if timed or k == 0 else None, id=f"k{k}" if retry else None
            )
        )
    bounds = sorted({0, len(messages), *(c for c in cuts if c <= len(messages))})
    with _mem() as full, _mem() as parts:
        full.add_messages("u", messages)
        for a, b in itertools.pairwise(bounds):
            parts.add_messages("u", messages[a:b])
            if retry:
                assert parts.add_messages("u", messages[a:b]).added == []
        assert parts.store.turns(Scope.local("u")) == full.store.turns(Scope.local("u"))
        assert parts.store.sessions(Scope.local("u")) == full.store.sessions(Scope.local("u"))


def test_staleness_and_extending_a_built_session(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        mem.add_messages("u", _msgs(6))
        assert mem.staleness("u").stale_turns == 6
        mem.build("u")
        assert mem.staleness("u").stale_turns == 0
        assert not mem.search("u", "hiking Grenoble").stale
        mem.add_messages("u", _msgs(3, start=6))  # same open session
        assert len(mem.store.sessions(Scope.local("u"))) == 1
        result = mem.search("u", "hiking Grenoble")
        assert result.stale and result.stale_turns == 3
        assert mem.spaces()[0].build_state == "stale"
        assert check_space(mem.store, Scope.local("u")).violations == []  # appended turns are stale, not unassigned
        mem.build("u")
        assert mem.staleness("u").stale_turns == 0
        scened = {tid for s in mem.store.scenes(Scope.local("u")) for tid in s.turn_ids}
        assert scened == {t.id for t in mem.store.turns(Scope.local("u"))}
    # the grown session is built as if it had arrived whole
    with _mem(tmp_path / "whole") as whole:
        whole.add_messages("u", _msgs(9))
        whole.build("u")
        with _mem(tmp_path) as mem:
            assert [s.turn_ids for s in mem.store.scenes(Scope.local("u"))] == [
                s.turn_ids for s in whole.store.scenes(Scope.local("u"))
            ]
            assert [i.text for i in mem.store.items(Scope.local("u"))] == [
                i.text for i in whole.store.items(Scope.local("u"))
            ]
            assert [(t.label, t.description) for t in mem.store.topics(Scope.local("u"))] == [
                (t.label, t.description) for t in whole.store.topics(Scope.local("u"))
            ]


def test_one_build_per_space_at_a_time(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem, _mem(tmp_path) as other:
        mem.add_messages("u", _msgs(4))
        assert other.store.acquire_lease(Scope.local("u"), BUILD_LEASE, "someone-else", 600.0, 1e12)
        with pytest.raises(BuildBusy, match="Another build"):
            mem.build("u")
        assert mem.build_if_due("u", idle_seconds=10_000) is None  # busy: skipped, not an error
        other.store.release_lease(Scope.local("u"), BUILD_LEASE, "someone-else")
        assert mem.build_if_due("u", idle_seconds=0) is None  # 4 turns < 20 and not idle long enough
        assert mem.build_if_due("u", idle_seconds=10_000) is not None
        assert mem.staleness("u").stale_turns == 0


def test_a_lease_left_by_a_killed_build_on_this_host_is_taken_over(tmp_path: Path) -> None:
    """kill -9 leaves the lease row behind; a dead local holder must not block the resume for the lease's TTL,
    while a live holder (another process of this host) or a holder on another host still does."""
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    dead_pid = int(dead.stdout)  # that process has exited: its pid names no running process (reuse is unlikely)
    host = socket.gethostname()
    with _mem(tmp_path) as mem:
        mem.add_messages("u", _msgs(4))
        for holder in (f"{host}:{os.getppid()}:live", f"other-host.example:{dead_pid}:x"):
            assert mem.store.acquire_lease(Scope.local("u"), BUILD_LEASE, holder, 600.0, 1e12)
            with pytest.raises(BuildBusy, match="Another build"):
                mem.build("u")
            mem.store.release_lease(Scope.local("u"), BUILD_LEASE, holder)
        assert mem.store.acquire_lease(Scope.local("u"), BUILD_LEASE, f"{host}:{dead_pid}:killed", 600.0, 1e12)
        mem.build("u")  # taken over from the dead holder
        assert mem.store.lease_holder(Scope.local("u"), BUILD_LEASE) is None  # and released after the build
        assert mem.staleness("u").stale_turns == 0


WORDS = ["garden", "tomatoes", "hiking", "Grenoble", "weather", "museum", "pottery", "kitten", "river", "bakery"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gaps=st.lists(st.sampled_from([1, 2, 90]), min_size=4, max_size=12),
    build_after=st.sets(st.integers(min_value=1, max_value=11), max_size=3),
)
def test_building_between_messages_gives_the_memory_of_one_build(gaps: list[int], build_after: set[int]) -> None:
    """Incremental == full for the built memory: builds at any points between messages (sessions that grow after a
    build are reopened) end with the same scenes, topics, items and triggers as one build at the end."""
    messages = []
    when = T0
    for k, gap in enumerate(gaps):
        when += timedelta(minutes=gap)
        text = f"we talked about the {WORDS[k % len(WORDS)]} and the {WORDS[(k * 3 + 1) % len(WORDS)]} again today"
        messages.append(MessageInput(speaker=("ann", "bo")[k % 2], text=text, time=when))
    with _mem() as once, _mem() as steps:
        once.add_messages("u", messages)
        once.build("u")
        for k, m in enumerate(messages):
            steps.add_messages("u", [m])
            if k + 1 in build_after:
                steps.build("u")
        steps.build("u")

        def snapshot(mem: Memory) -> tuple[object, ...]:
            s = mem.store
            return (
                s.scenes(Scope.local("u")),
                s.topics(Scope.local("u")),
                s.topic_links(Scope.local("u")),
                s.items(Scope.local("u")),
                s.triggers(Scope.local("u")),
            )

        assert snapshot(steps) == snapshot(once)
        assert steps.staleness("u").stale_turns == 0
