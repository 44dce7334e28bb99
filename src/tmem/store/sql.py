"""What every store operation is written against: SQLAlchemy Core statements over :mod:`tmem.store.schema`, compiled
for the store's dialect and run on the backend's own connection (:mod:`tmem.store.sqlite_base`,
:mod:`tmem.store.pg_base`), whose transactions (``BEGIN IMMEDIATE`` on SQLite, a pinned pooled connection per thread
on PostgreSQL) stay exactly as they were. Rows come back as mappings read by column name.

A backend supplies the driver primitives (``_named``, ``_exec``, ``_many``, ``transaction``) and the few things the
databases do differently (:class:`Dialect`): the ``INSERT`` with ``ON CONFLICT`` of its dialect, how an identity
column gets its next value, and how a vector is sent and read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import numpy as np
from sqlalchemy import ClauseElement, ColumnElement, Table, and_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.engine.interfaces import Dialect as SADialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util import LRUCache

from tmem.errors import StoreError
from tmem.scope import Scope
from tmem.store.base import Vector, iter_batches

if TYPE_CHECKING:
    from tmem.store.postgres import PostgresStore

# Compiled statements by SQLAlchemy cache key, per dialect (an engine's compiled cache, bounded the same way).
_COMPILED: dict[str, LRUCache[Any, Any]] = {"sqlite": LRUCache(2000), "postgresql": LRUCache(2000)}
CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits
DialectName = Literal["sqlite", "postgresql"]
Insert = sqlite.Insert | postgresql.Insert
# The drivers' positional parameter styles (``?``, ``%s``): a bulk insert sends each row as a tuple, no dict per row.
_POSITIONAL: dict[str, SADialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": psycopg.dialect(paramstyle="format"),  # type: ignore[no-untyped-call]
}


class SQLOps:
    """Statement helpers shared by every operation mixin; the backend class fills in the primitives."""

    dialect: ClassVar[DialectName]
    _sa_dialect: ClassVar[SADialect]

    if TYPE_CHECKING:  # supplied by the backend class (listed first among its bases)

        def transaction(self) -> AbstractContextManager[None]: ...

        def snapshot(self) -> AbstractContextManager[None]: ...

        def _named(self, sql: str, params: Any, *, binary: bool = False) -> list[dict[str, Any]]:
            """Run one query; rows as {column name: value}."""
            ...

        def _exec(self, sql: str, params: Any = ()) -> int: ...

        def _many(self, sql: str, rows: Sequence[Any]) -> None: ...

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

    # ------------------------------------------------------------------ statements
    def _compile(
        self, stmt: ClauseElement, keys: Sequence[str] | None = None, values: Mapping[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The SQL text and parameters of ``stmt`` for this dialect (``keys``: the columns an executemany insert
        binds). Compiled forms are cached by SQLAlchemy's cache key, as an engine's execution does: two calls of one
        operation differ in their values only, and IN lists are expanded per call. ``values`` fill the statement's
        ``bindparam`` s of no value: a statement built once at import time and run with each call's values."""
        compiled, extracted, *_ = stmt._compile_w_cache(
            self._sa_dialect, compiled_cache=_COMPILED[self.dialect], column_keys=list(keys or ())
        )
        sql_compiler = cast(SQLCompiler, compiled)
        params = sql_compiler.construct_params(
            params=dict(values) if values else None, extracted_parameters=extracted, _check=False
        )
        if keys is not None or not (sql_compiler.post_compile_params or sql_compiler.literal_execute_params):
            return sql_compiler.string, dict(params)  # nothing rendered per call (no IN list): the cached text
        state = sql_compiler.construct_expanded_state(params)
        return state.statement, dict(state.parameters)

    def _fetch(
        self, stmt: ClauseElement, *, binary: bool = False, values: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        sql, params = self._compile(stmt, values=values)
        return self._named(sql, params, binary=binary)

    def _scalar(self, stmt: ClauseElement) -> Any:
        rows = self._fetch(stmt)
        return next(iter(rows[0].values())) if rows else None

    def _run(self, stmt: ClauseElement) -> int:
        sql, params = self._compile(stmt)
        return self._exec(sql, params)

    def _run_many(self, stmt: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement for many rows (every row has the same keys)."""
        if not rows:
            return
        sql, constants = self._compile(stmt, list(rows[0]))
        self._many(sql, [{**constants, **row} for row in rows])

    def _insert_rows(self, table: Table, columns: tuple[str, ...], rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows``, tuples of ``columns`` (in the table's column order): the bulk path of imports, one
        executemany of positional rows with the INSERT compiled once (:func:`insert_sql`)."""
        if rows:
            self._many(insert_sql(self.dialect, table, columns), rows)

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
