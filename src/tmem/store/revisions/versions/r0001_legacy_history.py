"""The schema history from before Alembic: the steps of :mod:`tmem.store.legacy`, each recorded in the ``migrations``
table as before.

A new database gets all of them (on SQLite only the steps of the service's control tables run, and revision 0002
creates the store's tables as they stand at that revision); a database written by an older tmem (a v0.1 memory at
schema 1, or any later step) gets the steps it lacks, exactly as that tmem would have applied them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tmem.store.legacy import CONTROL_STEPS, LEDGER, STEPS, apply

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(LEDGER)
    done = {row[0] for row in bind.exec_driver_sql("SELECT version FROM migrations")}
    new_sqlite = not done and bind.dialect.name == "sqlite"  # gets its store tables from revision 0002
    for version, name in enumerate(STEPS, start=1):
        if version in done:
            continue
        if not new_sqlite or name in CONTROL_STEPS:
            apply(bind, name)
        bind.execute(sa.text("INSERT INTO migrations(version, name) VALUES (:v, :n)"), {"v": version, "n": name})


def downgrade() -> None:
    raise NotImplementedError("The pre-Alembic history cannot be undone; restore a backup instead.")
