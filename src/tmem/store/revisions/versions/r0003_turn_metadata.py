"""Turns carry message metadata: ``turns.metadata``, a JSON object of scalars as text, ``'{}'`` when none.

Idempotent: a database whose turns already have the column (added by the pre-Alembic step ``005_turn_metadata`` of
a tmem that had it) is left as it is.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("turns")}
    if "metadata" not in have:
        op.add_column("turns", sa.Column("metadata", sa.Text(), nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("metadata")
