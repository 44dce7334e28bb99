"""Connection, transactions, statement helpers and errors of the SQLite store (the record methods live in
:mod:`tmem.store.ops_ledger` and its bases, :mod:`tmem.store.sqlite`): one file in the memory directory, WAL journal, busy
timeout, foreign keys on.

One writer connection, behind a lock held for a whole transaction (``BEGIN IMMEDIATE``: the writers of every process
run one at a time), and a pool of read-only connections (:mod:`tmem.store.sqlite_readers`): a read outside the
calling thread's transaction, and every :meth:`SQLiteBase.snapshot`, runs on a reader, in parallel with the writer
and with other readers, and sees the last committed state. A private ``:memory:`` database has one connection only:
there every call takes the lock, as a file's writer does."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Table, func, select

from tmem.errors import ConfigError, IntegrityError, StoreError
from tmem.store.rules import not_utf8
from tmem.store.sqlite_readers import ReaderPool
from tmem.store.upgrade import upgrade_sqlite


def _verb(sql: str) -> str:
    """The head of a statement for error messages (``INSERT INTO items``)."""
    return " ".join(sql.split("(")[0].split()[:4])


def store_error(exc: sqlite3.Error, path: str, doing: str) -> StoreError:
    """The :class:`StoreError` (or :class:`IntegrityError`) that says what to do about a SQLite failure."""
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(
            f"{exc} (while {doing} in {path}). Nothing of it was written; fix the records named and retry."
        )
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"The memory store {path} is locked by another process (while {doing}): {text}. Nothing of it was written. "
            "Wait for the other tmem command (a build or import on the same --dir) to finish and rerun; for many "
            "concurrent writers use PostgreSQL (TMEM_DATABASE_URL=postgresql://...)."
        )
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"The memory store {path} is read-only (while {doing}): {text}. Give this user write access to the file "
            "and its directory, or point --dir/TMEM_HOME elsewhere."
        )
    if "disk" in text and ("full" in text or "I/O" in text):
        return StoreError(f"Writing the memory store {path} failed (while {doing}): {text}. Free disk space and rerun.")
    return StoreError(
        f"The memory store {path} failed while {doing}: {text}. Rerun the command; if it persists, run "
        "`tmem check` and restore the file from a backup."
    )


class SQLiteBase:
    """One connection (guarded by a lock) and the statement helpers every part of the SQLite store uses."""

    def __init__(self, db: sqlite3.Connection, path: str, readers: ReaderPool | None = None) -> None:
        self._db = db
        self._path = path
        self._readers = readers  # None: one connection (":memory:"), every read takes the lock
        self._lock = threading.RLock()
        self._depth = 0
        self._reading = False  # inside a snapshot() on the writer's connection (no reader pool): writes are refused
        self._writer: int | None = None  # the thread inside transaction()
        self._local = threading.local()  # .reader: the reader connection of this thread's snapshot()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, timeout_s: float = 30.0, create_dirs: bool = True) -> Self:
        """Open (creating and migrating) the file; a writer waits up to ``timeout_s`` for another one's lock. With
        ``create_dirs`` False a missing directory is a ConfigError naming it (a store URL the user wrote: a typo must
        not leave a new directory and an empty store behind)."""
        target = str(path)
        if target != ":memory:":
            file = Path(target)
            if not create_dirs and not file.parent.is_dir():
                raise ConfigError(
                    f"The SQLite store {file} is in a directory that does not exist ({file.parent}); nothing was "
                    "created. Create the directory, or fix TMEM_DATABASE_URL / --database-url."
                )
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"Cannot create the memory directory {file.parent}: {exc}. Choose another with --dir or TMEM_HOME."
                ) from exc
        try:
            db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=timeout_s)
            db.execute("PRAGMA foreign_keys = ON")
            db.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            db.execute("PRAGMA secure_delete = ON")  # deleted content is overwritten, whatever the platform default
            if target != ":memory:":
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
            upgrade_sqlite(db)
        except sqlite3.OperationalError as exc:
            raise store_error(exc, target, "opening and migrating it") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Cannot open the memory store {target}: {exc}. Check the file is a tmem database and not in use "
                "by an incompatible version, or point --dir/TMEM_HOME elsewhere."
            ) from exc
        return cls(db, target, None if target == ":memory:" else ReaderPool(target, timeout_s))

    @property
    def path(self) -> str:
        return self._path

    def close(self) -> None:
        if self._readers is not None:
            self._readers.close()
        with self._lock:
            self._db.close()

    def _writing(self) -> bool:
        """Whether the caller is inside :meth:`transaction` (it holds the lock, so no other thread can be)."""
        return self._writer == threading.get_ident() and not self._reading

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._reading or self._pinned_reader() is not None:
                raise StoreError(
                    "A write inside Store.snapshot() (a read of one committed state): write after the block."
                )
            outer = self._depth == 0
            if outer:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise store_error(exc, self._path, "starting a write") from exc
                self._writer = threading.get_ident()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._writer = None
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._writer = None
                self._commit()

    def _pinned_reader(self) -> sqlite3.Connection | None:
        conn: sqlite3.Connection | None = getattr(self._local, "reader", None)
        return conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if self._readers is None or self._writer == threading.get_ident():
            with self._one_connection_snapshot():
                yield
            return
        if self._pinned_reader() is not None:
            yield
            return
        with self._readers.borrow() as conn:
            with self._errors("starting a read"):
                conn.execute("BEGIN")  # deferred: the first read fixes the snapshot (WAL) until it ends
            self._local.reader = conn
            try:
                yield
            finally:
                self._local.reader = None  # the pool rolls the read back when it takes the connection back

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """The connection a read runs on: this thread's snapshot's, the writer's inside this thread's transaction
        (it sees what the transaction wrote), else one of the pool's for this statement."""
        pinned = self._pinned_reader()
        if pinned is not None:
            yield pinned
        elif self._readers is None or self._writer == threading.get_ident():
            with self._lock:
                yield self._db
        else:
            with self._readers.borrow() as conn:
                yield conn

    @contextmanager
    def _one_connection_snapshot(self) -> Iterator[None]:
        """snapshot() on the writer's connection: inside this thread's transaction (joined), or on ``:memory:``."""
        with self._lock:
            if self._depth > 0 or self._db.in_transaction:
                yield
                return
            with self._errors("starting a read"):
                self._db.execute("BEGIN")  # deferred: the first read fixes the snapshot (WAL) until it ends
            self._depth += 1
            self._reading = True
            try:
                yield
            finally:
                self._depth -= 1
                self._reading = False
                if self._db.in_transaction:
                    with self._errors("ending a read"):
                        self._db.execute("ROLLBACK")  # a read: nothing to keep, and nothing written inside is kept

    def _commit(self) -> None:
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            # A failed COMMIT leaves the transaction open: roll it back, or every later write would fail too.
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise store_error(exc, self._path, "committing") from exc

    @contextmanager
    def _errors(self, doing: str, sql: str | None = None) -> Iterator[None]:
        """Backend errors as the project's: a ``StoreError`` naming the database and what was being done (``doing``,
        its ``{}`` filled with the head of ``sql`` only on failure: every statement passes here), or the input error
        for text that is not valid UTF-8."""
        try:
            yield
        except sqlite3.Error as exc:
            raise store_error(exc, self._path, doing if sql is None else doing.format(_verb(sql))) from exc
        except UnicodeEncodeError as exc:
            raise not_utf8(exc) from exc

    def _rows(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        with self._reader() as db, self._errors("reading ({})", sql):
            return list(db.execute(sql, params).fetchall())

    def _named(self, sql: str, params: Any, *, binary: bool = False) -> list[dict[str, Any]]:
        del binary  # SQLite returns blobs as they are
        with self._reader() as db, self._errors("reading ({})", sql):
            cursor = db.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def _exec(self, sql: str, params: Any = ()) -> int:
        with self._lock, self._errors("running {}", sql):
            return self._db.execute(sql, params).rowcount

    def _many(self, sql: str, rows: Sequence[Any]) -> None:
        with self._lock, self._errors("running {}", sql):
            self._db.executemany(sql, rows)

    @staticmethod
    def _identity(table: Table, column: str) -> dict[str, Any]:
        """SQLite numbers an identity itself: one past the largest, safe under the one writer's BEGIN IMMEDIATE."""
        return {column: select(func.coalesce(func.max(table.c[column]), 0) + 1).scalar_subquery()}
