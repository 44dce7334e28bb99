"""Alembic's environment for the store: always run on a connection the store hands over (``config.attributes``)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from tmem.store.schema import include_object, metadata

MIGRATION_LOCK = 7_460_135_001  # pg_advisory_xact_lock key: one process migrates a PostgreSQL database at a time


def run() -> None:
    connection: Connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        include_object=include_object,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))
        context.run_migrations()


run()
