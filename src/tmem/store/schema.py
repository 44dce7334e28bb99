"""The space store's tables, once for both backends: one SQLAlchemy Core :data:`metadata` (not the ORM: records stay
the frozen pydantic models of :mod:`tmem.models`, read and written by :mod:`tmem.store.mappers`).

Every table is keyed by ``(tenant, space, ...)``. ``tenant`` is an ordinary column the store writes from the space key
(``T/S`` -> ``T``; a plain local name -> ``''``, :func:`tmem.store.rules.tenant_of`), held equal to it by a CHECK. It
leads every primary key, unique constraint and foreign key, so that the schema can be distributed by tenant on a
sharded PostgreSQL (Citus) without change; docs/scaling.md says why it is stored and not generated.

Dialect differences are type variants only: a vector is a BLOB of little-endian float32s on SQLite and a pgvector
``vector`` on PostgreSQL; an identity is an ``INTEGER`` the store numbers itself on SQLite (inside its one writer's
``BEGIN IMMEDIATE``) and a ``BIGINT GENERATED ALWAYS AS IDENTITY`` on PostgreSQL. Times and JSON are text on both.

The service's control tables (``service_keys``, ``service_jobs``) and pgvector's ``vector_index`` live in the same
database but are not described here (their owners create them); :func:`include_object` leaves them out of Alembic's comparison.
The schema is created and upgraded by the Alembic revisions in ``tmem/store/revisions`` (:mod:`tmem.store.upgrade`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import base as pg_base
from sqlalchemy.types import UserDefinedType


class PgVector(UserDefinedType[Any]):
    """pgvector's ``vector`` (values are numpy arrays, converted by :mod:`tmem.store.pg_vector`)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


pg_base.ischema_names["vector"] = PgVector  # reflection (Alembic's comparison) knows the type

VECTOR = LargeBinary().with_variant(PgVector(), "postgresql")
IDENTITY = BigInteger().with_variant(Integer(), "sqlite")
JSON_LIST = text("'[]'")

metadata = MetaData()


def _tenant_check(space: str) -> CheckConstraint:
    """tenant is the part of the space key before its first '/', or '' for a plain name (portable SQL; a key that
    starts with '/' has the tenant '')."""
    return CheckConstraint(
        f"(tenant = '' AND {space} NOT LIKE '%/%') "
        f"OR (tenant NOT LIKE '%/%' AND substr({space}, 1, length(tenant) + 1) = tenant || '/')"
    )


def _scoped(
    name: str,
    *columns: Any,
    pk: tuple[str, ...],
    parent: bool = True,
    space: str = "space",
    identity: str | None = None,
    key: tuple[str, ...] | None = None,
) -> Table:
    """A table keyed by (tenant, space, *pk) (or by ``key``), deleted with its space when ``parent``, numbered by
    an ``identity`` column when one is named."""
    extra: list[Any] = [_tenant_check(space), PrimaryKeyConstraint(*(key or ("tenant", space, *pk)))]
    lead = [Column(identity, IDENTITY, Identity(always=True), nullable=False)] if identity else []
    if parent:
        extra.append(ForeignKeyConstraint(["tenant", "space"], ["spaces.tenant", "spaces.name"], ondelete="CASCADE"))
    return Table(
        name,
        metadata,
        *lead,
        Column("tenant", Text, nullable=False),
        Column(space, Text, nullable=False),
        *columns,
        *extra,
    )


def _child(cols: list[str], parent: str, parent_cols: list[str]) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(
        ["tenant", "space", *cols], [f"{parent}.tenant", f"{parent}.space", *(f"{parent}.{c}" for c in parent_cols)],
        ondelete="CASCADE",
    )  # fmt: skip


def _link(
    name: str, owner: tuple[str, str], member: tuple[str, str], *, pk: tuple[str, ...] = (), position: bool = True
) -> Table:
    """A link table: (owner id, member id[, position]) rows, each id a record of its table, deleted with either
    record; keyed by both ids unless ``pk`` says otherwise, and indexed by its scene."""
    columns: list[Any] = [_text(owner[0]), _text(member[0])]
    if position:
        columns.append(_int("position"))
    table = _scoped(
        name, *columns, _child([owner[0]], owner[1], ["id"]), _child([member[0]], member[1], ["id"]),
        pk=pk or (owner[0], member[0]), parent=False,
    )  # fmt: skip
    Index(f"{name}_scene", table.c.tenant, table.c.space, table.c.scene_id)
    return table


def _text(name: str, nullable: bool = False, **kw: Any) -> Column[Any]:
    return Column(name, Text, nullable=nullable, **kw)


def _int(name: str) -> Column[Any]:
    return Column(name, Integer, nullable=False)


spaces = _scoped("spaces", _text("speakers", server_default=JSON_LIST), pk=(), parent=False, space="name")

sessions = _scoped(
    "sessions",
    _text("id"),
    _int("seq"),
    _text("started_at"),
    _text("content_hash"),
    UniqueConstraint("tenant", "space", "seq", name="sessions_tenant_space_seq_key"),
    pk=("id",),
)

turns = _scoped(
    "turns",
    _text("id"),
    _text("session_id"),
    _int("seq"),
    _text("speaker"),
    _text("text"),
    _text("time"),
    _text("caption", nullable=True),
    _text("metadata", server_default=text("'{}'")),
    UniqueConstraint("tenant", "space", "seq", name="turns_tenant_space_seq_key"),
    _child(["session_id"], "sessions", ["id"]),
    pk=("id",),
    parent=False,
)
Index("turns_session", turns.c.tenant, turns.c.space, turns.c.session_id, turns.c.seq)

