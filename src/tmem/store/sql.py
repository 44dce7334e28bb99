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
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from sqlalchemy import ClauseElement, ColumnElement, Table, and_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect as SADialect

from tmem.store.base import Vector, iter_batches
from tmem.store.rules import tenant_of

CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits
DialectName = Literal["sqlite", "postgresql"]
Insert = sqlite.Insert | postgresql.Insert


class SQLOps:
    """Statement helpers shared by every operation mixin; the backend class fills in the primitives."""

    dialect: ClassVar[DialectName]
    _sa_dialect: ClassVar[SADialect]

    if TYPE_CHECKING:  # supplied by the backend class (listed first among its bases)

        def transaction(self) -> AbstractContextManager[None]: ...

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
        """Whether the store is the PostgreSQL one (its spaces' vectors live in the database: pgvector)."""
        return self.dialect == "postgresql"

    # ------------------------------------------------------------------ statements
    def _compile(self, stmt: ClauseElement, keys: Sequence[str] | None = None) -> tuple[str, dict[str, Any]]:
        compiled = stmt.compile(
            dialect=self._sa_dialect, column_keys=list(keys) if keys is not None else None,
            compile_kwargs={"render_postcompile": True},
        )  # fmt: skip
        return str(compiled), dict(compiled.params)

    def _fetch(self, stmt: ClauseElement, *, binary: bool = False) -> list[dict[str, Any]]:
        sql, params = self._compile(stmt)
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
    def _key(space: str) -> tuple[str, str]:
        """(tenant, space): the leading key of every row and every statement."""
        return tenant_of(space), space

    def _scoped(self, space: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` with the space's (tenant, space) columns."""
        tenant = tenant_of(space)
        return [{"tenant": tenant, "space": space, **r} for r in rows]

    @staticmethod
    def _in(table: Table, space: str) -> ColumnElement[bool]:
        """The rows of ``space`` in ``table``."""
        column = table.c.name if table.name == "spaces" else table.c.space
        return and_(table.c.tenant == tenant_of(space), column == space)

    @staticmethod
    def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
        """Distinct ``ids`` in lists short enough for one IN (...)."""
        for chunk in iter_batches(list(dict.fromkeys(ids)), CHUNK):
            yield list(chunk)


def vector_bytes(vec: Vector) -> bytes:
    """A vector as SQLite stores it: its float32 values."""
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()
