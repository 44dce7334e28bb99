"""The store's schema steps from before Alembic, written once for SQLite and PostgreSQL: an ordered list of named
steps, each recorded in the ``migrations`` table. Frozen history: Alembic's first revision
(``tmem/store/revisions/versions/r0001_legacy_history.py``) applies the steps a database lacks, and the control
tables' first revision (``control_migrations/versions/c0001_baseline.py``) the two steps that make the service's
tables; later schema changes are Alembic revisions over :mod:`tmem.store.schema`. Never edit these steps.

A step is a list of statements in which ``$words`` stand for what differs between the backends (:data:`_WORDS`:
type names, the tenant key of PostgreSQL, its inline constraints), and a statement that starts ``sqlite:`` or
``postgresql:`` runs on that backend only. SQLite has no ``ADD COLUMN IF NOT EXISTS``: there the column is looked
up first. ``migrations.applied_at`` is left NULL: tmem reads no date from the machine's clock except the LLM log's
bookkeeping time.

On PostgreSQL every table is keyed by ``(tenant, space, ...)``. ``tenant`` is an ordinary column the store writes
from the space key (``T/S`` -> ``T``; a plain local name -> ``''``), held equal to it by a CHECK constraint. It leads
every primary key, unique index and foreign key, so that the schema can be distributed by tenant on a sharded
PostgreSQL (Citus: ``SELECT create_distributed_table(t, 'tenant')`` for each table) without change. docs/scaling.md
says why it is a stored column and not a generated one.
"""

from __future__ import annotations

import re
from string import Template

import sqlalchemy as sa

from tmem.errors import StoreError

LEDGER = "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)"
CONTROL_STEPS = ("service_control", "service_job_owner")  # the service's tables (tmem.store.control_schema)

# tenant is the part of the space key before its one '/', or '' for a plain (local) space name.
_TENANT_OF = "CASE WHEN strpos({c}, '/') > 0 THEN split_part({c}, '/', 1) ELSE '' END"


def _keyed(column: str) -> str:
    """PostgreSQL's tenant/space column pair every table starts with, and the CHECK that ties them."""
    return f"tenant TEXT NOT NULL, {column} TEXT NOT NULL, CHECK (tenant = ({_TENANT_OF.format(c=column)}))"


_WORDS: dict[str, dict[str, str]] = {
    "sqlite": {
        "key": "space TEXT NOT NULL",  # a child table's space column (its parents reach spaces)
        "keyref": "space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE",  # a table under spaces
        "name": "name TEXT PRIMARY KEY",
        "namekey": "",
        "t": "",  # leads every key, foreign key and index column list
        "tail": "",  # PostgreSQL's foreign key to spaces
        "unique": "",  # SQLite has unique indexes on (space, seq) instead
        "idkey": "",
        "jobid": "id TEXT PRIMARY KEY, tenant TEXT NOT NULL",
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "queue": "",  # SQLite's queue order is the rowid
        "real": "REAL",
        "blob": "BLOB",
    },
    "postgresql": {
        "key": _keyed("space"),
        "keyref": _keyed("space"),
        "name": _keyed("name"),
        "namekey": ", PRIMARY KEY (tenant, name)",
        "t": "tenant, ",
        "tail": ", FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE",
        "unique": ", UNIQUE (tenant, space, seq)",
        "idkey": ", PRIMARY KEY (tenant, id)",
        "jobid": "tenant TEXT NOT NULL, id TEXT NOT NULL",
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY",
        "queue": "seq BIGINT GENERATED ALWAYS AS IDENTITY, ",
        "real": "DOUBLE PRECISION",
        "blob": "vector",
    },
}

