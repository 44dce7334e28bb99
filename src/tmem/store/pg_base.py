"""Connections, transactions and errors of the PostgreSQL store (the record methods live in the subclasses).

A store holds a psycopg connection pool. Outside a transaction each call borrows a connection for one statement
group and commits; :meth:`PgBase.transaction` pins one connection to the calling thread until the outermost block
ends, and nested calls (and every store call the thread makes inside the block) join it. Threads never share a
pinned connection, so one store object serves a multi-threaded API worker.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout
from sqlalchemy import Table

from tmem.errors import InputError, IntegrityError, StoreError
from tmem.settings import redact
from tmem.store.pg_vector import configure_session, ensure_registered
from tmem.store.rules import not_utf8
from tmem.store.upgrade import upgrade_postgres


def pg_store_error(exc: psycopg.Error, where: str, doing: str) -> StoreError | InputError:
    """The :class:`StoreError` that says what to do about a PostgreSQL failure (an :class:`InputError` for a NUL
    character the input checks did not catch: bad input, not an unavailable store; it names no connection)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "NUL" in text or "0x00" in text:
        return InputError(
            f"Text containing a NUL character (\\x00) cannot be stored (while {doing}). Nothing of it was written; "
            "remove it from the input and retry."
        )
    if isinstance(exc, pg_errors.IntegrityError):
        return IntegrityError(f"{text} (while {doing} in {where}). Nothing of it was written; fix the records named.")
    if isinstance(exc, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.LockNotAvailable)):
        return StoreError(
            f"A concurrent write to the same space in {where} conflicted with this one (while {doing}): {text}. "
            "Nothing of it was written; rerun the command."
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StoreError(
            f"The database user may not do this in {where} (while {doing}): {text}. Grant it CREATE and USAGE on "
            "the schema (and CREATE EXTENSION vector once, as a superuser), or connect as another user."
        )
    if isinstance(exc, pg_errors.UndefinedFile) or ("vector" in text and "extension" in text):
        return StoreError(
            f"PostgreSQL at {where} lacks the pgvector extension ({text}). Install pgvector on the server "
            "(https://github.com/pgvector/pgvector) and rerun."
        )
    if isinstance(exc, psycopg.OperationalError):
        return StoreError(
            f"Cannot reach PostgreSQL at {where} (while {doing}): {text}. Check that the server runs and that "
            "TMEM_DATABASE_URL / --database-url names the right host, port, database, user and password."
        )
    return StoreError(
        f"PostgreSQL at {where} failed while {doing}: {text}. Rerun the command; if it persists, run `tmem check`."
    )


PROBE_SECONDS = (
    2.0  # an unreachable database fails within this (libpq's connect_timeout, whole seconds, 2 at the least)
)


def probe(conninfo: str, timeout_s: float) -> None:
    """Connect once before a pool is opened: an unreachable database is one StoreError naming its host and port at
    once, instead of a pool that logs every retry until its own timeout (30 s)."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error:  # its text quotes the URL, password included: not shown
        raise StoreError(
            "The database URL cannot be parsed; write it as postgresql://USER:PASSWORD@HOST:PORT/DB (percent-encode "
            "special characters of the password)."
        ) from None
    password = str(params.get("password") or "")
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    database = params.get("dbname") or params.get("user") or "(default)"
    try:
        with psycopg.connect(conninfo, connect_timeout=max(2, round(timeout_s))):
            pass
    except psycopg.Error as exc:
        raise StoreError(
            f"Cannot connect to PostgreSQL at {host}:{port} (database {database}): {_first_line(exc, password)}. "
            "Check that the server runs there and that TMEM_DATABASE_URL / --database-url names the right host, "
            "port, database, user and password."
        ) from None


def _first_line(exc: Exception, secret: str) -> str:
    """The first line of a driver error, without the password (libpq does not print it; this makes sure)."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text.replace(secret, "***") if secret else text


class PgBase:
    """Pool, pinned transactions and statement helpers shared by the PostgreSQL store's parts."""

    def __init__(self, pool: ConnectionPool[Any], url: str) -> None:
        self._pool = pool
        self._url = url
        self._where = redact(url)
        self._local = threading.local()

    @classmethod
    def connect(cls, url: str, *, max_size: int = 8, timeout_s: float = 30.0) -> ConnectionPool[Any]:
        """Open a pool on ``url`` and migrate the schema (StoreError naming the fix when that fails)."""
        conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        where = redact(url)
        probe(conninfo, min(timeout_s, PROBE_SECONDS))
        try:
            pool: ConnectionPool[Any] = ConnectionPool(
                conninfo,
                min_size=1,
                max_size=max_size,
                timeout=timeout_s,
                open=False,
                configure=configure_session,
                name="tmem",  # no check on every borrow (a round trip each): a broken connection is an error once
            )
            pool.open(wait=True, timeout=timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            raise StoreError(
                f"Cannot connect to PostgreSQL at {where}: {exc}. Check that the server runs and that "
                "TMEM_DATABASE_URL / --database-url names the right host, port, database, user and password."
            ) from exc
        try:
            upgrade_postgres(lambda: psycopg.connect(conninfo))
        except psycopg.Error as exc:
            pool.close()
            raise pg_store_error(exc, where, "creating or migrating the schema") from exc
        except StoreError:
            pool.close()
            raise
        return pool

    @property
    def where(self) -> str:
        return self._where

    @property
    def url(self) -> str:
        """The database URL this store was opened with (password included: show :attr:`where` instead)."""
        return self._url

    def close(self) -> None:
        self._pool.close()

    # ------------------------------------------------------------------ connections and transactions
    def _pinned(self) -> psycopg.Connection[Any] | None:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    def _writing(self) -> bool:
        """Whether this thread is inside :meth:`transaction` (a snapshot is read-only: PostgreSQL refuses writes)."""
        return self._pinned() is not None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All store calls of this thread inside the block run on one connection and commit together."""
        if self._pinned() is not None:
            yield
            return
        try:
            with self._pool.connection() as conn:  # commits at the end, rolls back on an exception
                self._pin(conn)
                try:
                    yield
                finally:
                    self._local.conn = None
        except PoolTimeout as exc:
            raise StoreError(
                f"No free connection to PostgreSQL at {self._where} within the pool timeout: every connection is "
                "busy. Raise the pool size or the server's max_connections, or run fewer workers."
            ) from exc
        except psycopg.Error as exc:
            raise pg_store_error(exc, self._where, "committing") from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if self._pinned() is not None:
            yield
            return
        with self.transaction():
            conn = self._pinned()
            assert conn is not None
            try:
                conn.commit()  # pinning may have read the type catalogue: the snapshot's transaction starts here
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, "starting a read") from exc
            yield

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        pinned = self._pinned()
        if pinned is not None:
            yield pinned
            return
        with self.transaction():
            conn = self._pinned()
            assert conn is not None
            yield conn

    def _pin(self, conn: psycopg.Connection[Any]) -> None:
        try:
            ensure_registered(conn)
        except psycopg.Error as exc:
            raise pg_store_error(exc, self._where, "loading the vector type") from exc
        self._local.conn = conn

    def _named(self, sql: str, params: Any, *, binary: bool = False) -> list[dict[str, Any]]:
        """Run one query; rows as {column name: value}."""
        with self._conn() as conn:
            try:
                cursor = conn.execute(sql, params, binary=binary)
                names = [d.name for d in cursor.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, f"reading ({_verb(sql)})") from exc
            except UnicodeEncodeError as exc:
                raise not_utf8(exc) from exc

    def _rows(self, sql: str, params: Any = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Run one query; ``binary`` asks for results in binary form (vectors arrive as raw float4s, not text)."""
        with self._conn() as conn:
            try:
                return list(conn.execute(sql, params, binary=binary).fetchall())
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, f"reading ({_verb(sql)})") from exc
            except UnicodeEncodeError as exc:
                raise not_utf8(exc) from exc

    def _exec(self, sql: str, params: Any = ()) -> int:
        """Run one statement; returns the number of rows it touched."""
        with self._conn() as conn:
            try:
                return conn.execute(sql, params).rowcount
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, f"running {_verb(sql)}") from exc
            except UnicodeEncodeError as exc:
                raise not_utf8(exc) from exc

    def _many(self, sql: str, rows: Sequence[Any]) -> None:
        if not rows:
            return
        with self._conn() as conn:
            try:
                with conn.cursor() as cur:
                    cur.executemany(sql, rows)
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, f"running {_verb(sql)}") from exc
            except UnicodeEncodeError as exc:
                raise not_utf8(exc) from exc

    @staticmethod
    def _identity(table: Table, column: str) -> dict[str, Any]:
        """PostgreSQL numbers identity columns itself."""
        del table, column
        return {}


def _verb(sql: str) -> str:
    """What a statement does, in words ("select on items"): an error text never quotes SQL (issue 33)."""
    words = sql.replace("(", " ").replace(",", " ").split() or ["a statement"]
    table = next((b for a, b in itertools.pairwise(words) if a.upper() in ("FROM", "INTO", "UPDATE")), "")
    return f"{words[0].lower()} on {table}" if table else words[0].lower()
