"""Backend failures reach callers as StoreError (the documented tree) with a message that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmem.errors import IntegrityError, StoreError
from tmem.models import Session, Turn
from tmem.store.rules import build_state, check_space_name, tenant_of
from tmem.store.sqlite import SQLiteStore
from tmem.util.state import STATE_MODE, STATE_SESSIONS


def test_a_locked_sqlite_store_is_a_store_error_that_says_to_wait(tmp_path: Path) -> None:
    path = tmp_path / "tmem.db"
    holder = SQLiteStore.open(path)
    waiter = SQLiteStore.open(path, timeout_s=0.05)
    holder.ensure_space("a")
    with holder.transaction():
        holder.set_state("a", "k", "v")  # the write lock is held until the block ends
        with pytest.raises(StoreError, match=r"locked by another process.*Wait for the other tmem command"):
            waiter.ensure_space("b")
        assert waiter.has_space("a")  # readers are not blocked (WAL)
    waiter.ensure_space("b")  # once released, the same store works again
    assert waiter.has_space("b")
    holder.close()
    waiter.close()


def test_a_store_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    bad = tmp_path / "tmem.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="Cannot open the memory store"):
        SQLiteStore.open(bad)


def test_build_state_is_derived_the_same_for_every_backend() -> None:
    assert build_state(0, {}) == "empty"
    assert build_state(2, {}) == "not built"
    assert build_state(2, {STATE_MODE: "llm", STATE_SESSIONS: "1"}) == "stale"
    assert build_state(2, {STATE_MODE: "llm", STATE_SESSIONS: "2"}) == "built"
    assert build_state(2, {STATE_MODE: "llm", STATE_SESSIONS: "garbage"}) == "stale"


def test_space_keys_name_their_tenant() -> None:
    assert tenant_of("conv-26") == ""
    assert tenant_of("acme/support") == "acme"
    assert tenant_of("../../etc/passwd") == ".."  # any non-empty string is a key; the tenant is before the first '/'
    for bad in ("", " "):
        with pytest.raises(IntegrityError):
            check_space_name(bad)


def test_turns_of_another_session_are_refused_before_anything_is_written() -> None:
    from datetime import datetime

    store = SQLiteStore.open(":memory:")
    store.ensure_space("a")
    when = datetime(2023, 5, 1, 10, 0)
    session = Session(id="s1", seq=0, started_at=when, content_hash="h")
    turn = Turn(id="t1", session_id="other", seq=0, speaker="A", text="hi", time=when)
    with pytest.raises(IntegrityError, match="expected 's1'"):
        store.add_session("a", session, [turn])
    assert store.sessions("a") == []


def test_shown_to_removes_only_the_tenants_own_store_keys() -> None:
    """Issue 20 High 1: a tenant reads its store keys T/S as S; other text (and other words ending in its name)
    stays as it was."""
    from tmem.errors import shown_to

    text = "No item 'x' in space 'a/notes'; see `tmem show a/notes`. Files in data/a/: none (ba/c)."
    assert shown_to(text, "a") == "No item 'x' in space 'notes'; see `tmem show notes`. Files in data/a/: none (ba/c)."
    assert shown_to(text, None) == text and shown_to(text, "") == text
