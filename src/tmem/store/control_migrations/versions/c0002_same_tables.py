"""The same control tables on both backends: SQLite gets PostgreSQL's shape, ``seq`` (insertion order, until now
SQLite's hidden rowid, which a rebuilt table would not keep) and jobs keyed by (tenant, id) with the owner index.

SQLite cannot change a primary key in place: each table is rebuilt (new table, rows copied with ``seq`` taken from
the rowid, old table dropped, new one renamed). PostgreSQL has this shape already.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from tmem.errors import StoreError

revision = "c0002"
down_revision = "c0001"
branch_labels = None
depends_on = None

_KEYS = ("id", "tenant", "key_hash", "created_at", "revoked_at")
_JOBS = [
    "tenant",
    "id",
    "space",
    "kind",
    "params",
    "state",
    "progress",
    "error",
    "result",
    "attempts",
    "created_at",
    "started_at",
    "finished_at",
    "owner",
    "heartbeat_at",
]
_INDEXES = {
    "service_keys": [("service_keys_tenant", ["tenant"])],
    "service_jobs": [
        ("service_jobs_space", ["tenant", "space", "state"]),
        ("service_jobs_state", ["state"]),
        ("service_jobs_owner", ["owner", "state"]),
    ],
}


def _seq() -> sa.Column[int]:
    return sa.Column("seq", sa.BigInteger, nullable=False)


def _rebuild(table: str, columns: tuple[str, ...] | list[str], *definition: sa.Column[Any] | sa.Constraint) -> None:
    op.create_table(f"{table}_c0002", *definition)
    names = ", ".join(columns)
    op.execute(f"INSERT INTO {table}_c0002 ({names}, seq) SELECT {names}, rowid FROM {table} ORDER BY rowid")
    op.drop_table(table)  # its indexes go with it
    op.rename_table(f"{table}_c0002", table)
    for name, indexed in _INDEXES[table]:
        op.create_index(name, table, indexed)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    text = sa.Text
    _rebuild(
        "service_keys",
        _KEYS,
        sa.Column("id", text, primary_key=True),
        sa.Column("tenant", text, nullable=False),
        sa.Column("key_hash", text, nullable=False),
        sa.Column("created_at", text, nullable=False),
        sa.Column("revoked_at", text),
        _seq(),
    )
    _rebuild(
        "service_jobs",
        _JOBS,
        sa.Column("tenant", text, primary_key=True),
        sa.Column("id", text, primary_key=True),
        sa.Column("space", text, nullable=False),
        sa.Column("kind", text, nullable=False),
        sa.Column("params", text, nullable=False, server_default="{}"),
        sa.Column("state", text, nullable=False),
        sa.Column("progress", text, nullable=False, server_default="{}"),
        sa.Column("error", text),
        sa.Column("result", text),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", text, nullable=False),
        sa.Column("started_at", text),
        sa.Column("finished_at", text),
        sa.Column("owner", text),
        sa.Column("heartbeat_at", sa.Double),
        _seq(),
        sa.CheckConstraint("state IN ('queued', 'running', 'succeeded', 'failed')", name="service_jobs_state_check"),
    )


def downgrade() -> None:
    raise StoreError("The control tables do not downgrade below c0002: restore a backup taken before the upgrade.")