_INITIAL = [
    "postgresql: CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE spaces ($name, speakers TEXT NOT NULL DEFAULT '[]'$namekey)",
    "CREATE TABLE sessions ($keyref, id TEXT NOT NULL, seq INTEGER NOT NULL, started_at TEXT NOT NULL, "
    "content_hash TEXT NOT NULL, PRIMARY KEY (${t}space, id)$unique$tail)",
    "sqlite: CREATE UNIQUE INDEX sessions_seq ON sessions(space, seq)",
    "CREATE TABLE turns ($keyref, id TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "speaker TEXT NOT NULL, text TEXT NOT NULL, time TEXT NOT NULL, caption TEXT, PRIMARY KEY (${t}space, id)$unique, "
    "FOREIGN KEY (${t}space, session_id) REFERENCES sessions(${t}space, id) ON DELETE CASCADE)",
    "sqlite: CREATE UNIQUE INDEX turns_seq ON turns(space, seq)",
    "CREATE TABLE scenes ($keyref, id TEXT NOT NULL, seq INTEGER NOT NULL, title TEXT NOT NULL, summary TEXT NOT NULL, "
    'narrative TEXT NOT NULL, start TEXT NOT NULL, "end" TEXT NOT NULL, mode TEXT NOT NULL, '
    "PRIMARY KEY (${t}space, id)$tail)",
    "CREATE TABLE scene_turns ($key, scene_id TEXT NOT NULL, turn_id TEXT NOT NULL, position INTEGER NOT NULL, "
    "PRIMARY KEY (${t}space, turn_id), "
    "FOREIGN KEY (${t}space, scene_id) REFERENCES scenes(${t}space, id) ON DELETE CASCADE, "
    "FOREIGN KEY (${t}space, turn_id) REFERENCES turns(${t}space, id) ON DELETE CASCADE)",
    "CREATE INDEX scene_turns_scene ON scene_turns(${t}space, scene_id)",
    "CREATE TABLE topics ($keyref, id TEXT NOT NULL, seq INTEGER NOT NULL, label TEXT NOT NULL, "
    "description TEXT NOT NULL, PRIMARY KEY (${t}space, id)$tail)",
    "CREATE TABLE topic_scenes ($key, topic_id TEXT NOT NULL, scene_id TEXT NOT NULL, "
    "PRIMARY KEY (${t}space, topic_id, scene_id), FOREIGN KEY (${t}space, topic_id) REFERENCES topics(${t}space, id) "
    "ON DELETE CASCADE, FOREIGN KEY (${t}space, scene_id) REFERENCES scenes(${t}space, id) ON DELETE CASCADE)",
    "postgresql: CREATE INDEX topic_scenes_scene ON topic_scenes(tenant, space, scene_id)",
    "CREATE TABLE items ($keyref, id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL, "
    "kind TEXT NOT NULL CHECK (kind IN ('atomic', 'connected')), topic_id TEXT, speaker TEXT, date TEXT, "
    "supersedes TEXT, superseded_by TEXT, turn_ids TEXT NOT NULL DEFAULT '[]', mode TEXT NOT NULL, "
    "PRIMARY KEY (${t}space, id)$tail)",
    "CREATE TABLE item_scenes ($key, item_id TEXT NOT NULL, scene_id TEXT NOT NULL, position INTEGER NOT NULL, "
    "PRIMARY KEY (${t}space, item_id, scene_id), FOREIGN KEY (${t}space, item_id) REFERENCES items(${t}space, id) "
    "ON DELETE CASCADE, FOREIGN KEY (${t}space, scene_id) REFERENCES scenes(${t}space, id) ON DELETE CASCADE)",
    "CREATE INDEX item_scenes_scene ON item_scenes(${t}space, scene_id)",
    "CREATE TABLE triggers ($keyref, id TEXT NOT NULL, "
    "family TEXT NOT NULL CHECK (family IN ('entity', 'bridge', 'scene', 'horizon')), "
    "host_kind TEXT NOT NULL CHECK (host_kind IN ('item', 'scene')), host_id TEXT NOT NULL, grp INTEGER NOT NULL, "
    "fields TEXT NOT NULL, PRIMARY KEY (${t}space, id)$tail)",
    "CREATE INDEX triggers_host ON triggers(${t}space, host_id)",
    "CREATE TABLE trigger_views ($key, trigger_id TEXT NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, "
    "text TEXT NOT NULL, PRIMARY KEY (${t}space, trigger_id, position), FOREIGN KEY (${t}space, trigger_id) "
    "REFERENCES triggers(${t}space, id) ON DELETE CASCADE)",
    "CREATE TABLE personas ($keyref, speaker TEXT NOT NULL, traits TEXT NOT NULL, summary TEXT NOT NULL, "
    "PRIMARY KEY (${t}space, speaker)$tail)",
    "CREATE TABLE build_state ($keyref, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (${t}space, key)$tail)",
    "CREATE TABLE embeddings ($keyref, model_id TEXT NOT NULL, text_hash TEXT NOT NULL, dim INTEGER NOT NULL, "
    "vector $blob NOT NULL, PRIMARY KEY (${t}space, model_id, text_hash)$tail)",
    "CREATE TABLE llm_calls (id $serial, $keyref, stage TEXT NOT NULL, model TEXT NOT NULL, "
    "request_hash TEXT NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, "
    "latency_ms $real NOT NULL, attempts INTEGER NOT NULL, "
    "outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'cached', 'batch')), created_at TEXT NOT NULL, "
    "response TEXT, error TEXT$idkey$tail)",
    "CREATE INDEX llm_calls_hash ON llm_calls(${t}space, request_hash)",
    "CREATE TABLE pending_requests (${queue}$keyref, request_hash TEXT NOT NULL, stage TEXT NOT NULL, "
    "body TEXT NOT NULL, PRIMARY KEY (${t}space, request_hash)$tail)",
]

