"""The SQLite store's readers: a small pool of read-only connections on the memory's file, so that reads run in
parallel with each other and with the one writer (WAL: a reader sees the last committed state and never waits for a
writer, nor a writer for it). A reader borrows a connection for one statement, or for a whole
:meth:`tmem.store.sqlite_base.SQLiteBase.snapshot`; the writer's connection stays the store's own
(:mod:`tmem.store.sqlite_base`). Every connection has ``secure_delete`` on (docs/reliability.md, "Erasure") and
``query_only``: a reader cannot write."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

READERS = 4  # connections at most: searches are CPU-bound in Python, more would only wait for the GIL


class ReaderPool:
    """Up to ``size`` read-only connections on ``path``, opened when first needed and kept until :meth:`close`."""

    def __init__(self, path: str, timeout_s: float, size: int = READERS) -> None:
        self._path = path
        self._timeout_s = timeout_s
        self._size = size
        self._idle: list[sqlite3.Connection] = []
        self._opened = 0
        self._closed = False
        self._free = threading.Condition()

    @contextmanager
    def borrow(self) -> Iterator[sqlite3.Connection]:
        """A connection of the pool for this block (waits while all are borrowed)."""
        conn = self._take()
        try:
            yield conn
        finally:
            with self._free:
                if self._closed:
                    conn.close()
                else:
                    if conn.in_transaction:  # an open read would keep the WAL from being checkpointed (scrub)
                        conn.execute("ROLLBACK")
                    self._idle.append(conn)
                self._free.notify()

    def _take(self) -> sqlite3.Connection:
        with self._free:
            while not self._closed and not self._idle and self._opened >= self._size:
                self._free.wait()
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            if self._idle:
                return self._idle.pop()
            self._opened += 1
        try:
            return self._connect()
        except BaseException:
            with self._free:
                self._opened -= 1
                self._free.notify()
            raise

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False, timeout=self._timeout_s)
        conn.execute(f"PRAGMA busy_timeout = {int(self._timeout_s * 1000)}")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA query_only = ON")
        return conn

    def close(self) -> None:
        """Close the idle connections; one still borrowed is closed when given back (it fails from then on)."""
        with self._free:
            self._closed = True
            for conn in self._idle:
                conn.close()
            self._idle.clear()
            self._free.notify_all()
