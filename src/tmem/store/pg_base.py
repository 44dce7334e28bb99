"""The engine and errors of the PostgreSQL store (the record methods live in the subclasses; the transaction idiom
in :mod:`tmem.store.sql`).

A store holds a SQLAlchemy Engine on psycopg, whose pool hands out connections with the session's settings and the
``vector`` type registered (:mod:`tmem.store.pg_vector`). Outside a transaction each statement borrows a connection;
a transaction, or a snapshot (``REPEATABLE READ, READ ONLY``), binds one to the calling context until the outermost
block ends, and every store call made inside the block joins it. Contexts never share a bound connection, so one
store object serves a multi-threaded API worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Connection, Engine, Executable, Table, create_engine, event
from sqlalchemy import exc as sa_exc

from tmem.errors import InputError, IntegrityError, StoreError
from tmem.settings import redact
from tmem.store.pg_vector import configure_session, ensure_registered
from tmem.store.sql import driver
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
    """The engine and the PostgreSQL side of the statement helpers."""

    _driver_error: ClassVar[type[Exception]] = psycopg.Error
    _snapshot_options: ClassVar[Mapping[str, Any]] = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}

    def __init__(self, engine: Engine, url: str) -> None:
        self._writer = self._reader = engine
        self._url = url
        self._where = redact(url)

    @classmethod
    def connect(cls, url: str, *, max_size: int = 8, timeout_s: float = 30.0) -> Engine:
        """Migrate the schema and open an engine of at most ``max_size`` connections on ``url`` (StoreError naming
        the fix when that fails)."""
        conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
        where = redact(url)
        probe(conninfo, min(timeout_s, PROBE_SECONDS))
        try:
            upgrade_postgres(lambda: psycopg.connect(conninfo))
        except psycopg.Error as exc:
            raise pg_store_error(exc, where, "creating or migrating the schema") from exc
        engine = create_engine(
            "postgresql+psycopg://",
            creator=lambda: psycopg.connect(conninfo),
            pool_size=max_size,
            max_overflow=0,
            pool_timeout=timeout_s,
        )
        event.listen(engine, "connect", _configure)
        try:
            with engine.connect():
                pass  # fails here, once, when the server cannot be used
        except sa_exc.DBAPIError as exc:
            engine.dispose()
            if isinstance(exc.orig, psycopg.Error):
                raise pg_store_error(exc.orig, where, "connecting") from exc
            raise
        except StoreError:
            engine.dispose()
            raise
        return engine

    @property
    def where(self) -> str:
        return self._where

    @property
    def url(self) -> str:
        """The database URL this store was opened with (password included: show :attr:`where` instead)."""
        return self._url

    def close(self) -> None:
        self._writer.dispose()

    def _store_error(self, exc: Exception, doing: str) -> StoreError | InputError:
        assert isinstance(exc, psycopg.Error)
        return pg_store_error(exc, self._where, doing)

    def _busy(self, doing: str) -> str:
        return (
            f"No free connection to PostgreSQL at {self._where} within the pool timeout (while {doing}): every "
            "connection is busy. Raise the pool size or the server's max_connections, or run fewer workers."
        )

    def _fetch_binary(
        self, conn: Connection, stmt: Executable, values: Mapping[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Rows in binary form (vectors arrive as raw float4s, not printed decimals): the statement compiled by the
        documented ``compile()`` and run on the driver connection, which alone can ask for binary results."""
        compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})  # type: ignore[attr-defined]
        params = compiled.construct_params(dict(values) if values else None)
        cursor = driver(conn).execute(compiled.string, params, binary=True)
        names = [d.name for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    @staticmethod
    def _identity(table: Table, column: str) -> dict[str, Any]:
        """PostgreSQL numbers identity columns itself."""
        del table, column
        return {}


def _configure(dbapi_connection: psycopg.Connection[Any], _record: object) -> None:
    """Every new pooled connection: the session's settings, and the ``vector`` type (numpy arrays in and out)."""
    configure_session(dbapi_connection)
    ensure_registered(dbapi_connection)
    dbapi_connection.commit()  # reading the type catalogue opened a transaction
