"""SQLite: record in the file's header that every byte of it was written with ``secure_delete`` on, so that an
erasure needs no ``VACUUM`` (:meth:`tmem.store.sqlite.SQLiteStore.scrub`).

The record is ``PRAGMA user_version`` = :data:`tmem.store.upgrade.SECURE_DELETE_MARK`. This revision writes it only
into a database it creates (the upgrade starts from an empty file: ``config.attributes["new_database"]``, set by
:func:`tmem.store.upgrade.upgrade_sqlite`), since every connection tmem opens on it has ``secure_delete`` on. A file
written before (by a tmem from before secure_delete, or another tool) may hold deleted bytes in free pages and unused
parts of pages: it gets the record from the first scrub's ``VACUUM``, which rewrites it. PostgreSQL: nothing.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import context, op

from tmem.store.upgrade import SECURE_DELETE_MARK

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite" and context.config.attributes.get("new_database"):
        op.execute(f"PRAGMA user_version = {SECURE_DELETE_MARK}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("PRAGMA user_version = 0")
