"""Engines and errors of the SQLite store (the record methods live in :mod:`tmem.store.ops_ledger` and its bases,
:mod:`tmem.store.sqlite`; the transaction idiom in :mod:`tmem.store.sql`): one file in the memory directory, WAL
journal, busy timeout, foreign keys on.

One writer connection (an engine whose pool holds one: a write transaction, ``BEGIN IMMEDIATE``, holds it to its
end, so the writers of every process run one at a time) and a pool of read-only connections
(:mod:`tmem.store.sqlite_readers`): a read outside the calling context's transaction, and every snapshot, runs on a
reader, in parallel with the writer and with other readers, and sees the last committed state. A private
``:memory:`` database has one connection only: there every read waits for it, as a write does."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from sqlalchemy import Engine, Table, func, select

from tmem.errors import ConfigError, IntegrityError, StoreError
from tmem.store import sqlite_readers as connections
from tmem.store.upgrade import upgrade_sqlite


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
    """The writer's engine, the readers' engine, and the SQLite side of the statement helpers."""

    _driver_error: ClassVar[type[Exception]] = sqlite3.Error
    _write_options: ClassVar[Mapping[str, Any]] = {connections.BEGIN_OPTION: "BEGIN IMMEDIATE"}
    _snapshot_options: ClassVar[Mapping[str, Any]] = {connections.BEGIN_OPTION: "BEGIN"}  # deferred: the first read
    # fixes the snapshot (WAL) until it ends

    def __init__(self, writer: Engine, path: str, readers: Engine | None = None) -> None:
        self._writer = writer
        self._path = self._where = path
        self._reader = readers or writer  # ":memory:": one connection, every read waits for it

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
            db = connections.connect(target, timeout_s, reader=False)
            upgrade_sqlite(db)
        except sqlite3.OperationalError as exc:
            raise store_error(exc, target, "opening and migrating it") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Cannot open the memory store {target}: {exc}. Check the file is a tmem database and not in use "
                "by an incompatible version, or point --dir/TMEM_HOME elsewhere."
            ) from exc
        first = [db]  # the migrated connection is the writer's (":memory:": the database itself)

        def writer() -> sqlite3.Connection:
            if first:
                return first.pop()
            if target == ":memory:":
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            return connections.connect(target, timeout_s, reader=False)

        writes = connections.engine(writer, size=1, wait_s=connections.WRITER_WAIT_S)
        if target == ":memory:":
            return cls(writes, target)
        reads = connections.engine(
            lambda: connections.connect(target, timeout_s, reader=True), size=connections.READERS, wait_s=timeout_s
        )
        return cls(writes, target, reads)

    @property
    def path(self) -> str:
        return self._path

    def close(self) -> None:
        """Close every connection (one still in use is closed when given back)."""
        if self._reader is not self._writer:
            self._reader.dispose()
        self._writer.dispose()

    def _store_error(self, exc: Exception, doing: str) -> StoreError:
        assert isinstance(exc, sqlite3.Error)
        return store_error(exc, self._path, doing)

    def _busy(self, doing: str) -> str:
        return (
            f"Every reader connection of the memory store {self._path} stayed busy (while {doing}). Rerun; if it "
            "persists, run fewer concurrent searches."
        )

    @staticmethod
    def _identity(table: Table, column: str) -> dict[str, Any]:
        """SQLite numbers an identity itself: one past the largest, safe under the one writer's BEGIN IMMEDIATE."""
        return {column: select(func.coalesce(func.max(table.c[column]), 0) + 1).scalar_subquery()}
