"""Bench helper: copy one space from a SQLite store into a PostgreSQL store with COPY, table by table.

Writing a large synthetic space through the Store API on PostgreSQL takes most of a bounded bench run (row-by-row
inserts with conflict handling, foreign-key checks per statement, one round trip per batch). The scale benches
therefore write the space once through the Store API on SQLite, then copy the very same rows into PostgreSQL here:
every column of every table of the space, the ``tenant`` column written from the space key as the Store API does.
Both backends have one schema (tmem.store.schema: same tables, columns and text encodings of dates and JSON), so the
copy holds the rows the PostgreSQL Store API would have written; tests/test_bench_store_copy.py checks that on a
small space, table by table. Embedding blobs (float32) become pgvector ``vector`` values through the store's binary adapter.
Each table is analysed right after its copy, inside the transaction, so that the next table's foreign-key checks
use its primary key instead of scanning it.

Bench-only: the target tables must hold nothing of the space yet.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from tmem.store.postgres import PostgresStore
from tmem.store.rules import tenant_of

# Parents before children (foreign keys). Identity-keyed logs (llm_calls, pending_requests) are not copied.
TABLES = (
    "spaces",
    "sessions",
    "turns",
    "scenes",
    "scene_turns",
    "topics",
    "topic_scenes",
    "items",
    "item_scenes",
    "triggers",
    "trigger_views",
    "personas",
    "build_state",
    "tombstones",
    "item_history",
    "embeddings",
)


def _columns(lite: sqlite3.Connection, table: str) -> list[str]:
    """The columns of ``table`` but ``tenant`` (written from the space key, as the Store API does)."""
    return [str(r[1]) for r in lite.execute(f"PRAGMA table_info({table})") if r[1] != "tenant"]


def copy_space(sqlite_path: str, store: PostgresStore, space: str) -> dict[str, int]:
    """Copy every row of ``space`` from the SQLite file into ``store`` in one transaction; rows copied per table."""
    lite = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    tenant = tenant_of(space)
    counts: dict[str, int] = {}
    try:
        with store._transaction_driver() as conn, conn.cursor() as cur:
            for table in TABLES:
                cols = _columns(lite, table)
                scope = "name" if table == "spaces" else "space"
                quoted = ", ".join(f'"{c}"' for c in cols)
                rows = lite.execute(f"SELECT {quoted} FROM {table} WHERE {scope} = ?", (space,))
                n = 0
                if table == "embeddings":
                    vec = cols.index("vector")
                    with cur.copy(f"COPY embeddings (tenant, {quoted}) FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(["text", *("int4" if c == "dim" else "vector" if c == "vector" else "text"
                                                  for c in cols)])  # fmt: skip
                        for row in rows:
                            values: list[Any] = list(row)
                            values[vec] = np.frombuffer(values[vec], dtype=np.float32)
                            copy.write_row((tenant, *values))
                            n += 1
                else:
                    with cur.copy(f"COPY {table} (tenant, {quoted}) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row((tenant, *row))
                            n += 1
                counts[table] = n
                # Fresh statistics before the next table: its foreign-key checks look rows up in this one, and a
                # table the planner still believes empty is scanned whole for every checked row (quadratic).
                cur.execute(f"ANALYZE {table}")
    finally:
        lite.close()
    return counts
