"""SQLite implementation of :class:`tmem.store.base.Store`: one file in the memory directory, WAL journal, busy
timeout, foreign keys on. The operations are the shared ones (:mod:`tmem.store.ops_ledger` and its bases, over
:mod:`tmem.store.schema`); the connection and its transactions are in :mod:`tmem.store.sqlite_base`; here only what
SQLite does its own way: scrubbing deleted bytes out of the file, and vectors as float32 blobs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from tmem.errors import StoreError
from tmem.store.base import Vector
from tmem.store.ops_ledger import LedgerOps
from tmem.store.sql import driver, vector_bytes
from tmem.store.sqlite_base import SQLiteBase, store_error
from tmem.store.txn import bound
from tmem.store.upgrade import SECURE_DELETE_MARK

__all__ = ["SQLiteStore", "store_error"]


SCRUB_WAIT_MS = 1000  # how long a scrub's checkpoint waits for another connection's open read


class SQLiteStore(SQLiteBase, LedgerOps):
    """The default store. Open with :meth:`open`; ``":memory:"`` gives a private in-memory database (tests)."""

    dialect = "sqlite"

    @property
    def url(self) -> str:
        """The URL this store is opened by (:func:`tmem.store.open_store`)."""
        return f"sqlite:///{self._path}"

    def _vector_param(self, vec: Vector) -> Any:
        return vector_bytes(vec)

    def _vector_value(self, value: Any) -> Vector:
        return np.frombuffer(value, dtype=np.float32).copy()

    def scrub(self, *, vacuum: bool = True) -> bool:
        """Leave no bytes of deleted content in the database files (see docs/reliability.md, "Erasure").

        Deletions overwrite content (``secure_delete`` is on for every connection tmem opens); this then checkpoints
        the WAL into the main file and truncates it, so no older page image survives in the WAL. Content written
        while ``secure_delete`` was off (by a tmem from before it, or another tool) may survive in free pages and
        unused parts of pages: with ``vacuum`` (the default) a file that may hold such content is rebuilt
        (``VACUUM``) once, and marked (``PRAGMA user_version``, revision 0004) so that later scrubs need only the
        checkpoint. A file tmem created carries the mark from the start: its forgets never rebuild it. Returns False
        when another connection's open read kept the WAL from being emptied (then run it again once it is closed).
        Must not be called inside a transaction.
        """
        if bound(self) is not None:
            raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
        with self._driver() as db:
            db.execute("PRAGMA secure_delete = ON")
            if self._path == ":memory:":
                return True
            busy = _checkpoint(db)
            if vacuum and not _always_secure(db):
                db.execute("VACUUM")  # rewrites every page: no byte written before survives
                db.execute(f"PRAGMA user_version = {SECURE_DELETE_MARK}")
                busy = _checkpoint(db)
            return not busy

    def always_secure(self) -> bool:
        """Whether every byte of the file was written with secure_delete on (created by tmem, or rebuilt once by a
        scrub): then a deletion followed by a WAL checkpoint leaves nothing of the deleted content."""
        with self._driver() as db:
            return _always_secure(db)

    @contextmanager
    def _driver(self) -> Iterator[sqlite3.Connection]:
        """The writer's own driver connection, for statements that run outside a transaction (no write of another
        thread runs meanwhile: the writer's pool holds one connection)."""
        with self._errors("scrubbing deleted content"), self._writer.connect() as conn:
            db: sqlite3.Connection = driver(conn)
            yield db


def _always_secure(db: sqlite3.Connection) -> bool:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return bool(version == SECURE_DELETE_MARK)


def _checkpoint(db: sqlite3.Connection) -> bool:
    """TRUNCATE checkpoint, waiting at most ``SCRUB_WAIT_MS`` for other connections' readers (not the store's write
    timeout: an erasure a reader blocks is left pending and retried, never a request held for a minute); True when it
    could not complete."""
    (timeout,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute(f"PRAGMA busy_timeout = {min(int(timeout), SCRUB_WAIT_MS)}")
    try:
        busy, _log, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(timeout)}")
    return bool(busy)
