"""The store's one schema (tmem.store.schema) and its Alembic revisions: a new database and every older one end at
the MetaData on both backends, with nothing lost on the way."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine

from tests.support.data import LLM_BUILT, LLM_BUILT_SPACES
from tests.support.history import legacy_sqlite
from tmem.cli.main import cli
from tmem.construct.check import check_space
from tmem.errors import StoreError
from tmem.models import PendingRequest, Session, Turn
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.rules import tenant_of
from tmem.store.sqlite import SQLiteStore
from tmem.store.upgrade import head, schema_diff


def _engine_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1) if url.startswith("postgresql://") else url


def _diff(url: str) -> list[object]:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as connection:
            return schema_diff(connection)
    finally:
        engine.dispose()


def test_a_new_store_matches_the_metadata(store_url: str) -> None:
    store = open_store(store_url)
    store.close()
    assert _diff(store_url) == []


def test_the_diff_sees_a_missing_column(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tmem.db'}"
    open_store(url).close()
    db = sqlite3.connect(tmp_path / "tmem.db")
    db.execute("ALTER TABLE turns DROP COLUMN metadata")
    db.commit()
    db.close()
    assert [d[0] for d in _diff(url)] == ["add_column"]  # type: ignore[index]


def test_turn_metadata_round_trips(store_url: str) -> None:
    store = open_store(store_url)
    store.ensure_space(Scope.local("acme/support"))
    when = datetime(2024, 3, 1, 9, 30)
    session = Session(id="s1", seq=0, started_at=when, content_hash="h")
    meta: dict[str, str | int | float | bool] = {"channel": "email", "n": 3, "score": 0.5, "urgent": True}
    turns = [
        Turn(id="t1", session_id="s1", seq=0, speaker="ann", text="hello", time=when, metadata=meta),
        Turn(id="t2", session_id="s1", seq=1, speaker="bob", text="hi", time=when),
    ]
    store.add_session(Scope.local("acme/support"), session, turns)
    assert store.turns(Scope.local("acme/support")) == turns
    assert store.last_turn(Scope.local("acme/support")) == turns[1]
    assert store.find_turns(Scope.local("acme/support"), ["t1"])[0].metadata == meta
    store.close()


@pytest.mark.parametrize("name", ["/x", "a/b/c", "../../etc/passwd", "local", "t/"])
def test_any_space_key_has_the_tenant_the_rules_give(store_url: str, name: str) -> None:
    store = open_store(store_url)
    store.ensure_space(Scope.local(name))
    assert store._rows("SELECT tenant FROM spaces")[0][0] == tenant_of(name)  # type: ignore[attr-defined]
    store.close()


def _schema_1(path: Path) -> None:
    """A v0.1 memory: only the first migration, one space of a tenant and one local space, a queued request."""
    legacy_sqlite(path, 1)
    db = sqlite3.connect(path, isolation_level=None)
    for name in ("acme/support", "local"):
        db.execute("INSERT INTO spaces(name, speakers) VALUES (?, '[\"ann\"]')", (name,))
        db.execute("INSERT INTO sessions VALUES (?, 's1', 0, '2024-03-01T09:30:00', 'h')", (name,))
        db.execute("INSERT INTO turns VALUES (?, 't1', 's1', 0, 'ann', 'hello', '2024-03-01T09:30:00', NULL)", (name,))
    for request_hash in ("b", "a"):  # queued in this order, not sorted
        db.execute("INSERT INTO pending_requests VALUES ('local', ?, 'items', '{}')", (request_hash,))
    db.close()


def test_a_schema_1_memory_upgrades_with_tenant_keys(tmp_path: Path) -> None:
    _schema_1(tmp_path / "tmem.db")
    store = SQLiteStore.open(tmp_path / "tmem.db")
    assert [s.name for s in store.list_spaces()] == ["acme/support", "local"]
    assert store.turns(Scope.local("acme/support"))[0].metadata == {}
    assert [p.request_hash for p in store.pending(Scope.local("local"))] == ["b", "a"]
    store.put_pending([PendingRequest(space="local", request_hash="c", stage="items", body="{}")])
    assert [p.request_hash for p in store.pending(Scope.local("local"))] == ["b", "a", "c"]
    tenants = store._rows("SELECT name, tenant FROM spaces ORDER BY name")
    assert [tuple(r) for r in tenants] == [("acme/support", "acme"), ("local", "")]
    assert store._rows("SELECT version_num FROM alembic_version")[0][0] == head()
    assert check_space(store, Scope.local("local")).ok and check_space(store, Scope.local("acme/support")).ok
    store.close()
    assert _diff(f"sqlite:///{tmp_path / 'tmem.db'}") == []
    reopened = SQLiteStore.open(tmp_path / "tmem.db")  # at head: nothing applied again
    assert reopened.turns(Scope.local("local"))[0].text == "hello"
    reopened.close()


def test_a_column_added_before_its_revision_is_kept(tmp_path: Path) -> None:
    """A memory whose turns got ``metadata`` from the pre-Alembic step (005_turn_metadata) upgrades as it is."""
    _schema_1(tmp_path / "tmem.db")
    db = sqlite3.connect(tmp_path / "tmem.db")
    db.execute("ALTER TABLE turns ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'")
    db.execute("UPDATE turns SET metadata = '{\"k\": 1}' WHERE space = 'local'")
    db.commit()
    db.close()
    store = SQLiteStore.open(tmp_path / "tmem.db")
    assert store.turns(Scope.local("local"))[0].metadata == {"k": 1}
    store.close()
    assert _diff(f"sqlite:///{tmp_path / 'tmem.db'}") == []


@pytest.mark.parametrize("folder", ["", "previous"])  # the current builds and the ones before (schema 001)
@pytest.mark.parametrize("name", LLM_BUILT_SPACES)
def test_the_shipped_llm_built_memories_upgrade_and_pass_check(name: str, folder: str, tmp_path: Path) -> None:
    shipped = LLM_BUILT / folder / f"{name}.db"
    if not shipped.exists():
        pytest.skip("the LLM-built dev memories are not on this machine")
    before = sqlite3.connect(f"file:{shipped}?mode=ro", uri=True)
    counts = {t: before.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("turns", "items", "triggers")}
    before.close()
    copy = tmp_path / "tmem.db"
    shutil.copyfile(shipped, copy)  # never open the shipped file in place
    store = SQLiteStore.open(copy)
    assert {t: store._rows(f"SELECT COUNT(*) FROM {t}")[0][0] for t in counts} == counts
    store.close()
    assert _diff(f"sqlite:///{copy}") == []
    result = CliRunner().invoke(cli, ["--dir", str(tmp_path), "check", name])
    assert result.exit_code == 0, result.output


@pytest.mark.postgres
def test_a_postgres_database_from_before_alembic_upgrades(pg_url: str) -> None:
    store = open_store(pg_url)
    store.ensure_space(Scope.local("acme/support"))
    store._exec("DROP TABLE alembic_version")  # type: ignore[attr-defined]
    store._exec("DROP INDEX erasures_pending")  # type: ignore[attr-defined]
    store._exec("ALTER TABLE turns DROP COLUMN metadata")  # type: ignore[attr-defined]
    store.close()
    reopened = open_store(pg_url)
    assert reopened.has_space(Scope.local("acme/support"))
    reopened.close()
    assert _diff(pg_url) == []


def test_opening_an_upgraded_store_takes_no_write_lock(tmp_path: Path) -> None:
    """A reader (``tmem check``, a search) opens the memory while another process's build holds the write lock."""
    path = tmp_path / "tmem.db"
    SQLiteStore.open(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        reader = SQLiteStore.open(path, timeout_s=0.2)
        assert reader.list_spaces() == []
        reader.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_new_store_locked_by_another_writer_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "tmem.db"
    sqlite3.connect(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked by another process"):
            SQLiteStore.open(path, timeout_s=0.2)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_store_migrated_by_a_newer_tmem_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "tmem.db"
    SQLiteStore.open(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE alembic_version SET version_num = '9999'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer tmem"):
        SQLiteStore.open(path)