# The HTTP service's API keys (hashed; on Citus a reference table, looked up by key id) and its build jobs.
_SERVICE_CONTROL = [
    "CREATE TABLE IF NOT EXISTS service_keys (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_hash TEXT NOT NULL, "
    "created_at TEXT NOT NULL, revoked_at TEXT)",
    "CREATE INDEX IF NOT EXISTS service_keys_tenant ON service_keys(tenant)",
    "CREATE TABLE IF NOT EXISTS service_jobs ($jobid, space TEXT NOT NULL, kind TEXT NOT NULL, "
    "params TEXT NOT NULL DEFAULT '{}', state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', "
    "'failed')), progress TEXT NOT NULL DEFAULT '{}', error TEXT, result TEXT, attempts INTEGER NOT NULL DEFAULT 0, "
    "created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT$idkey)",
    "CREATE INDEX IF NOT EXISTS service_jobs_space ON service_jobs(tenant, space, state)",
    "CREATE INDEX IF NOT EXISTS service_jobs_state ON service_jobs(state)",
]

# Agent operations (issue 9): tombstones of forgotten turns and items, item edit history, build leases, and an index
# for appending to a session.
_AGENT_ITEMS = [
    "CREATE TABLE IF NOT EXISTS tombstones ($keyref, kind TEXT NOT NULL CHECK (kind IN ('turn', 'item')), "
    "id TEXT NOT NULL, PRIMARY KEY (${t}space, kind, id)$tail)",
    "CREATE TABLE IF NOT EXISTS item_history ($keyref, item_id TEXT NOT NULL, version INTEGER NOT NULL, "
    "change TEXT NOT NULL CHECK (change IN ('edited')), old_text TEXT NOT NULL, new_text TEXT NOT NULL, "
    "at TEXT NOT NULL, PRIMARY KEY (${t}space, item_id, version)$tail)",
    "CREATE TABLE IF NOT EXISTS leases ($keyref, name TEXT NOT NULL, holder TEXT NOT NULL, "
    "expires_at $real NOT NULL, PRIMARY KEY (${t}space, name)$tail)",
    "CREATE INDEX IF NOT EXISTS turns_session ON turns(${t}space, session_id, seq)",
]

# Service jobs record which server process runs them (``owner``, a lease-holder name) and when it last said it was
# alive (``heartbeat_at``, wall-clock seconds), so that several servers on one database re-queue only the jobs of a
# server that stopped. PostgreSQL also got an insertion order for jobs and keys (SQLite's rowid).
_SERVICE_JOB_OWNER = [
    "ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS owner TEXT",
    "ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS heartbeat_at $real",
    "postgresql: ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY",
    "postgresql: ALTER TABLE service_keys ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY",
    "postgresql: CREATE INDEX IF NOT EXISTS service_jobs_owner ON service_jobs(owner, state)",
]

