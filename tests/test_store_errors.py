"""Backend failures reach callers as StoreError (the documented tree) with a message that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmem.errors import IntegrityError, StoreError
from tmem.models import Session, Turn
from tmem.scope import Scope
from tmem.store.rules import build_state, check_space_name, tenant_of
from tmem.store.sqlite import SQLiteStore
from tmem.util.state import STATE_MODE, STATE_SESSIONS


def test_a_locked_sqlite_store_is_a_store_error_that_says_to_wait(tmp_path: Path) -> None:
    path = tmp_path / "tmem.db"
    holder = SQLiteStore.open(path)
    waiter = SQLiteStore.open(path, timeout_s=0.05)
    holder.ensure_space(Scope.local("a"))
    with holder.transaction():
        holder.set_state(Scope.local("a"), "k", "v")  # the write lock is held until the block ends
        with pytest.raises(StoreError, match=r"locked by another process.*Wait for the other tmem command"):
            waiter.ensure_space(Scope.local("b"))
        assert waiter.has_space(Scope.local("a"))  # readers are not blocked (WAL)
    waiter.ensure_space(Scope.local("b"))  # once released, the same store works again
    assert waiter.has_space(Scope.local("b"))
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
    store.ensure_space(Scope.local("a"))
    when = datetime(2023, 5, 1, 10, 0)
    session = Session(id="s1", seq=0, started_at=when, content_hash="h")
    turn = Turn(id="t1", session_id="other", seq=0, speaker="A", text="hi", time=when)
    with pytest.raises(IntegrityError, match="expected 's1'"):
        store.add_session(Scope.local("a"), session, [turn])
    assert store.sessions(Scope.local("a")) == []


def test_an_error_is_rendered_for_a_tenant_from_its_fields() -> None:
    """Issues 20 and 24: a tenant reads its store keys T/S as S, rendered from the error's fields (no text is edited:
    other words that look like keys stay as they were); another tenant's space is never named."""
    from tmem.errors import NotFoundError, SpaceNotFound

    exc = NotFoundError(
        "No item {name!r} in space {space!r}; see `tmem show {space}`. Files in data/a/: none (ba/c).",
        kind="item",
        name="x",
        space="a/notes",
    )
    assert str(exc) == "No item 'x' in space 'a/notes'; see `tmem show a/notes`. Files in data/a/: none (ba/c)."
    assert exc.shown_to("a") == "No item 'x' in space 'notes'; see `tmem show notes`. Files in data/a/: none (ba/c)."
    assert exc.shown_to(None) == str(exc) and exc.shown_to("") == str(exc)
    assert "notes" not in exc.shown_to("b") and (exc.kind, exc.name) == ("item", "x")
    assert NotFoundError("No {kind} {{x}}", kind="job").shown_to("a") == "No job {x}"  # a template's braces
    missing = SpaceNotFound("a", "nowhere", ["notes", "diary"])
    assert missing.shown_to("a") == str(missing) == "No space named 'nowhere'. Known spaces: notes, diary."
    assert "notes" not in missing.shown_to("b") and "diary" not in missing.shown_to("b")
