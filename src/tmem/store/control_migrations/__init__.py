"""Alembic migrations of the control tables (:mod:`tmem.store.control_schema`), recorded in their own version table
(``alembic_version_control``) so that they never meet the memory store's migrations in the same database.

:func:`upgrade` runs on every open of the control store, inside the caller's transaction (which holds the writers'
lock), so servers starting together migrate once. A new revision: change ``control_schema``, then run
``alembic -c src/tmem/store/control_migrations/alembic.ini -x url=sqlite:///scratch.db revision --autogenerate -m
WHAT`` against a database at head, and read what it wrote.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from tmem.errors import StoreError
from tmem.store.control_schema import VERSION_TABLE

HERE = Path(__file__).parent


def config(conn: Connection | None = None) -> Config:
    """The Alembic configuration of the control tables, on ``conn`` when given (else ``-x url=...``)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    if conn is not None:
        cfg.attributes["connection"] = conn
    return cfg


def upgrade(conn: Connection) -> None:
    """Bring the control tables of ``conn``'s database to the newest revision (creating them when absent)."""
    try:
        command.upgrade(config(conn), "head")
    except CommandError as exc:  # e.g. a revision this tmem does not know: a newer tmem migrated the database
        raise StoreError(
            f"Cannot migrate the service's keys and jobs tables: {exc}. A newer tmem may have migrated this database "
            f"(see its table {VERSION_TABLE}): run that version, or upgrade tmem."
        ) from exc
