"""The schema history from before Alembic: the steps of :mod:`tmem.store.migrations` (SQLite) and
:mod:`tmem.store.pg_schema` (PostgreSQL), each recorded in the ``migrations`` table as before.

A new database gets all of them (on SQLite only the steps of the service's control tables run, and revision 0002
creates the store's tables as they stand at that revision); a database written by an older tmem (a v0.1 memory at
schema 1, or any later step) gets the steps it lacks, exactly as that tmem would have applied them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_CONTROL_STEPS = ("service_control", "service_job_owner")  # the service's tables, not described by the store schema
_LEDGER = "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)"


def upgrade() -> None:
    raw = op.get_bind().connection.driver_connection  # the steps are driver-level DDL, in Alembic's transaction
    assert raw is not None
    raw.execute(_LEDGER)
    done = {row[0] for row in raw.execute("SELECT version FROM migrations").fetchall()}
    if op.get_bind().dialect.name == "sqlite":
        from tmem.store.migrations import MIGRATIONS

        for version, (name, step) in enumerate(MIGRATIONS, start=1):
            if version not in done:
                if done or name in _CONTROL_STEPS:  # a new database gets its store tables from revision 0002
                    step(raw)
                raw.execute("INSERT INTO migrations(version, name) VALUES (?, ?)", (version, name))
        return
    from tmem.store.pg_schema import MIGRATIONS as PG_MIGRATIONS
    from tmem.store.pg_schema import statements

    for version, (name, script) in enumerate(PG_MIGRATIONS, start=1):
        if version not in done:
            for statement in statements(script):
                raw.execute(statement)
            raw.execute("INSERT INTO migrations(version, name) VALUES (%s, %s)", (version, name))


def downgrade() -> None:
    raise NotImplementedError("The pre-Alembic history cannot be undone; restore a backup instead.")
