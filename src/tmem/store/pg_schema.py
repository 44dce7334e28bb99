"""The PostgreSQL store's schema steps from before Alembic: the same ordered list as :mod:`tmem.store.migrations`
(same names, same versions), written as PostgreSQL DDL. Frozen history: Alembic's first revision
(``tmem/store/revisions/versions/r0001_legacy_history.py``) applies the steps a database lacks; later schema changes
are Alembic revisions over :mod:`tmem.store.schema`.

Every table is keyed by ``(tenant, space, ...)``. ``tenant`` is an ordinary column the store writes from the space
key (``T/S`` -> ``T``; a plain local name -> ``''``), held equal to it by a CHECK constraint. It leads every primary
key, unique index and foreign key, so that the schema can be distributed by tenant on a sharded PostgreSQL (Citus:
``SELECT create_distributed_table(t, 'tenant')`` for each table) without change: every statement the store runs
names its tenant, and each space's rows live on one shard. docs/scaling.md says why it is a stored column and not a
generated one.

Never edit these steps; change the schema with a new Alembic revision.
"""

from __future__ import annotations

# tenant is the part of the space key before its one '/', or '' for a plain (local) space name.
_TENANT_OF_SPACE = "CASE WHEN strpos(space, '/') > 0 THEN split_part(space, '/', 1) ELSE '' END"


def _keyed(space_col: str = "space") -> str:
    """The tenant/space column pair every table starts with, and the CHECK that ties them."""
    expr = _TENANT_OF_SPACE.replace("space", space_col)
    return f"tenant TEXT NOT NULL, {space_col} TEXT NOT NULL, CHECK (tenant = ({expr}))"


