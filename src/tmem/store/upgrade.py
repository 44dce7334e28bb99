"""Bring a store's schema to :mod:`tmem.store.schema` with the Alembic revisions in ``tmem/store/revisions``: run
when a store opens, on its own database connection (SQLite: the store's one connection, so ``:memory:`` works too;
PostgreSQL: one connection of its own, under an advisory lock so that workers starting together migrate once).

A database already at the newest revision costs one read of ``alembic_version``. :func:`schema_diff` is Alembic's
autogenerate comparison of a database against the MetaData (empty when the revisions and the MetaData agree).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool, StaticPool

from tmem.errors import StoreError
from tmem.store.schema import include_object, metadata

_REVISIONS = Path(__file__).with_name("revisions")
# SQLite's ``PRAGMA user_version`` when every byte of the file was written with secure_delete on (revision 0004):
# "tmSD", a value no other tool is likely to leave there.
SECURE_DELETE_MARK = 0x746D5344
_ALEMBIC = threading.Lock()  # Alembic's command API loads its environment module: one thread at a time


def _config(connection: Connection | None = None, *, new_database: bool = False) -> Config:
    attributes = {} if connection is None else {"connection": connection, "new_database": new_database}
    config = Config(attributes=attributes)
    config.set_main_option("script_location", str(_REVISIONS))
    return config


@cache
def head() -> str:
    """The newest revision."""
    found = ScriptDirectory.from_config(_config()).get_current_head()
    assert found is not None
    return found


def current(connection: Connection) -> str | None:
    """The revision the database is at (None: never upgraded by Alembic)."""
    return MigrationContext.configure(connection).get_current_revision()


def _upgrade(connection: Connection, *, new_database: bool = False) -> None:
    if current(connection) == head():
        connection.rollback()  # the read above opened a transaction
        return
    connection.rollback()
    try:
        command.upgrade(_config(connection, new_database=new_database), "head")
    except CommandError as exc:  # e.g. a revision this tmem does not know: a newer tmem migrated the database
        raise StoreError(
            f"Cannot upgrade the memory store's schema: {exc}. A newer tmem may have migrated this database (its "
            "table alembic_version names the revision): run that version, or upgrade tmem."
        ) from exc
    except DBAPIError as exc:  # the driver's own error, for the backend's messages (locked, read-only, ...)
        if isinstance(exc.orig, Exception):
            raise exc.orig from exc
        raise


def upgrade_sqlite(db: sqlite3.Connection) -> None:
    """Upgrade the database of ``db`` (a connection in autocommit mode, ``isolation_level=None``, secure_delete on)
    in one ``BEGIN IMMEDIATE`` transaction; foreign keys are off while tables are rebuilt, and on again afterwards.
    A file created here is marked as written with secure_delete from its first byte (revision 0004)."""
    if _sqlite_revision(db) == head():
        return  # read without a write lock: opening never waits for another process's build
    new_database = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    engine = create_engine("sqlite://", creator=lambda: db, poolclass=StaticPool)

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    db.execute("PRAGMA foreign_keys = OFF")
    try:
        with _ALEMBIC, engine.connect() as connection:
            _upgrade(connection, new_database=new_database)
    finally:
        db.execute("PRAGMA foreign_keys = ON")


def _sqlite_revision(db: sqlite3.Connection) -> str | None:
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone():
        return None
    row = db.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None


def upgrade_postgres(connect: Callable[[], Any]) -> None:
    """Upgrade the PostgreSQL database ``connect()`` (a new psycopg connection) reaches, in one transaction."""
    engine = create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)
    try:
        with _ALEMBIC, engine.connect() as connection:  # other processes wait on the revisions' advisory lock
            _upgrade(connection)
    finally:
        engine.dispose()


def schema_diff(connection: Connection) -> list[Any]:
    """Alembic's autogenerate differences between the database and :data:`tmem.store.schema.metadata`."""
    context = MigrationContext.configure(connection, opts={"include_object": include_object, "compare_type": True})
    return list(compare_metadata(context, metadata))
