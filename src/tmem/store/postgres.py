"""PostgreSQL (+ pgvector) implementation of :class:`tmem.store.base.Store`, for many users and many processes.

Open with :meth:`PostgresStore.open` (or ``open_store("postgresql://...")``). Connections come from its Engine's pool
(:mod:`tmem.store.pg_base`). The operations are the shared ones
(:mod:`tmem.store.ops_ledger` and its bases, over :mod:`tmem.store.schema`); here only what PostgreSQL does its own
way: vectors as pgvector values (binary I/O, :mod:`tmem.store.pg_vector`), the erasure ledger's commit order (an
advisory lock) and its transaction ids, and VACUUM as the erasure primitive.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import literal_column, text

from tmem.errors import StoreError
from tmem.store.base import Vector
from tmem.store.ops_ledger import LedgerOps
from tmem.store.pg_base import PgBase
from tmem.store.sql import driver
from tmem.store.txn import bound

_ERASURE_LOCK = 7_460_135_023  # pg_advisory_xact_lock key serialising erasure-ledger inserts


class PostgresStore(PgBase, LedgerOps):
    """The server store. ``max_size`` bounds the pool (connections this process may hold at once)."""

    dialect = "postgresql"

    @classmethod
    def open(cls, url: str, *, max_size: int = 8, timeout_s: float = 30.0) -> PostgresStore:
        return cls(cls.connect(url, max_size=max_size, timeout_s=timeout_s), url)

    def vector_host(self) -> PostgresStore:
        """This store: its database keeps the spaces' vectors (pgvector, :mod:`tmem.index.pgvector`)."""
        return self

    def _vector_param(self, vec: Vector) -> Any:
        return np.asarray(vec, np.float32)

    def _vector_value(self, value: Any) -> Vector:
        return np.asarray(value, dtype=np.float32)

    def _erasure_values(self) -> dict[str, Any]:
        # scrub() checks that no snapshot older than the deleting transaction is still open
        return {"xid": literal_column("pg_current_xact_id()::text::bigint")}

    def _serialise_erasures(self) -> None:
        self._fetch(text(f"SELECT pg_advisory_xact_lock({_ERASURE_LOCK})"))

    def scrub(self, *, vacuum: bool = True) -> bool:
        """The erasure primitive on PostgreSQL: ``VACUUM`` of tmem's tables, so deleted rows' dead tuples are pruned
        from their pages (``vacuum`` is accepted for the protocol; ``VACUUM FULL``, which would also rewrite the
        files, takes an exclusive lock on a shared server and is left to maintenance). False when another
        connection still holds a snapshot taken before the latest pending erasure of the ledger committed (VACUUM
        keeps the rows it may read): run it again later (``tmem.edit.erasure`` does); snapshots taken after it do not
        count, so a busy server's searches do not hold an erasure up. The server's WAL, replicas and backups keep older
        data until they rotate: see docs/scaling.md, "Erasure on PostgreSQL"."""
        del vacuum
        if bound(self) is not None:
            raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
        tables = [r[0] for r in self._rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        with self._errors("vacuuming deleted rows away"), self._writer.connect() as sa_conn:
            conn = driver(sa_conn)
            conn.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                for table in tables:
                    conn.execute(f'VACUUM "{table}"')
                # VACUUM keeps every dead row that an open snapshot may still read: when another session's oldest
                # snapshot (backend_xmin) is not newer than the latest pending erasure's deleting transaction, the
                # deleted rows may have been kept, so the erasure is reported pending and retried (tmem.edit.erasure).
                # Sessions whose snapshots began after the deletion committed do not hold it up.
                row = conn.execute(
                    "SELECT COUNT(*) FROM pg_stat_activity a, "
                    "(SELECT MAX(xid) AS d FROM erasures WHERE NOT erased) e "
                    "WHERE e.d IS NOT NULL AND a.datname = current_database() AND a.pid <> pg_backend_pid() "
                    "AND a.backend_xmin IS NOT NULL AND age(a.backend_xmin) >= age(((e.d % 4294967296)::text)::xid)"
                ).fetchone()
            finally:
                conn.autocommit = False
        return not (row and row[0])