# The erasure ledger (issue 23): one row per forget or space deletion, naming only the space, kept after the space is
# gone (no foreign key). On PostgreSQL keyed by (tenant, seq) for Citus; xid is the deleting transaction's id.
_ERASURES = [
    "sqlite: CREATE TABLE IF NOT EXISTS erasures (seq INTEGER PRIMARY KEY AUTOINCREMENT, space TEXT NOT NULL, "
    "kind TEXT NOT NULL CHECK (kind IN ('forget', 'delete')), erased INTEGER NOT NULL DEFAULT 0)",
    "postgresql: CREATE TABLE IF NOT EXISTS erasures ($key, seq BIGINT GENERATED ALWAYS AS IDENTITY, "
    "kind TEXT NOT NULL CHECK (kind IN ('forget', 'delete')), erased BOOLEAN NOT NULL DEFAULT FALSE, "
    "xid BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (tenant, seq))",
    "postgresql: CREATE INDEX IF NOT EXISTS erasures_seq ON erasures(seq)",
    "CREATE INDEX IF NOT EXISTS erasures_space ON erasures(${t}space, seq)",
    "sqlite: CREATE INDEX IF NOT EXISTS erasures_pending ON erasures(erased, seq)",
]

# (name, statements) in the order they were applied; a database records each by its place (version) and name.
_STEPS: dict[str, list[str]] = {
    "001_initial": _INITIAL,
    "service_control": _SERVICE_CONTROL,
    "agent_items": _AGENT_ITEMS,
    # Items record what their date names (issue 10); dates stored before were full ISO days.
    "002_item_date_precision": [
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS date_end TEXT",
        "ALTER TABLE items ADD COLUMN IF NOT EXISTS date_precision TEXT",
        "UPDATE items SET date_precision = 'day' WHERE date IS NOT NULL AND date_precision IS NULL",
    ],
    "003_item_conflicts": ["ALTER TABLE items ADD COLUMN IF NOT EXISTS conflicts_with TEXT NOT NULL DEFAULT '[]'"],
    "service_job_owner": _SERVICE_JOB_OWNER,
    "erasure_ledger": _ERASURES,
    "004_item_slot": ["ALTER TABLE items ADD COLUMN IF NOT EXISTS slot TEXT"],  # issue 21
    "005_turn_metadata": ["ALTER TABLE turns ADD COLUMN IF NOT EXISTS metadata TEXT NOT NULL DEFAULT '{}'"],
}
STEPS: tuple[str, ...] = tuple(_STEPS)

_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+) (.+)")


def statements(step: str, dialect: str) -> list[str]:
    """The statements of ``step`` on ``dialect`` ('sqlite' or 'postgresql'), as that backend's tmem ran them."""
    words = _WORDS.get(dialect)
    if words is None:
        raise StoreError(
            f"The memory store runs on SQLite or PostgreSQL, not {dialect!r}: open it by a sqlite:/// or "
            "postgresql:// URL."
        )
    found: list[str] = []
    for line in _STEPS[step]:
        only, _, rest = line.partition(": ")
        if only in _WORDS:
            if only != dialect:
                continue
            line = rest
        found.append(Template(line).substitute(words))
    return found


def apply(conn: sa.Connection, step: str) -> None:
    """Run ``step`` on ``conn``'s database, in its open transaction (the caller records it in ``migrations``)."""
    sqlite = conn.dialect.name == "sqlite"
    for statement in statements(step, conn.dialect.name):
        added = _ADD_COLUMN.fullmatch(statement)
        if sqlite and added:  # SQLite has no ADD COLUMN IF NOT EXISTS
            table, column, spec = added.groups()
            if column in {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table})")}:
                continue
            statement = f"ALTER TABLE {table} ADD COLUMN {column} {spec}"
        conn.exec_driver_sql(statement)
