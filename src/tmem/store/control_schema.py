"""The service's control tables (API keys, build jobs) as one SQLAlchemy Core ``MetaData``, the same on SQLite and
PostgreSQL.

Alembic migrates them (:mod:`tmem.store.control_migrations`, version table ``alembic_version_control``, apart from
the memory store's own migrations); a test checks that autogenerate finds no difference between a migrated database
and these tables on both backends. JSON fields are stored as text (:class:`JsonText`), as they always were.

``seq`` orders keys and jobs by insertion: an identity on PostgreSQL, numbered by the insert on SQLite
(:func:`tmem.store.control_dialect.next_seq`). Jobs are keyed by (tenant, id) so that Citus can distribute them by
tenant; keys by their id (looked up by key id before the tenant is known).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

VERSION_TABLE = "alembic_version_control"

metadata = sa.MetaData()


class JsonText(sa.TypeDecorator[Any]):
    """A JSON value kept in a TEXT column."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


def _seq() -> sa.Column[int]:
    return sa.Column("seq", sa.BigInteger, sa.Identity(always=True), nullable=False)


def _text(*names: str, required: bool) -> list[sa.Column[str]]:
    return [sa.Column(name, sa.Text, nullable=not required) for name in names]


def _json(name: str, *, required: bool) -> sa.Column[Any]:
    return sa.Column(name, JsonText, nullable=not required, server_default="{}" if required else None)


keys = sa.Table(
    "service_keys",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    *_text("tenant", "key_hash", "created_at", required=True),
    *_text("revoked_at", required=False),
    _seq(),
    sa.Index("service_keys_tenant", "tenant"),
)

jobs = sa.Table(
    "service_jobs",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("id", sa.Text, primary_key=True),
    *_text("space", "kind", "state", "created_at", required=True),
    *_text("error", "started_at", "finished_at", "owner", required=False),
    _json("params", required=True),
    _json("progress", required=True),
    _json("result", required=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("heartbeat_at", sa.Double),
    _seq(),
    sa.CheckConstraint("state IN ('queued', 'running', 'succeeded', 'failed')", name="service_jobs_state_check"),
    sa.Index("service_jobs_space", "tenant", "space", "state"),
    sa.Index("service_jobs_state", "state"),
    sa.Index("service_jobs_owner", "owner", "state"),
)


def include_name(name: str | None, type_: str, parent_names: MutableMapping[Any, str | None]) -> bool:
    """Autogenerate compares only the control tables (the memory store's tables share the database)."""
    return type_ != "table" or name in metadata.tables
