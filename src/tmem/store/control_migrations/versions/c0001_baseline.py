"""The control tables as tmem made them before Alembic (the memory store's ``service_control`` and
``service_job_owner`` migrations): created where absent, completed where a database stopped between the two.

A database made by that code (a SQLite file or PostgreSQL) is at this revision already; stamping is left to this
revision being idempotent. The SQLite and PostgreSQL shapes differed then; ``c0002`` makes them the same.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "c0001"
down_revision = None
branch_labels = None
depends_on = None

_JOB_COLUMNS = """
    space TEXT NOT NULL,
    kind TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    progress TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT"""

_BEFORE = [
    """CREATE TABLE IF NOT EXISTS service_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)""",
    "CREATE INDEX IF NOT EXISTS service_keys_tenant ON service_keys(tenant)",
]
_AFTER = [
    "CREATE INDEX IF NOT EXISTS service_jobs_space ON service_jobs(tenant, space, state)",
    "CREATE INDEX IF NOT EXISTS service_jobs_state ON service_jobs(state)",
]
_SQLITE = [
    *_BEFORE,
    f"CREATE TABLE IF NOT EXISTS service_jobs (\n    id TEXT PRIMARY KEY,\n    tenant TEXT NOT NULL,{_JOB_COLUMNS}\n)",
    *_AFTER,
]
_POSTGRES = [
    *_BEFORE,
    f"CREATE TABLE IF NOT EXISTS service_jobs (\n    tenant TEXT NOT NULL,\n    id TEXT NOT NULL,{_JOB_COLUMNS},\n"
    "    PRIMARY KEY (tenant, id)\n)",
    *_AFTER,
    "ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS owner TEXT",
    "ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS heartbeat_at DOUBLE PRECISION",
    "ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY",
    "ALTER TABLE service_keys ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY",
    "CREATE INDEX IF NOT EXISTS service_jobs_owner ON service_jobs(owner, state)",
]


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    for statement in _POSTGRES if postgres else _SQLITE:
        op.execute(statement)
    if not postgres:  # SQLite has no ADD COLUMN IF NOT EXISTS
        have = {column["name"] for column in sa.inspect(bind).get_columns("service_jobs")}
        for name, kind in (("owner", "TEXT"), ("heartbeat_at", "REAL")):
            if name not in have:
                op.execute(f"ALTER TABLE service_jobs ADD COLUMN {name} {kind}")


def downgrade() -> None:
    op.execute("DROP TABLE service_jobs")
    op.execute("DROP TABLE service_keys")