scenes = _scoped(
    "scenes",
    _text("id"),
    _int("seq"),
    _text("title"),
    _text("summary"),
    _text("narrative"),
    _text("start"),
    _text("end"),
    _text("mode"),
    pk=("id",),
)

scene_turns = _link("scene_turns", ("scene_id", "scenes"), ("turn_id", "turns"), pk=("turn_id",))

topics = _scoped("topics", _text("id"), _int("seq"), _text("label"), _text("description"), pk=("id",))

topic_scenes = _link("topic_scenes", ("topic_id", "topics"), ("scene_id", "scenes"), position=False)

items = _scoped(
    "items",
    _text("id"),
    _int("seq"),
    _text("text"),
    _text("kind"),
    _text("topic_id", nullable=True),
    _text("speaker", nullable=True),
    _text("date", nullable=True),
    _text("supersedes", nullable=True),
    _text("superseded_by", nullable=True),
    _text("turn_ids", server_default=JSON_LIST),
    _text("mode"),
    _text("date_end", nullable=True),
    _text("date_precision", nullable=True),
    _text("conflicts_with", server_default=JSON_LIST),
    _text("slot", nullable=True),
    CheckConstraint("kind IN ('atomic', 'connected')"),
    pk=("id",),
)

item_scenes = _link("item_scenes", ("item_id", "items"), ("scene_id", "scenes"))

triggers = _scoped(
    "triggers",
    _text("id"),
    _text("family"),
    _text("host_kind"),
    _text("host_id"),
    _int("grp"),
    _text("fields"),
    CheckConstraint("family IN ('entity', 'bridge', 'scene', 'horizon')"),
    CheckConstraint("host_kind IN ('item', 'scene')"),
    pk=("id",),
)
Index("triggers_host", triggers.c.tenant, triggers.c.space, triggers.c.host_id)

trigger_views = _scoped(
    "trigger_views",
    _text("trigger_id"),
    _int("position"),
    _text("name"),
    _text("text"),
    _child(["trigger_id"], "triggers", ["id"]),
    pk=("trigger_id", "position"),
    parent=False,
)

personas = _scoped("personas", _text("speaker"), _text("traits"), _text("summary"), pk=("speaker",))

build_state = _scoped("build_state", _text("key"), _text("value"), pk=("key",))

embeddings = _scoped(
    "embeddings",
    _text("model_id"),
    _text("text_hash"),
    _int("dim"),
    Column("vector", VECTOR, nullable=False),
    pk=("model_id", "text_hash"),
)

llm_calls = _scoped(
    "llm_calls",
    _text("stage"),
    _text("model"),
    _text("request_hash"),
    _int("tokens_in"),
    _int("tokens_out"),
    Column("latency_ms", Double, nullable=False),
    _int("attempts"),
    _text("outcome"),
    _text("created_at"),
    _text("response", nullable=True),
    _text("error", nullable=True),
    CheckConstraint("outcome IN ('ok', 'error', 'cached', 'batch')"),
    pk=(),
    identity="id",
    key=("tenant", "id"),
)
Index("llm_calls_hash", llm_calls.c.tenant, llm_calls.c.space, llm_calls.c.request_hash)

pending_requests = _scoped(
    "pending_requests", _text("request_hash"), _text("stage"), _text("body"), pk=("request_hash",), identity="seq"
)

tombstones = _scoped(
    "tombstones", _text("kind"), _text("id"), CheckConstraint("kind IN ('turn', 'item')"), pk=("kind", "id")
)

item_history = _scoped(
    "item_history",
    _text("item_id"),
    _int("version"),
    _text("change"),
    _text("old_text"),
    _text("new_text"),
    _text("at"),
    CheckConstraint("change IN ('edited')"),
    pk=("item_id", "version"),
)

leases = _scoped(
    "leases", _text("name"), _text("holder"), Column("expires_at", Double, nullable=False), pk=("name",)
)  # fmt: skip

# The erasure ledger: no foreign key to spaces (an entry outlives its space). ``xid`` is the deleting transaction on
# PostgreSQL (scrub() checks that no older snapshot is open); 0 on SQLite.
erasures = _scoped(
    "erasures",
    _text("kind"),
    Column("erased", Boolean, nullable=False, server_default=text("false")),
    Column("xid", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("kind IN ('forget', 'delete')"),
    pk=(),
    parent=False,
    identity="seq",
    key=("tenant", "seq"),
)
Index("erasures_seq", erasures.c.seq)
Index("erasures_space", erasures.c.tenant, erasures.c.space, erasures.c.seq)
Index("erasures_pending", erasures.c.erased, erasures.c.seq)

# Tables the store's code names and deletes a space's rows from, link tables first.
LINK_TABLES = (scene_turns, topic_scenes, item_scenes, trigger_views)

# Tables in the same database this schema does not own (Alembic's comparison leaves them alone).
FOREIGN_TABLES = frozenset(
    {"service_keys", "service_jobs", "vector_index", "migrations", "alembic_version", "alembic_version_control"}
)


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's filter: tables of the same database that the store does not own are left alone."""
    del obj, reflected, compare_to
    return not (type_ == "table" and name in FOREIGN_TABLES)
