"""The SQLite store's connections and engines: one writer connection, whose transactions begin with ``BEGIN
IMMEDIATE`` (the writers of every process run one at a time), and a pool of read-only connections on the memory's
file, so that reads run in parallel with each other and with the writer (WAL: a reader sees the last committed state
and never waits for a writer, nor a writer for it). Each is a SQLAlchemy Engine on a creator that opens the
connection with its pragmas; a begin event issues the ``BEGIN`` a connection's execution options name
(``tmem_begin``): none for a single statement, which SQLite runs as its own transaction. Every connection has
``secure_delete`` on (docs/reliability.md, "Erasure"); a reader also ``query_only``: it cannot write."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import QueuePool

READERS = 4  # connections at most: searches are CPU-bound in Python, more would only wait for the GIL
WRITER_WAIT_S = 24 * 3600.0  # a thread waits for another thread's write transaction of this process as long as it takes
BEGIN_OPTION = "tmem_begin"  # the execution option naming the statement that begins a connection's transaction


def connect(path: str, timeout_s: float, *, reader: bool) -> sqlite3.Connection:
    """A connection on ``path`` in autocommit mode (transactions are begun explicitly) with tmem's pragmas."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout_s)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
    conn.execute("PRAGMA secure_delete = ON")  # deleted content is overwritten, whatever the platform default
    if reader:
        conn.execute("PRAGMA query_only = ON")
        return conn
    conn.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def engine(creator: Callable[[], sqlite3.Connection], *, size: int, wait_s: float) -> Engine:
    """An engine of at most ``size`` connections from ``creator``, kept open until it is disposed (a ``:memory:``
    database lives in its one connection); a checkout waits up to ``wait_s`` for a free one."""
    sa_engine = create_engine(
        "sqlite://", creator=creator, poolclass=QueuePool, pool_size=size, max_overflow=0, pool_timeout=wait_s
    )
    event.listen(sa_engine, "begin", _begin)
    return sa_engine


def _begin(conn: Connection) -> None:
    statement = conn.get_execution_options().get(BEGIN_OPTION)
    if statement:
        conn.exec_driver_sql(statement)
