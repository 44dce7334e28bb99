"""PostgreSQL-only store behaviour: pooled transactions across threads, tenant keying, migrations, errors."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from tmem.errors import InputError, StoreError
from tmem.models import Session, Topic, Turn
from tmem.scope import Scope
from tmem.store import legacy, open_store
from tmem.store.pg_vector import DEFAULT_EF_SEARCH
from tmem.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres
T0 = datetime(2023, 5, 8, 13, 56)


def test_every_table_is_keyed_by_tenant_and_space(pg_url: str) -> None:
    store = PostgresStore.open(pg_url)
    tables = store._rows(
        "SELECT c.relname, pg_get_constraintdef(k.oid) FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "WHERE k.contype = 'p' AND c.relnamespace = current_schema()::regnamespace "
        "AND c.relname NOT IN ('migrations', 'alembic_version', 'service_keys')"  # reference tables
    )
    assert len(tables) >= 16
    for table, pkey in tables:
        assert pkey.startswith("PRIMARY KEY (tenant, "), (table, pkey)
    store.ensure_space(Scope.local("acme/support"))
    store.ensure_space(Scope.local("local"))
    assert sorted(store._rows("SELECT tenant, name FROM spaces")) == [("", "local"), ("acme", "acme/support")]
    with pytest.raises(StoreError):  # the CHECK ties the tenant column to the space key
        store._exec("INSERT INTO spaces(tenant, name) VALUES ('evil', 'acme/x')")
    store.close()


def test_two_processes_opening_at_once_migrate_once(pg_url: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[StoreError] = []

    def open_one() -> None:
        try:
            stores.append(PostgresStore.open(pg_url, max_size=2))
        except StoreError as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 4
    assert stores[0]._rows("SELECT COUNT(*) FROM migrations") == [(len(legacy.STEPS),)]
    for s in stores:
        s.close()


def test_transactions_pin_one_connection_per_thread(pg_url: str) -> None:
    """A thread's open transaction is invisible to another thread until it commits; both share one store."""
    store = PostgresStore.open(pg_url, max_size=4)
    store.ensure_space(Scope.local("a"))
    inside = threading.Event()
    release = threading.Event()
    seen: list[list[Topic]] = []

    def writer() -> None:
        with store.transaction():
            store.put_topics(Scope.local("a"), [Topic(id="t1", seq=0, label="pets")])
            with store.transaction():  # nested: joins the outer one
                store.set_state(Scope.local("a"), "k", "v")
            inside.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(10)
    seen.append(store.topics(Scope.local("a")))  # another connection: the uncommitted topic is not visible
    assert store.get_state(Scope.local("a"), "k") is None
    release.set()
    t.join()
    assert seen == [[]]
    assert [x.id for x in store.topics(Scope.local("a"))] == ["t1"] and store.get_state(Scope.local("a"), "k") == "v"
    store.close()


def test_a_failed_statement_rolls_back_the_whole_transaction(pg_url: str) -> None:
    store = PostgresStore.open(pg_url)
    store.ensure_space(Scope.local("a"))
    session = Session(id="s1", seq=0, started_at=T0, content_hash="h")
    turn = Turn(id="t1", session_id="s1", seq=0, speaker="A", text="hi", time=T0)
    store.add_session(Scope.local("a"), session, [turn])
    with pytest.raises(StoreError, match="Nothing of it was written"):
        store.add_session(Scope.local("a"), Session(id="s2", seq=0, started_at=T0, content_hash="h2"), [])  # seq taken
    assert [s.id for s in store.sessions(Scope.local("a"))] == ["s1"]
    store.ensure_space(Scope.local("b"))  # the pool hands out a clean connection afterwards
    assert store.has_space(Scope.local("b"))
    store.close()


def test_text_with_a_nul_character_is_refused_with_what_to_do(pg_url: str) -> None:
    store = open_store(pg_url)
    store.ensure_space(Scope.local("a"))
    with pytest.raises(InputError, match=r"NUL.*remove it"):
        store.set_state(Scope.local("a"), "k", "bad\x00value")
    store.close()


def test_an_unreachable_server_is_a_store_error_naming_the_setting() -> None:
    with pytest.raises(StoreError, match="TMEM_DATABASE_URL"):
        PostgresStore.open("postgresql://nobody:secret@/nodb?host=/nonexistent-dir", timeout_s=1.0)


def test_the_password_never_appears_in_messages() -> None:
    with pytest.raises(StoreError) as info:
        PostgresStore.open("postgresql://nobody:hunter2@/nodb?host=/nonexistent-dir", timeout_s=1.0)
    assert "hunter2" not in str(info.value)


def test_pooled_connections_carry_the_hnsw_session_settings(pg_url: str) -> None:
    store = PostgresStore.open(pg_url)
    with pytest.raises(StoreError), store.transaction():  # a rolled-back transaction must not undo them
        store._exec("SELECT 1/0")
    assert store._rows("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')") == [
        (str(DEFAULT_EF_SEARCH), "relaxed_order")
    ]
    store.close()
