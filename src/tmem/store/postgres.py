"""PostgreSQL (+ pgvector) implementation of :class:`tmem.store.base.Store`, for many users and many processes.

Open with :meth:`PostgresStore.open` (or ``open_store("postgresql://...")``). Connections come from its Engine's pool
(:mod:`tmem.store.pg_base`). The operations are the shared ones
(:mod:`tmem.store.ops_ledger` and its bases, over :mod:`tmem.store.schema`); here only what PostgreSQL does its own
way: vectors as pgvector values (binary I/O, :mod:`tmem.store.pg_vector`), the erasure ledger's commit order (an
advisory lock) and its transaction ids, and VACUUM (FULL, ANALYZE) as the erasure primitive.
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
LOCK_TIMEOUT = "2s"
_CLEAR_STATISTICS = (  # pg_clear_attribute_stats (PostgreSQL 18+, the table's owner) of every column with statistics
    "SELECT pg_clear_attribute_stats(schemaname::text, tablename::text, attname::text, inherited) FROM pg_stats "
    "WHERE schemaname = current_schema() AND tablename = %(table)s"
)
_DELETE_STATISTICS = "DELETE FROM pg_catalog.pg_statistic WHERE starelid = quote_ident(%(table)s)::regclass"  # the longest a scrub's table rewrite waits for readers; then the erasure stays pending
_MAY_COMPACT_STATISTICS = (  # superuser, the database's owner, or MAINTAIN on pg_statistic (PostgreSQL 17+)
    "SELECT r.rolsuper OR d.datdba = r.oid OR CASE WHEN current_setting('server_version_num')::int >= 170000 "
    "THEN has_table_privilege('pg_catalog.pg_statistic', 'MAINTAIN') ELSE false END "
    "FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()"
)


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
        """The erasure primitive on PostgreSQL (docs/security.md, "Erasure, per backend"): ``VACUUM (FULL,
        ANALYZE)`` of tmem's tables, which writes each table, its TOAST table and its indexes to new files (the old
        ones are emptied at once and unlinked at the next checkpoint) and refreshes the planner statistics, then
        ``VACUUM FULL pg_statistic``, whose old rows held sampled values (``pg_stats``; ANALYZE leaves an emptied
        table's statistics as they were, so those are cleared, PostgreSQL 18's ``pg_clear_attribute_stats``). A rewrite waits at most
        LOCK_TIMEOUT for its table's lock (readers hold it briefly). False when another connection still holds a
        snapshot taken before the latest pending erasure committed (a rewrite keeps the rows it may read): run it
        again later (``tmem.edit.erasure`` does). A StoreError when the database user may not compact
        ``pg_statistic`` (it must own the database, or hold MAINTAIN on it), saying so. The server's WAL, replicas
        and backups keep older data until they rotate: the operator's step (docs/security.md)."""
        del vacuum
        if bound(self) is not None:
            raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
        tables = [r[0] for r in self._rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        with self._errors("vacuuming deleted rows away"), self._writer.connect() as sa_conn:
            conn = driver(sa_conn)
            conn.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                if not conn.execute(_MAY_COMPACT_STATISTICS).fetchone()[0]:
                    raise StoreError(
                        f"The database user of {self._where} may not compact pg_statistic, which keeps sampled "
                        "values of erased rows: make it the database's owner (ALTER DATABASE ... OWNER TO ...) or "
                        "GRANT MAINTAIN ON pg_catalog.pg_statistic TO it (PostgreSQL 17+). The erasure stays pending."
                    )
                conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
                for table in tables:
                    conn.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
                    if conn.execute(f'SELECT NOT EXISTS (SELECT 1 FROM "{table}")').fetchone() == (True,):
                        # ANALYZE keeps an emptied table's old statistics; before PostgreSQL 18 only a superuser may
                        # delete them (another user's erasure then stays pending, saying so)
                        clear = _CLEAR_STATISTICS if conn.info.server_version >= 180000 else _DELETE_STATISTICS
                        conn.execute(clear, {"table": table})
                conn.execute("VACUUM FULL pg_catalog.pg_statistic")
                # A rewrite keeps every dead row that an open snapshot may still read: when another session's oldest
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
                if not conn.closed:
                    conn.execute("RESET lock_timeout")
                conn.autocommit = False
        return not (row and row[0])
