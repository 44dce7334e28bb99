"""The same control tables on both backends: SQLite gets PostgreSQL's shape, ``seq`` (insertion order, until now
SQLite's hidden rowid, which a rebuilt table would not keep), jobs keyed by (tenant, id), and the owner index.

SQLite cannot change a primary key or make a column NOT NULL in place: Alembic's batch mode rebuilds each table
(new table, rows copied, old one dropped, new one renamed; its indexes recreated). PostgreSQL has this shape already.
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op
from sqlalchemy import exc

from tmem.errors import StoreError

revision = "c0002"
down_revision = "c0001"
branch_labels = None
depends_on = None

# The CHECK on jobs' state was unnamed on SQLite: given again, named as PostgreSQL names it.
_STATES = sa.CheckConstraint("state IN ('queued', 'running', 'succeeded', 'failed')", name="service_jobs_state_check")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in ("service_keys", "service_jobs"):
        op.add_column(table, sa.Column("seq", sa.BigInteger))
        op.execute(f"UPDATE {table} SET seq = rowid")
        jobs = table == "service_jobs"
        with warnings.catch_warnings():
            # Batch mode copies the reflected primary key flag of ``id`` and warns that create_primary_key below
            # replaces it: the replacement is what this revision is for.
            warnings.filterwarnings("ignore", "Table '_alembic_tmp_service_jobs' specifies columns", exc.SAWarning)
            with op.batch_alter_table(table, recreate="always", table_args=(_STATES,) if jobs else ()) as batch:
                batch.alter_column("seq", existing_type=sa.BigInteger, nullable=False)
                batch.alter_column("id", existing_type=sa.Text, nullable=False)  # SQLite's TEXT keys allowed NULL
                if jobs:
                    batch.create_primary_key("service_jobs_pkey", ["tenant", "id"])
                    batch.alter_column("heartbeat_at", existing_type=sa.REAL, type_=sa.Double)
    op.create_index("service_jobs_owner", "service_jobs", ["owner", "state"])


def downgrade() -> None:
    raise StoreError("The control tables do not downgrade below c0002: restore a backup taken before the upgrade.")
