"""The little that differs between SQLite and PostgreSQL for the control store: connecting, serialising writers,
numbering ``seq``. Everything else (:mod:`tmem.store.control_sql`) is one statement for both.

SQLite: one engine on the memory's file (WAL, a 30 s busy timeout); a write transaction starts with
``BEGIN IMMEDIATE``, so writers of every process on the file run one at a time and a claim's read and update are
one step. PostgreSQL: a small pool (psycopg 3); writers that must not interleave (claims, queueing, recovery, the
migration) take a transaction-scoped advisory lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from tmem.errors import ConfigError, StoreError

CLAIM_LOCK = 7_460_135_002  # pg_advisory_xact_lock key of job claims (the memory store's migration lock is ...001)
MIGRATE_LOCK = 7_460_135_003  # ... and of the control tables' migration
_WRITE = "tmem_write"  # execution option: this transaction writes (BEGIN IMMEDIATE on SQLite)
_POSTGRES = ("postgresql", "postgres")


def connect(url: str) -> Engine:
    """An engine on the control tables' database: ``sqlite:///PATH`` or ``postgresql://...``."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() in _POSTGRES:
        return sa.create_engine(
            parsed.set(drivername="postgresql+psycopg"), pool_size=4, max_overflow=4, pool_timeout=30.0
        )
    if parsed.get_backend_name() != "sqlite":
        raise ConfigError(
            f"The service's keys and jobs are kept in SQLite or PostgreSQL, not {parsed.drivername!r}. Serve a memory "
            "directory (--dir or TMEM_HOME) or a PostgreSQL database (TMEM_DATABASE_URL)."
        )
    if parsed.database in (None, "", ":memory:"):
        raise ConfigError("The service needs a memory directory on disk (--dir or TMEM_HOME), not ':memory:'.")
    engine = sa.create_engine(parsed, connect_args={"timeout": 30.0, "check_same_thread": False})
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # the driver leaves BEGIN to _sqlite_begin
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 30000")
    cursor.execute("PRAGMA secure_delete = ON")  # the memory's file: every byte written with it (store.scrub)
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def where(engine: Engine) -> str:
    """The database, for messages (no password)."""
    return engine.url.render_as_string(hide_password=True)


@contextmanager
def transaction(engine: Engine, doing: str, *, write: bool = False) -> Iterator[Connection]:
    """One transaction, committed on success; a database failure becomes a StoreError saying what to do."""
    try:
        with engine.execution_options(**{_WRITE: write}).begin() as conn:
            yield conn
    except exc.OperationalError as error:
        raise StoreError(
            f"The service's keys and jobs in {where(engine)} could not be reached or were busy while {doing}: "
            f"{error.orig}. Nothing was changed. Retry; if it persists, check the memory directory (--dir/TMEM_HOME) "
            "exists and is writable, or that the PostgreSQL server of TMEM_DATABASE_URL runs and accepts this user."
        ) from error
    except exc.DBAPIError as error:
        raise StoreError(
            f"The service's keys and jobs in {where(engine)} refused {doing}: {error.orig}. Nothing was changed; "
            "check that no older tmem version writes this database."
        ) from error


def serialise(conn: Connection, lock: int) -> None:
    """Until this transaction ends, no other transaction taking ``lock`` runs (SQLite: BEGIN IMMEDIATE already
    serialises every writer)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(lock)))


def next_seq(conn: Connection, table: sa.Table) -> Mapping[str, Any]:
    """The ``seq`` value an insert gives: none on PostgreSQL (an identity), the next number on SQLite (inserts run
    one at a time there, under BEGIN IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        return {}
    return {"seq": sa.select(sa.func.coalesce(sa.func.max(table.c.seq), 0) + 1).scalar_subquery()}