_M001 = f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE spaces (
    {_keyed("name")},
    speakers TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (tenant, name)
);
CREATE TABLE sessions (
    {_keyed()},
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    PRIMARY KEY (tenant, space, id),
    UNIQUE (tenant, space, seq),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE turns (
    {_keyed()},
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    speaker TEXT NOT NULL,
    text TEXT NOT NULL,
    time TEXT NOT NULL,
    caption TEXT,
    PRIMARY KEY (tenant, space, id),
    UNIQUE (tenant, space, seq),
    FOREIGN KEY (tenant, space, session_id) REFERENCES sessions(tenant, space, id) ON DELETE CASCADE
);
CREATE TABLE scenes (
    {_keyed()},
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    narrative TEXT NOT NULL,
    start TEXT NOT NULL,
    "end" TEXT NOT NULL,
    mode TEXT NOT NULL,
    PRIMARY KEY (tenant, space, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE scene_turns (
    {_keyed()},
    scene_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (tenant, space, turn_id),
    FOREIGN KEY (tenant, space, scene_id) REFERENCES scenes(tenant, space, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant, space, turn_id) REFERENCES turns(tenant, space, id) ON DELETE CASCADE
);
CREATE INDEX scene_turns_scene ON scene_turns(tenant, space, scene_id);
CREATE TABLE topics (
    {_keyed()},
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    label TEXT NOT NULL,
    description TEXT NOT NULL,
    PRIMARY KEY (tenant, space, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE topic_scenes (
    {_keyed()},
    topic_id TEXT NOT NULL,
    scene_id TEXT NOT NULL,
    PRIMARY KEY (tenant, space, topic_id, scene_id),
    FOREIGN KEY (tenant, space, topic_id) REFERENCES topics(tenant, space, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant, space, scene_id) REFERENCES scenes(tenant, space, id) ON DELETE CASCADE
);
CREATE INDEX topic_scenes_scene ON topic_scenes(tenant, space, scene_id);
CREATE TABLE items (
    {_keyed()},
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('atomic', 'connected')),
    topic_id TEXT,
    speaker TEXT,
    date TEXT,
    supersedes TEXT,
    superseded_by TEXT,
    turn_ids TEXT NOT NULL DEFAULT '[]',
    mode TEXT NOT NULL,
    PRIMARY KEY (tenant, space, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE item_scenes (
    {_keyed()},
    item_id TEXT NOT NULL,
    scene_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (tenant, space, item_id, scene_id),
    FOREIGN KEY (tenant, space, item_id) REFERENCES items(tenant, space, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant, space, scene_id) REFERENCES scenes(tenant, space, id) ON DELETE CASCADE
);
CREATE INDEX item_scenes_scene ON item_scenes(tenant, space, scene_id);
CREATE TABLE triggers (
    {_keyed()},
    id TEXT NOT NULL,
    family TEXT NOT NULL CHECK (family IN ('entity', 'bridge', 'scene', 'horizon')),
    host_kind TEXT NOT NULL CHECK (host_kind IN ('item', 'scene')),
    host_id TEXT NOT NULL,
    grp INTEGER NOT NULL,
    fields TEXT NOT NULL,
    PRIMARY KEY (tenant, space, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE INDEX triggers_host ON triggers(tenant, space, host_id);
CREATE TABLE trigger_views (
    {_keyed()},
    trigger_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (tenant, space, trigger_id, position),
    FOREIGN KEY (tenant, space, trigger_id) REFERENCES triggers(tenant, space, id) ON DELETE CASCADE
);
CREATE TABLE personas (
    {_keyed()},
    speaker TEXT NOT NULL,
    traits TEXT NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (tenant, space, speaker),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE build_state (
    {_keyed()},
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (tenant, space, key),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE embeddings (
    {_keyed()},
    model_id TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector vector NOT NULL,
    PRIMARY KEY (tenant, space, model_id, text_hash),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE llm_calls (
    id BIGINT GENERATED ALWAYS AS IDENTITY,
    {_keyed()},
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    latency_ms DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'cached', 'batch')),
    created_at TEXT NOT NULL,
    response TEXT,
    error TEXT,
    PRIMARY KEY (tenant, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE INDEX llm_calls_hash ON llm_calls(tenant, space, request_hash);
CREATE TABLE pending_requests (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    {_keyed()},
    request_hash TEXT NOT NULL,
    stage TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, space, request_hash),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
"""

# The service's API keys (hashed, looked up by key id: a reference table on Citus) and its build jobs (by tenant).
_M_SERVICE_CONTROL = """
CREATE TABLE IF NOT EXISTS service_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX IF NOT EXISTS service_keys_tenant ON service_keys(tenant);
CREATE TABLE IF NOT EXISTS service_jobs (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    space TEXT NOT NULL,
    kind TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    progress TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS service_jobs_space ON service_jobs(tenant, space, state);
CREATE INDEX IF NOT EXISTS service_jobs_state ON service_jobs(state)
"""
_M_AGENT_ITEMS = f"""
CREATE TABLE IF NOT EXISTS tombstones (
    {_keyed()},
    kind TEXT NOT NULL CHECK (kind IN ('turn', 'item')),
    id TEXT NOT NULL,
    PRIMARY KEY (tenant, space, kind, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS item_history (
    {_keyed()},
    item_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    change TEXT NOT NULL CHECK (change IN ('edited')),
    old_text TEXT NOT NULL,
    new_text TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (tenant, space, item_id, version),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS leases (
    {_keyed()},
    name TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, space, name),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS turns_session ON turns(tenant, space, session_id, seq)
"""

_M_ITEM_DATE_PRECISION = """
ALTER TABLE items ADD COLUMN IF NOT EXISTS date_end TEXT;
ALTER TABLE items ADD COLUMN IF NOT EXISTS date_precision TEXT;
UPDATE items SET date_precision = 'day' WHERE date IS NOT NULL AND date_precision IS NULL
"""
_M_ITEM_CONFLICTS = """
ALTER TABLE items ADD COLUMN IF NOT EXISTS conflicts_with TEXT NOT NULL DEFAULT '[]'
"""
# Job owners and heartbeats (see the SQLite migration), and an insertion order for jobs and keys (SQLite's rowid).
_M_SERVICE_JOB_OWNER = """
ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS owner TEXT;
ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS heartbeat_at DOUBLE PRECISION;
ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE service_keys ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY;
CREATE INDEX IF NOT EXISTS service_jobs_owner ON service_jobs(owner, state)
"""
# Item slots (see the SQLite migration).
_M_ITEM_SLOT = """
ALTER TABLE items ADD COLUMN IF NOT EXISTS slot TEXT
"""
# Turn metadata (see the SQLite migration).
_M_TURN_METADATA = """
ALTER TABLE turns ADD COLUMN IF NOT EXISTS metadata TEXT NOT NULL DEFAULT '{}'
"""

# The erasure ledger (see the SQLite migration). Keyed by (tenant, seq) for Citus; the tenant CHECK as everywhere.
# No foreign key to spaces: an entry outlives its space. xid: the deleting transaction's id (scrub() checks that no
# snapshot older than it is still open, tmem.store.postgres). seq is an identity: commit order is seq order because
# add_erasure takes a transaction-scoped advisory lock (tmem.store.pg_agent).
_M_ERASURES = f"""
CREATE TABLE IF NOT EXISTS erasures (
    {_keyed()},
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    kind TEXT NOT NULL CHECK (kind IN ('forget', 'delete')),
    erased BOOLEAN NOT NULL DEFAULT FALSE,
    xid BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, seq)
);
CREATE INDEX IF NOT EXISTS erasures_seq ON erasures(seq);
CREATE INDEX IF NOT EXISTS erasures_space ON erasures(tenant, space, seq)
"""

# (name, DDL): the names and order of tmem.store.migrations.MIGRATIONS.
MIGRATIONS: list[tuple[str, str]] = [
    ("001_initial", _M001),
    ("service_control", _M_SERVICE_CONTROL),
    ("agent_items", _M_AGENT_ITEMS),
    ("002_item_date_precision", _M_ITEM_DATE_PRECISION),
    ("003_item_conflicts", _M_ITEM_CONFLICTS),
    ("service_job_owner", _M_SERVICE_JOB_OWNER),
    ("erasure_ledger", _M_ERASURES),
    ("004_item_slot", _M_ITEM_SLOT),
    ("005_turn_metadata", _M_TURN_METADATA),
]


def statements(script: str) -> list[str]:
    """The statements of a DDL script (no statement here contains a ';' inside a literal)."""
    return [s.strip() for s in script.split(";") if s.strip()]
