"""The store's one transaction idiom, for both dialects: a SQLAlchemy Engine (its pool) per store, and the
Connection of the transaction or snapshot the calling code is inside carried in a ``ContextVar``, so that every store
call made inside the block joins it, and threads (each its own context) never share one.

A backend opens the connections (:meth:`tmem.store.sql.SQLOps.transaction` and ``snapshot``); this module only
records which one the current context is bound to, per store object."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType

from sqlalchemy import Connection


@dataclass(frozen=True, slots=True)
class Bound:
    """The connection of the block the current context is inside; ``writing`` False for a snapshot (a read of one
    committed state, where writes are refused)."""

    conn: Connection
    writing: bool


_NONE: Mapping[object, Bound] = MappingProxyType({})
# store object -> its bound connection, in this context (a new mapping per bind: contexts never share one)
_BOUND: ContextVar[Mapping[object, Bound]] = ContextVar("tmem_store_bound", default=_NONE)


def bound(store: object) -> Bound | None:
    """The connection ``store`` is bound to in the current context (None outside its transactions and snapshots)."""
    return _BOUND.get().get(store)


@contextmanager
def binding(store: object, conn: Connection, *, writing: bool) -> Iterator[None]:
    """Bind ``conn`` to ``store`` in the current context for the block."""
    token = _BOUND.set(MappingProxyType({**_BOUND.get(), store: Bound(conn, writing)}))
    try:
        yield
    finally:
        _BOUND.reset(token)
