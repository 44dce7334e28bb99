"""The control tables as tmem made them before Alembic (the memory store's steps ``service_control`` and
``service_job_owner``, :mod:`tmem.store.legacy`): created where absent, completed where a database stopped between
the two.

A database made by that code (a SQLite file or PostgreSQL) is at this revision already; stamping is left to this
revision being idempotent. The SQLite and PostgreSQL shapes differed then; ``c0002`` makes them the same.
"""

from __future__ import annotations

from alembic import op

from tmem.store.legacy import CONTROL_STEPS, apply

revision = "c0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    for step in CONTROL_STEPS:  # the steps as the memory store ran them, from the one place they are written
        apply(op.get_bind(), step)


def downgrade() -> None:
    op.execute("DROP TABLE service_jobs")
    op.execute("DROP TABLE service_keys")
