"""The control tables' Alembic migrations (tmem.store.control_migrations) on both backends: a database made by the
code before them opens and upgrades with its rows, autogenerate finds nothing between a migrated database and
tmem.store.control_schema, and servers opening a fresh database at once migrate it once."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from tmem.errors import ConfigError, StoreError
from tmem.store import open_store
from tmem.store.control import open_control, open_control_url
from tmem.store.control_dialect import connect
from tmem.store.control_migrations import config
from tmem.store.control_schema import VERSION_TABLE, include_name, metadata
from tmem.store.sqlite import SQLiteStore

FIXTURES = Path(__file__).parent / "fixtures" / "control"


def _make_v0(url: str) -> None:
    """Make the database at ``url`` as the code before Alembic did: its tables (revision c0001 is that code's DDL,
    with no Alembic version recorded: stamped back to nothing) and rows written by it."""
    engine = connect(url)
    try:
        with engine.begin() as conn:
            command.upgrade(config(conn), "c0001")
            conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
    finally:
        engine.dispose()
    rows = (FIXTURES / "v0_rows.sql").read_text()
    if url.startswith("sqlite:///"):
        with closing(sqlite3.connect(url[len("sqlite:///") :])) as db, db:
            db.executescript(rows)
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(rows.encode())


def _shape(inspector: sa.Inspector | sa.Table, table: str) -> tuple[list[str], list[str | None]]:
    """A table's primary key columns and CHECK constraint names (autogenerate compares neither)."""
    if isinstance(inspector, sa.Table):
        checks = [c.name for c in inspector.constraints if isinstance(c, sa.CheckConstraint)]
        return sorted(c.name for c in inspector.primary_key), sorted(str(name) for name in checks)
    found = inspector.get_check_constraints(table)
    return sorted(inspector.get_pk_constraint(table)["constrained_columns"]), sorted(c["name"] for c in found)


def _diff_and_version(url: str) -> tuple[list[Any], str | None]:
    """Autogenerate's differences between the database and the control MetaData (and any difference of primary keys
    or CHECK constraints), and the recorded revision."""
    engine = connect(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_name": include_name, "version_table": VERSION_TABLE, "compare_type": True}
            )
            diff: list[Any] = list(compare_metadata(context, metadata))
            inspector = sa.inspect(conn)
            for name, table in metadata.tables.items():
                if inspector.has_table(name) and _shape(inspector, name) != _shape(table, name):
                    diff.append(("shape", name, _shape(inspector, name), _shape(table, name)))
            return diff, context.get_current_revision()
    finally:
        engine.dispose()


def _head() -> str | None:
    return ScriptDirectory.from_config(config()).get_current_head()


def test_autogenerate_finds_no_difference_on_a_migrated_database(store_url: str) -> None:
    """Both the service's way (the memory store opened first, its old migrations making the tables) and the control
    store alone on an empty database end at the MetaData."""
    store = open_store(store_url)
    open_control(store).close()
    store.close()
    diff, version = _diff_and_version(store_url)
    assert diff == [] and version == _head() is not None


def test_control_alone_creates_its_tables(store_url: str) -> None:
    """The control store opened first on an empty database; the memory store opened after leaves its tables be."""
    open_control_url(store_url).close()
    diff, version = _diff_and_version(store_url)
    assert diff == [] and version == _head()
    open_store(store_url).close()
    assert _diff_and_version(store_url) == ([], _head())


def test_a_database_migrated_by_a_newer_tmem_is_refused_with_the_fix(store_url: str) -> None:
    open_control_url(store_url).close()
    engine = connect(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = 'c9999'"))
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="newer tmem"):
        open_control_url(store_url)


def test_a_database_made_before_alembic_opens_and_upgrades(store_url: str) -> None:
    _make_v0(store_url)
    before, version = _diff_and_version(store_url)
    assert version is None  # no Alembic version yet
    assert (before != []) == store_url.startswith("sqlite")  # SQLite's tables had their own shape
    control = open_control_url(store_url)
    try:
        assert _diff_and_version(store_url) == ([], _head())
        assert control.authenticate("tmem_0123456789ab_oldsecret") == "acme"
        assert [(k.tenant, k.id, k.revoked_at is None) for k in control.keys(None)] == [
            ("acme", "ffff00000001", True),
            ("acme", "0123456789ab", True),
            ("beta", "aaaa00000002", False),
        ]
        new, _ = control.create_key("acme")
        assert [k.id for k in control.keys("acme")] == ["ffff00000001", "0123456789ab", new.id]  # after the old ones
        assert [j.id for j in control.jobs("acme")] == ["job_zz", "job_aa", "job_mm"]  # insertion order kept
        done = control.get_job("job_zz")
        assert (done.state, done.params, done.result, done.owner) == (
            "succeeded",
            {"rebuild": False},
            {"items": 3},
            "host:1:aaaa",
        )
        running = control.get_job("job_aa")
        assert (running.owner, running.heartbeat_at, running.progress["fraction"]) == ("elsewhere:1:abc", 100.0, 0.5)
        claimed = control.claim_job("w", 1.0)
        assert claimed is not None and (claimed.id, claimed.attempts) == ("job_mm", 1)
        queued = control.create_job("acme", "u", {})
        assert [j.id for j in control.jobs("acme")][-1] == queued.id
    finally:
        control.close()
    again = open_control_url(store_url)  # reopening an upgraded database changes nothing
    try:
        assert [j.id for j in again.jobs("acme")][:3] == ["job_zz", "job_aa", "job_mm"]
    finally:
        again.close()


def test_servers_opening_a_fresh_database_together_migrate_it_once(store_url: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(open_control_url, store_url) for _ in range(4)]
    opened = [future.result() for future in futures]  # raises the first failed open
    try:
        key_id = opened[0].create_key("acme")[0].id
        assert [k.id for k in opened[3].keys(None)] == [key_id]
    finally:
        for control in opened:
            control.close()
    assert _diff_and_version(store_url) == ([], _head())


def test_a_memory_database_is_refused() -> None:
    store = open_store("sqlite:///")
    try:
        with pytest.raises(ConfigError, match="memory directory on disk"):
            open_control(store)
    finally:
        store.close()


def test_a_store_opened_directly_shares_its_database_with_the_control_store(tmp_path: Path) -> None:
    """The control store follows ``store.url``: a store opened without open_store has its keys in the same file."""
    store = SQLiteStore.open(tmp_path / "tmem.db")
    try:
        control = open_control(store)
        try:
            _, key = control.create_key("acme")
            assert control.authenticate(key) == "acme"
        finally:
            control.close()
        assert store.url == f"sqlite:///{tmp_path / 'tmem.db'}"
    finally:
        store.close()
    reopened = open_control_url(f"sqlite:///{tmp_path / 'tmem.db'}")
    try:
        listed = reopened.keys(tenant="acme")
        assert [k.tenant for k in listed] == ["acme"]
    finally:
        reopened.close()
