"""Alembic environment of the control tables: on the connection tmem passes (``config.attributes``), or on the
database named by ``-x url=...`` from the alembic command line."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from tmem.errors import ConfigError
from tmem.store.control_dialect import connect
from tmem.store.control_schema import VERSION_TABLE, include_name, metadata


def _run(conn: Connection) -> None:
    context.configure(
        connection=conn,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=conn.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise ConfigError("The control tables migrate online only: drop --sql and pass -x url=DATABASE_URL.")
given = context.config.attributes.get("connection")
if isinstance(given, Connection):
    _run(given)
else:
    url = context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        raise ConfigError("Name the database: alembic -c .../alembic.ini -x url=sqlite:///PATH (or postgresql://...).")
    with connect(url).begin() as conn:
        _run(conn)
