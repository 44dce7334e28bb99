"""What every store operation is written against: SQLAlchemy Core statements over :mod:`tmem.store.schema`, run
through ``Connection.execute`` (SQLAlchemy's own compiled cache) on the store's Engine, in the one transaction idiom
of both dialects (:mod:`tmem.store.txn`): the connection of the transaction or snapshot the calling code is inside is
carried in a ``ContextVar``; a statement outside one runs on a connection of its own. Rows come back as
{column name: value}.

A backend supplies its engines (:mod:`tmem.store.sqlite_base`: a writer whose transactions begin with ``BEGIN
IMMEDIATE`` and a reader pool; :mod:`tmem.store.pg_base`: one pooled engine), the execution options that begin its
writes and snapshots, its error translation, and the few things the databases do differently: how an identity column
gets its next value, and how a vector is sent and read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from sqlalchemy import ColumnElement, Connection, Engine, Executable, Table, and_
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.engine.interfaces import Dialect as SADialect

from tmem.errors import InputError, StoreError
from tmem.scope import Scope
from tmem.store.base import Vector, iter_batches
from tmem.store.rules import not_utf8
from tmem.store.txn import binding, bound

if TYPE_CHECKING:
    from tmem.store.postgres import PostgresStore

CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits
DialectName = Literal["sqlite", "postgresql"]
Insert = sqlite.Insert | postgresql.Insert
_WRITE_IN_SNAPSHOT = "A write inside Store.snapshot() (a read of one committed state): write after the block."
# The drivers' positional parameter styles (``?``, ``%s``): a bulk insert sends each row as a tuple, no dict per row.
_POSITIONAL: dict[str, SADialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": psycopg.dialect(paramstyle="format"),  # type: ignore[no-untyped-call]
}


class SQLOps:
    """The transaction idiom and statement helpers shared by every operation mixin; the backend class supplies its
    engines, execution options and error translation."""

    dialect: ClassVar[DialectName]
    _writer: Engine  # the engine writes run on
    _reader: Engine  # the engine reads outside a transaction and snapshots run on (the writer's where there is one)
    _write_options: ClassVar[Mapping[str, Any]] = {}  # execution options of a write transaction's connection
    _snapshot_options: ClassVar[Mapping[str, Any]] = {}  # ... and of a snapshot's

    _driver_error: ClassVar[type[Exception]]  # the driver's base exception
    _where: str  # the database, as messages name it (no password)

    if TYPE_CHECKING:  # supplied by the backend class (listed first among its bases)

        def _store_error(self, exc: Exception, doing: str) -> StoreError | InputError:
            """The project's error for a driver error raised while ``doing``."""
            ...

        def _busy(self, doing: str) -> str:
            """What to do when no connection of the engine became free in time."""
            ...

        def _identity(self, table: Table, column: str) -> dict[str, Any]:
            """Values that number an identity column on insert ({} where the database numbers it)."""
            ...

        def _vector_param(self, vec: Vector) -> Any: ...

        def _vector_value(self, value: Any) -> Vector: ...

    # ------------------------------------------------------------------ capabilities
    @property
    def is_postgres(self) -> bool:
        """Whether the store's dialect is PostgreSQL (for the few statements the dialects write differently)."""
        return self.dialect == "postgresql"

    def vector_host(self) -> PostgresStore | None:
        """None: each searching process holds the spaces' vectors (the PostgreSQL store returns itself)."""
        return None

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All store calls of this context inside the block run on one connection and commit together (nested blocks
        join the outermost)."""
        current = bound(self)
        if current is not None:
            if not current.writing:
                raise StoreError(_WRITE_IN_SNAPSHOT)
            yield
            return
        with self._bound(self._writer, self._write_options, writing=True):
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of this context inside the block sees one committed state (joins an enclosing transaction,
        which sees its own writes); writes inside are refused."""
        if bound(self) is not None:
            yield
            return
        with self._bound(self._reader, self._snapshot_options, writing=False):
            yield

    def _writing(self) -> bool:
        """Whether the caller is inside :meth:`transaction`."""
        current = bound(self)
        return current is not None and current.writing

    @contextmanager
    def _bound(self, engine: Engine, options: Mapping[str, Any], *, writing: bool) -> Iterator[None]:
        """A connection of ``engine`` in a transaction begun with ``options``, bound to this context for the block;
        committed at its end when ``writing``, else (and on an exception) rolled back."""
        doing = "starting a write" if writing else "starting a read"
        with self._errors(doing):
            conn = engine.connect()
        try:
            with self._errors(doing):
                conn.execution_options(**options).begin()
            with binding(self, conn, writing=writing):
                yield
            if writing:
                with self._errors("committing"):
                    try:
                        conn.commit()
                    except BaseException:
                        # a failed COMMIT may leave the transaction open: roll it back, or later writes would fail
                        driver(conn).rollback()
                        raise
        finally:
            conn.close()  # a transaction still open is rolled back as the pool takes the connection back

    @contextmanager
    def _connection(self, *, write: bool) -> Iterator[Connection]:
        """The connection one statement runs on: the bound one, else a write's own transaction, else a connection
        of the reader engine for this statement."""
        current = bound(self)
        if current is not None:
            if write and not current.writing:
                raise StoreError(_WRITE_IN_SNAPSHOT)
            yield current.conn
        elif write:
            with self.transaction():
                yield self._bound_connection()
        else:
            with self._errors("starting a read"):
                conn = self._reader.connect()
            with conn:
                yield conn

    @contextmanager
    def _transaction_driver(self) -> Iterator[Any]:
        """The driver connection of this context's transaction (one begun for the block where there is none), for
        what only the driver offers (PostgreSQL's COPY)."""
        with self._connection(write=True) as conn:
            yield driver(conn)

    def _bound_connection(self) -> Connection:
        current = bound(self)
        if current is None:
            raise StoreError("No store transaction is open in this context: this is a bug in tmem; please report it.")
        return current.conn

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Driver errors inside the block as the project's: the backend's ``StoreError`` naming the database and what
        was being done (``doing``, its ``{}`` filled with the head of the failing statement), or the input error for
        text that is not valid UTF-8."""
        try:
            yield
        except sa_exc.StatementError as exc:
            cause, at = exc.orig, doing.format(verb(exc.statement))
            if isinstance(cause, UnicodeEncodeError):
                raise not_utf8(cause) from exc
            if isinstance(cause, self._driver_error):
                raise self._store_error(cause, at) from exc
            raise StoreError(
                f"The memory store {self._where} failed while {at}: {cause}. This is a bug in tmem; please report it."
            ) from exc
        except sa_exc.TimeoutError as exc:
            raise StoreError(self._busy(doing)) from exc
        except UnicodeEncodeError as exc:
            raise not_utf8(exc) from exc
        except Exception as exc:  # the driver's own, from a driver connection used directly; others pass as they are
            if isinstance(exc, self._driver_error):
                raise self._store_error(exc, doing.format("")) from exc
            raise

    # ------------------------------------------------------------------ statements
    def _fetch(
        self, stmt: Executable, *, binary: bool = False, values: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Rows of ``stmt`` as {column name: value} (``values`` fill its ``bindparam`` s of no value; ``binary``
        asks for results in binary form where the driver can send them: vectors as raw float4s)."""
        with self._connection(write=False) as conn, self._errors("reading ({})"):
            if binary:
                return self._fetch_binary(conn, stmt, values)
            result = conn.execute(stmt, dict(values) if values else None)
            keys = list(result.keys())
            return [dict(zip(keys, row, strict=True)) for row in result]

    def _fetch_binary(
        self, conn: Connection, stmt: Executable, values: Mapping[str, Any] | None
    ) -> list[dict[str, Any]]:
        """:meth:`_fetch` in binary form (the drivers that have no such form read as usual)."""
        result = conn.execute(stmt, dict(values) if values else None)
        keys = list(result.keys())
        return [dict(zip(keys, row, strict=True)) for row in result]

    def _scalar(self, stmt: Executable) -> Any:
        rows = self._fetch(stmt)
        return next(iter(rows[0].values())) if rows else None

    def _run(self, stmt: Executable) -> int:
        """Run one write; the number of rows it touched."""
        with self._connection(write=True) as conn, self._errors("running {}"):
            return conn.execute(stmt).rowcount

    def _run_many(self, stmt: Executable, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement for many rows (every row has the same keys)."""
        if not rows:
            return
        with self._connection(write=True) as conn, self._errors("running {}"):
            conn.execute(stmt, [dict(row) for row in rows])

    def _rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Rows of one query written in the driver's SQL (its parameter style)."""
        with self._connection(write=False) as conn, self._errors("reading ({})"):
            return [tuple(row) for row in conn.exec_driver_sql(sql, _one(params))]

    def _exec(self, sql: str, params: Any = ()) -> int:
        """Run one statement written in the driver's SQL; the number of rows it touched."""
        with self._connection(write=True) as conn, self._errors("running {}"):
            return conn.exec_driver_sql(sql, _one(params)).rowcount

    def _insert_rows(self, table: Table, columns: tuple[str, ...], rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows``, tuples of ``columns`` (in the table's column order): the bulk path of imports, one
        executemany of positional rows with the INSERT compiled once (:func:`insert_sql`)."""
        if rows:
            with self._connection(write=True) as conn, self._errors("running {}"):
                conn.exec_driver_sql(insert_sql(self.dialect, table, columns), list(rows))

    def _insert(self, table: Table) -> Insert:
        return sqlite.insert(table) if self.dialect == "sqlite" else postgresql.insert(table)

    def _upsert(self, table: Table, keys: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows``, replacing the other columns of a row whose key columns exist."""
        if not rows:
            return
        stmt = self._insert(table)
        index = [table.c[k] for k in keys]
        update = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
        self._run_many(stmt.on_conflict_do_update(index_elements=index, set_=update), rows)

    def _insert_new(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows``, keeping an existing row with the same key as it is."""
        self._run_many(self._insert(table).on_conflict_do_nothing(), rows)

    # ------------------------------------------------------------------ scope
    @staticmethod
    def _scoped(scope: Scope, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` with the scope's (tenant, space) columns."""
        tenant, key = scope.tenant, scope.key
        return [{"tenant": tenant, "space": key, **r} for r in rows]

    @staticmethod
    def _in(table: Table, scope: Scope) -> ColumnElement[bool]:
        """The rows of ``scope`` in ``table``."""
        return _scope(table, scope)

    @staticmethod
    def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
        """Distinct ``ids`` in lists short enough for one IN (...)."""
        for chunk in iter_batches(list(dict.fromkeys(ids)), CHUNK):
            yield list(chunk)


def _one(params: Any) -> Any:
    """One parameter set for ``exec_driver_sql`` (a list there means many)."""
    return tuple(params) if isinstance(params, list) else params


def driver(conn: Connection) -> Any:
    """The driver's own connection under ``conn``."""
    raw = conn.connection.driver_connection
    if raw is None:
        raise StoreError("The store's connection was closed while in use: this is a bug in tmem; please report it.")
    return raw


def verb(sql: str | None) -> str:
    """The head of a statement for error messages (``INSERT INTO items``)."""
    return " ".join((sql or "").split("(")[0].split()[:4])


@lru_cache(maxsize=64)
def insert_sql(dialect: DialectName, table: Table, columns: tuple[str, ...]) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...)`` for ``dialect`` with positional parameters, compiled from the
    MetaData table once per (dialect, table, columns)."""
    compiled = table.insert().compile(dialect=_POSITIONAL[dialect], column_keys=list(columns))
    order = tuple(compiled.positiontup or ())
    if order != columns:  # SQLAlchemy binds an INSERT's columns in the table's order, whatever order they are named
        raise StoreError(
            f"A bulk insert into {table.name} names its columns {columns}, but the table orders them {order}: this "
            "is a bug in tmem (the mapper's column list must follow tmem.store.schema); please report it."
        )
    return compiled.string


@lru_cache(maxsize=4096)
def _scope(table: Table, scope: Scope) -> ColumnElement[bool]:
    """``tenant = T AND space = S`` for ``table`` (clauses are immutable: one per table and recent scope, since
    building the comparison is most of a point read's time)."""
    column = table.c.name if table.name == "spaces" else table.c.space
    return and_(table.c.tenant == scope.tenant, column == scope.key)


def vector_bytes(vec: Vector) -> bytes:
    """A vector as SQLite stores it: its float32 values."""
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()
